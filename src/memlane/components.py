"""Where Memory's optional parts are attached, in order.

Each part's ``attach(mem)`` wires itself in: observers on append, closers, and its typed
attribute of ``mem.parts`` (see parts.py). The imports are inside the function so
``import memlane`` stays cheap and ``memory.py`` does not import every feature package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.memory import Memory


def attach_all(mem: Memory) -> None:
    # Order matters: later parts use what earlier ones set.
    from memlane.rooms.component import attach as attach_rooms
    from memlane.search.recall import attach as attach_recall
    from memlane.state.checkpoint import attach as attach_summaries
    from memlane.state.sessions import attach as attach_sessions
    from memlane.state.tracker import attach as attach_state

    attach_recall(mem)
    attach_state(mem)  # before anything that reads session state per turn
    attach_sessions(mem)  # expiry, per-user cap, topic changes (reads the state)
    attach_summaries(mem)  # rolling summaries + checkpoints, on a background thread
    attach_rooms(mem)  # notes, memory commands, archive, lifecycle (after the flush hooks)
