"""memlane: conversation memory for LLM agents.

Start with :class:`Memory`::

    from memlane import Memory
    mem = Memory("~/.memlane/memory.db")
    sid = mem.create_session(system_prompt="You are helpful.")
    mem.save_message(sid, {"role": "user", "content": "hi"})
"""

from typing import TYPE_CHECKING, Any

from memlane.config import Settings, load_settings
from memlane.errors import (
    ConfigError,
    ConflictError,
    CorruptRecordError,
    EmbedderMismatchError,
    InvalidInputError,
    LockTimeoutError,
    MemlaneError,
    MissingExtraError,
    NotFoundError,
    PermissionDeniedError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from memlane.memory import Memory
from memlane.models import Message, SearchHit, Session, Turn

if TYPE_CHECKING:
    from memlane.aio import AsyncMemory, AsyncMemoryClient
    from memlane.context.packet import ContextPacket
    from memlane.notes.models import Note
    from memlane.rooms.handler import CommandResult
    from memlane.state.checkpoint import ConversationCheckpointSnapshot

__version__ = "0.1.0"

# Imported on first use: the context engine pulls in numpy, `import memlane` stays cheap.
_LAZY = {
    "AsyncMemory": "memlane.aio",
    "AsyncMemoryClient": "memlane.aio",
    "CommandResult": "memlane.rooms.handler",
    "ContextPacket": "memlane.context.packet",
    "ConversationCheckpointSnapshot": "memlane.state.checkpoint",
    "Note": "memlane.notes.models",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memlane' has no attribute {name!r}")


__all__ = [
    "AsyncMemory",
    "AsyncMemoryClient",
    "CommandResult",
    "ConfigError",
    "ConflictError",
    "ContextPacket",
    "ConversationCheckpointSnapshot",
    "CorruptRecordError",
    "EmbedderMismatchError",
    "InvalidInputError",
    "LockTimeoutError",
    "MemlaneError",
    "Memory",
    "Message",
    "MissingExtraError",
    "NotFoundError",
    "Note",
    "PermissionDeniedError",
    "SearchHit",
    "Session",
    "SessionExistsError",
    "SessionNotFoundError",
    "Settings",
    "StorageError",
    "Turn",
    "__version__",
    "load_settings",
]
