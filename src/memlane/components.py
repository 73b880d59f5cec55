"""Where Memory's optional parts are attached.

Each entry is ``"module:function"``; the function takes the Memory and wires
itself in (observers on append, ``mem.extensions[...]`` entries, closers).
Keeping the list here lets each part live in its own package without
``memory.py`` importing them all, and a part whose extra is missing is
skipped with a debug log instead of breaking the core.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.memory import Memory

log = logging.getLogger(__name__)

# Order matters: later parts may use what earlier ones registered.
COMPONENTS: list[str] = [
    "memlane.search.recall:attach",
    "memlane.state.tracker:attach",  # before anything that reads session state per turn
    "memlane.context.summaries:attach",  # rolling summaries + checkpoints, on a background thread
    "memlane.rooms.component:attach",  # notes, memory commands, archive, lifecycle (after flush is set)
]


def attach_all(mem: Memory) -> None:
    for spec in COMPONENTS:
        module_name, _, func_name = spec.partition(":")
        module = importlib.import_module(module_name)
        getattr(module, func_name)(mem)
