"""memlane: conversation memory for LLM agents.

Start with :class:`Memory`::

    from memlane import Memory
    mem = Memory("~/.memlane/memory.db")
    sid = mem.create_session(system_prompt="You are helpful.")
    mem.save_message(sid, {"role": "user", "content": "hi"})
"""

from memlane.config import Settings, load_settings
from memlane.errors import (
    ConfigError,
    ConflictError,
    CorruptRecordError,
    EmbedderMismatchError,
    InvalidInputError,
    MemlaneError,
    MissingExtraError,
    NotFoundError,
    PermissionDeniedError,
    SessionNotFoundError,
    StorageError,
)
from memlane.memory import Memory
from memlane.models import Message, SearchHit, Session, Turn

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "ConflictError",
    "CorruptRecordError",
    "EmbedderMismatchError",
    "InvalidInputError",
    "MemlaneError",
    "Memory",
    "Message",
    "MissingExtraError",
    "NotFoundError",
    "PermissionDeniedError",
    "SearchHit",
    "Session",
    "SessionNotFoundError",
    "Settings",
    "StorageError",
    "Turn",
    "__version__",
    "load_settings",
]
