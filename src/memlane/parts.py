"""The optional parts a Memory composes, as typed attributes (``mem.parts``).

Each part is attached by its own package (``components.attach_all`` calls them in order)
and is ``None`` when it is not attached (memory disabled, or its extra not installed), so
the type checker sees every seam. ``mem.extensions`` is a view of the same attributes by
the old string keys, kept only so existing callers keep working; new code uses
``mem.parts.<name>``, and a new part adds a typed field here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlane.context.summaries import SummaryManager
    from memlane.models import MessageFilter, SearchHit
    from memlane.notes.service import NotesService
    from memlane.search.engine import RecallEngine
    from memlane.search.indexer import Indexer
    from memlane.state.checkpoint import CheckpointManager
    from memlane.state.sessions import SessionManager
    from memlane.state.tracker import StateTracker

__all__ = ["Extensions", "FlushHook", "ForgetHook", "Parts", "StatsHook", "TurnHook"]

#: Waits up to ``timeout`` seconds (None: no limit) for a part's background work.
FlushHook = Callable[[float | None], object]
#: Drops a part's derived data of a session (all of it when message ids is None).
ForgetHook = Callable[[str, Sequence[int] | None], None]
#: Adds a part's figures to ``mem.stats()``.
StatsHook = Callable[[], dict[str, Any]]
#: Runs after ``store_interaction`` stored a turn, before it returns: (session id).
TurnHook = Callable[[str], object]


@dataclass(eq=False)
class Parts:
    """What is attached to one Memory. Every field is optional: absent parts are None."""

    recall: RecallEngine | None = None
    """Hybrid search (keyword + vectors): modes and tuning."""
    search: Callable[[str, MessageFilter, int], list[SearchHit]] | None = None
    """What ``Memory.search`` calls when recall is attached: (query, filter, top_k) -> hits."""
    indexer: Indexer | None = None
    """The background embedder (None when vectors are switched off)."""
    state: StateTracker | None = None
    sessions: SessionManager | None = None
    summaries: SummaryManager | None = None
    checkpoints: CheckpointManager | None = None
    notes: NotesService | None = None
    render_transcript: Callable[..., str] | None = None
    """Speaker rendering bound to the current Anchor (rooms)."""
    label_messages: Callable[..., Any] | None = None
    promote: Callable[[str], Any] | None = None
    """Overrides what ``shutdown`` runs to promote a session's notes (default: the notes
    component's promoter)."""
    flush_hooks: list[FlushHook] = field(default_factory=list)
    forget_hooks: list[ForgetHook] = field(default_factory=list)
    stats_hooks: list[StatsHook] = field(default_factory=list)
    turn_hooks: list[TurnHook] = field(default_factory=list)

    def flush(self, timeout: float | None) -> None:
        for hook in list(self.flush_hooks):
            hook(timeout)


_ATTRIBUTES = frozenset({
    "recall", "search", "indexer", "state", "sessions", "summaries", "checkpoints", "notes",
    "render_transcript", "label_messages", "promote",
})
_LISTS = {"forget_hooks": "forget_hooks", "stats_hooks": "stats_hooks", "turn_hooks": "turn_hooks"}


class Extensions(MutableMapping[str, Any]):
    """``mem.extensions``: the old string-keyed view of :class:`Parts` (for callers written
    before it). Unknown keys are refused: add a typed field to :class:`Parts` instead."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    def _present(self) -> list[str]:
        names = [n for n in sorted(_ATTRIBUTES) if getattr(self._parts, n) is not None]
        if self._parts.flush_hooks:
            names.append("flush")
        return names + list(_LISTS)

    def __getitem__(self, key: str) -> Any:
        if key in _ATTRIBUTES:
            value = getattr(self._parts, key)
            if value is None:
                raise KeyError(key)
            return value
        if key in _LISTS:
            return getattr(self._parts, _LISTS[key])
        if key == "flush" and self._parts.flush_hooks:
            return self._parts.flush
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key in _ATTRIBUTES:
            setattr(self._parts, key, value)
        elif key in _LISTS:
            setattr(self._parts, _LISTS[key], list(value))
        elif key == "flush":
            self._parts.flush_hooks[:] = [value]
        else:
            raise KeyError(
                f"mem.extensions has no {key!r}: parts are typed attributes of mem.parts "
                "(memlane/parts.py); add a field there"
            )

    def __delitem__(self, key: str) -> None:
        if key in _ATTRIBUTES:
            setattr(self._parts, key, None)
        elif key == "flush":
            self._parts.flush_hooks.clear()
        elif key in _LISTS:
            getattr(self._parts, _LISTS[key]).clear()
        else:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())
