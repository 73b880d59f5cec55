"""What every integration module needs: the framework import with an install hint, and
one async view of the Memory it was given."""

from __future__ import annotations

import importlib
from types import ModuleType

from memlane.aio import AsyncMemory, AsyncMemoryClient
from memlane.client import MemoryClient
from memlane.errors import MissingExtraError
from memlane.memory import Memory

#: What an integration that needs only the public surface accepts: memory in this process
#: or a memlane server (``MemoryClient``), sync or async.
AnyMemory = Memory | AsyncMemory | MemoryClient | AsyncMemoryClient


def require(module: str, feature: str, extra: str) -> ModuleType:
    """Import the framework, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra) from exc


def as_async(memory: AnyMemory) -> AsyncMemory | AsyncMemoryClient:
    if isinstance(memory, AsyncMemory | AsyncMemoryClient):
        return memory
    if isinstance(memory, MemoryClient):
        return AsyncMemoryClient.wrap(memory)
    return AsyncMemory.wrap(memory)


def as_sync(memory: Memory | AsyncMemory) -> Memory:
    return memory.sync if isinstance(memory, AsyncMemory) else memory
