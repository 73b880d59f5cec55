"""The optional parts a Memory composes, as typed attributes (``mem.parts``).

``components.py`` provides each part, made on first use (or when background work starts),
and a part is ``None`` when it is not attached (memory disabled, or its extra not
installed), so the type checker sees every seam. ``mem.extensions`` is a view of the same attributes by
the old string keys, kept only so existing callers keep working; new code uses
``mem.parts.<name>``, and a new part adds a typed field here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from memlane.context.answers import ResponseCache
    from memlane.context.summaries import SummaryManager
    from memlane.models import MessageFilter, SearchHit
    from memlane.notes.service import NotesService
    from memlane.search.engine import RecallEngine
    from memlane.search.indexer import Indexer
    from memlane.state.checkpoint import CheckpointManager
    from memlane.state.sessions import SessionManager
    from memlane.state.tracker import StateTracker

__all__ = ["Extensions", "FlushHook", "ForgetHook", "Parts", "StatsHook", "TurnHook"]

T = TypeVar("T")

#: Waits up to ``timeout`` seconds (None: no limit) for a part's background work.
FlushHook = Callable[[float | None], object]
#: Drops a part's derived data of a session (all of it when message ids is None).
ForgetHook = Callable[[str, Sequence[int] | None], None]
#: Adds a part's figures to ``mem.stats()``.
StatsHook = Callable[[], dict[str, Any]]
#: Runs after ``store_interaction`` stored a turn, before it returns: (session id).
TurnHook = Callable[[str], object]


class _Part(Generic[T]):
    """A typed attribute of :class:`Parts` whose value is made on first use."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Part[T]: ...
    @overload
    def __get__(self, obj: Parts, objtype: type | None = None) -> T | None: ...
    def __get__(self, obj: Parts | None, objtype: type | None = None) -> T | _Part[T] | None:
        if obj is None:
            return self
        obj.build(self.name)
        value: T | None = obj._values.get(self.name)
        return value

    def __set__(self, obj: Parts, value: T | None) -> None:
        obj.build(self.name)  # made first, so what is set here is not replaced by it
        obj._values[self.name] = value


class Parts:
    """What is attached to one Memory. Every part is optional: absent parts are None.

    A part is made the first time it is used (read here, or when background work starts;
    see :meth:`provide`), not when the Memory opens: most processes write and read windows
    and never need the search engine, the state tracker or the notes, so they do not pay
    for importing and building them (``memlane bench cold``).
    """

    recall: _Part[RecallEngine] = _Part()
    """Hybrid search (keyword + vectors): modes and tuning."""
    search: _Part[Callable[[str, MessageFilter, int], list[SearchHit]]] = _Part()
    """What ``Memory.search`` calls when recall is attached: (query, filter, top_k) -> hits."""
    indexer: _Part[Indexer] = _Part()
    """The background embedder (None when vectors are switched off)."""
    backlog: _Part[Callable[[], dict[str, int]]] = _Part()
    """Derived work waiting, by kind: messages whose vector is not made yet ("vectors")."""
    state: _Part[StateTracker] = _Part()
    sessions: _Part[SessionManager] = _Part()
    summaries: _Part[SummaryManager] = _Part()
    checkpoints: _Part[CheckpointManager] = _Part()
    notes: _Part[NotesService] = _Part()
    responses: _Part[ResponseCache] = _Part()
    """The response cache (built on first use by ``mem.cached_response``/``cache_response``)."""
    render_transcript: _Part[Callable[..., str]] = _Part()
    """Speaker rendering bound to the current Anchor (rooms)."""
    label_messages: _Part[Callable[..., Any]] = _Part()
    promote: _Part[Callable[[str], Any]] = _Part()
    """Overrides what ``shutdown`` runs to promote a session's notes (default: the notes
    component's promoter)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        # part name -> the function that makes it (one function may make several parts)
        self._makers: dict[str, Callable[[], None]] = {}
        self._order: list[Callable[[], None]] = []  # makers still to run, as provided
        self._making: set[Callable[[], None]] = set()
        self._lock = threading.RLock()
        self.flush_hooks: list[FlushHook] = []
        self.forget_hooks: list[ForgetHook] = []
        self.stats_hooks: list[StatsHook] = []
        self.turn_hooks: list[TurnHook] = []

    def provide(self, names: Sequence[str], make: Callable[[], None]) -> None:
        """``make`` sets the parts ``names`` (and wires their hooks) when one is first used.
        Parts are made in the order provided: making one makes those provided before it
        first, so later parts find what earlier ones set and hooks keep one order."""
        for name in names:
            self._makers[name] = make
        self._order.append(make)

    def build(self, name: str) -> None:
        """Make the part ``name`` now if it is still to be made (no-op otherwise)."""
        if name not in self._makers:
            return
        with self._lock:
            make = self._makers.get(name)
            if make is None or make in self._making:
                return  # made meanwhile, or being made on this thread (it sets its parts)
            for earlier in self._order[: self._order.index(make) + 1]:
                self._run(earlier)

    def _run(self, make: Callable[[], None]) -> None:
        if make in self._making:
            return
        self._making.add(make)
        try:
            make()
        finally:
            self._making.discard(make)
            self._order.remove(make)
            for name in [n for n, m in self._makers.items() if m is make]:
                del self._makers[name]

    def build_all(self) -> None:
        """Make every part still to be made, in the order they were provided."""
        if not self._order:
            return
        with self._lock:
            for make in list(self._order):
                self._run(make)

    def built(self, name: str) -> bool:
        """Whether the part ``name`` exists now (without making it)."""
        return name not in self._makers and self._values.get(name) is not None

    def flush(self, timeout: float | None) -> None:
        for hook in list(self.flush_hooks):
            hook(timeout)


_ATTRIBUTES = frozenset({
    "recall", "search", "indexer", "state", "sessions", "summaries", "checkpoints", "notes", "responses",
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
