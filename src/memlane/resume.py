"""Startup hydration and clean shutdown (PRD-014 §5, §6) over a Memory's parts.

They span the whole memory — flush, the context packet, session status, the state and
summaries parts, notes promotion, checkpoints — so they live in the facade;
``Memory.hydrate`` and ``Memory.shutdown`` call them. The checkpoint files themselves
are ``state/checkpoint.py``'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from memlane.context.state_view import session_state
from memlane.context.summaries import SummaryManager, SummaryRecord
from memlane.errors import MemlaneError
from memlane.models import JSON
from memlane.state.checkpoint import CheckpointManager, ConversationCheckpointSnapshot
from memlane.state.tracker import SessionState, get_state, save_state

if TYPE_CHECKING:
    from memlane.context.packet import ContextPacket
    from memlane.context.state_view import StateView
    from memlane.memory import Memory

__all__ = ["hydrate", "shutdown"]

log = logging.getLogger(__name__)

#: Statuses hydration leaves alone (the session lifecycle's, not the PRD's).
_KEEP_ON_HYDRATE = frozenset({"ended", "archived"})


def _manager(mem: Memory) -> CheckpointManager:
    found = mem.parts.checkpoints
    if found is not None:
        return found
    return CheckpointManager(mem, mem.parts.summaries, sealer=mem.sealer, state_of=_state_of(mem))


def _state_of(mem: Memory) -> Any:
    return lambda session_id: get_state(mem.parts.state or mem, session_id)


def _view(mem: Memory, session_id: str) -> StateView:
    return session_state(mem.store, _state_of(mem), mem.get_session(session_id))


def _tracker_save(mem: Memory, state: JSON, status: str | None = None) -> bool:
    """Hand a state back to the state part."""
    data = dict(state)
    if status is not None:
        data["status"] = status
    try:
        save_state(mem.parts.state or mem, SessionState.from_dict(data))
    except (TypeError, ValueError, MemlaneError) as exc:
        log.warning("could not hand the session state back to the tracker: %s", exc)
        return False
    return True


def _restore(mem: Memory, snap: ConversationCheckpointSnapshot, summaries: SummaryManager | None) -> list[str]:
    """Put derived state from a fresh checkpoint back where it is missing or behind."""
    restored: list[str] = []
    if summaries is not None and snap.summary:
        current = summaries.current(snap.session_id, catch_up=False)
        saved = SummaryRecord.from_json(snap.session_id, {k: v for k, v in snap.summary.items() if k != "delta"})
        if saved is not None and (current is None or current.covered_turns < saved.covered_turns):
            mem.store.put_derived(snap.session_id, "summary", saved.to_json())
            restored.append("summary")
    tracker_state = _view(mem, snap.session_id)
    if snap.state and tracker_state.turn_count < snap.turn_count and _tracker_save(mem, snap.state):
        restored.append("state")
    return restored


def hydrate(
    mem: Memory,
    session_id: str,
    *,
    query: str | None = None,
    max_tokens: int | None = None,
    strategy: str | None = None,
) -> ContextPacket:
    """Startup hydration (§5); returns the packet to warm the agent with.

    1. the store is open (Memory); 2. load the latest checkpoint — rebuilt from
    the log with a warning when missing, stale or corrupt; 3-5. build the
    packet: the recent window, rolling summary, active job refs and the rest
    of the state; 7. mark the session ``resuming``. Step 6 (warming the agent)
    is the caller's: it gets the packet.
    """
    manager = _manager(mem)
    session = mem.get_session(session_id)
    verdict, snap = manager.check(session_id)
    restored: list[str] = []
    if verdict == "fresh" and snap is not None:
        restored = _restore(mem, snap, manager.summaries)
    elif verdict != "disabled":
        log.warning(
            "checkpoint of session %s is %s; rebuilding the session's state from the log",
            session_id, verdict,
        )
        if manager.summaries is not None:
            manager.summaries.update(session_id)
    # Step 7 comes before the packet here, so that the packet the agent is
    # warmed with already says "resuming". An ended or archived conversation
    # keeps its status: loading it is not reopening it.
    status = session.status if session.status in _KEEP_ON_HYDRATE else "resuming"
    if status == "resuming":
        mem.update_session(session_id, status="resuming")
        _tracker_save(mem, _view(mem, session_id).raw, status="resuming")
    packet = mem.context(session_id, query=query, max_tokens=max_tokens, strategy=strategy)
    path = None
    try:
        path = manager.write(session_id, "hydrate" if verdict == "fresh" else "rebuild", status=status)
    except OSError as exc:
        log.warning("cannot write checkpoint of session %s: %s", session_id, exc)
    packet.meta["hydration"] = {
        "checkpoint": verdict,
        "restored": restored,
        "path": str(path) if path else None,
        "checkpoint_written_at": snap.written_at if snap is not None else None,
    }
    return packet


def shutdown(mem: Memory, session_id: str | None = None, *, close: bool = False) -> dict[str, Any]:
    """Clean shutdown (§6) of one session, or of every session written in this process.

    1. flush pending writes and background work; 2. fold the remaining turns
    into a final rolling summary delta; 3. refresh the session state;
    5. emit long-term memory candidates through the notes component's
    promotion gate (or ``mem.parts.promote``) when one is attached; 6. mark ``shutdown_clean``;
    4. write the checkpoint — after the mark, so that it records the final
    status; 7. close the store when ``close`` is set.
    Returns ``{session_id: checkpoint path or None}``.
    """
    manager = _manager(mem)
    mem.flush()
    targets = [session_id] if session_id is not None else sorted(manager.seen)
    written: dict[str, Any] = {}
    promote = mem.parts.promote
    if promote is None and mem.parts.notes is not None:  # the notes component's gate
        promote = mem.parts.notes.promoter.catch_up
    for sid in targets:
        mem.get_session(sid)
        if manager.summaries is not None:
            manager.summaries.update(sid, force=True)
        state = _view(mem, sid)
        if callable(promote):
            try:
                promote(sid)
            except MemlaneError as exc:
                log.warning("promotion of long-term notes for %s failed: %s", sid, exc)
        mem.update_session(sid, status="shutdown_clean")
        _tracker_save(mem, state.raw, status="shutdown_clean")
        try:
            path = manager.write(sid, "shutdown", status="shutdown_clean")
        except OSError as exc:
            log.warning("cannot write checkpoint of session %s: %s", sid, exc)
            path = None
        written[sid] = str(path) if path else None
    if close:
        mem.close()
    return written
