"""What every integration module needs: the framework import with an install hint, and
one async view of the Memory it was given."""

from __future__ import annotations

import importlib
from types import ModuleType

from memlane.aio import AsyncMemory
from memlane.errors import MissingExtraError
from memlane.memory import Memory


def require(module: str, feature: str, extra: str) -> ModuleType:
    """Import the framework, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra) from exc


def as_async(memory: Memory | AsyncMemory) -> AsyncMemory:
    return memory if isinstance(memory, AsyncMemory) else AsyncMemory.wrap(memory)


def as_sync(memory: Memory | AsyncMemory) -> Memory:
    return memory.sync if isinstance(memory, AsyncMemory) else memory
