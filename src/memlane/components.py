"""How Memory's optional parts are made and wired (the facade's one place for it).

Each part (search, state, session rules, summaries + checkpoints, notes + rooms) is made
the first time it is used — read through ``mem.parts``, or when background work starts —
not when the Memory opens: a process that writes and reads windows never imports the
search engine, the state tracker or the notes (``memlane bench cold``). What a write must
do at once stays here as small observers that make a part only when it has work:

* a write to a paused session wakes it, and a user's new session applies their cap
  (the session manager);
* a write to a resumed or cleanly shut down session makes it active again;
* a room that speaks again leaves the archive;
* ``checkpoint_per_turn: sync`` writes a turn's checkpoint before store_interaction returns.

A database whose vectors another embedder made is refused at open (EmbedderMismatchError),
as before: that check reads one row and needs no part.

Parts are made in the order they are provided; making one makes those before it first, so
hooks are registered in the same order whatever is used first. The features get the
narrow things they use (store, settings, counter, sealer), never the Memory.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memlane.errors import MemlaneError
from memlane.models import Message, Session

if TYPE_CHECKING:
    from memlane.memory import Memory
    from memlane.ports import Embedder, VectorIndex
    from memlane.state.sessions import SessionManager

log = logging.getLogger(__name__)

__all__ = ["attach_all", "session_manager"]

#: Session statuses a message turns back into "active" (see state/checkpoint.py).
_RESUMABLE = frozenset({"resuming", "shutdown_clean"})
#: Session statuses that count as active (state/sessions.OPEN_STATUSES).
_OPEN = frozenset({"active", "resuming", "awaiting_clarification"})


def attach_all(mem: Memory) -> None:
    parts = mem.parts
    embedder, index = _vectors(mem)
    parts.provide(("recall", "search", "indexer", "backlog"), lambda: _make_recall(mem, embedder, index))
    parts.provide(("state",), lambda: _make_state(mem))
    parts.provide(("sessions",), lambda: _make_sessions(mem))
    parts.provide(("summaries", "checkpoints"), lambda: _make_summaries(mem))
    parts.provide(("notes", "render_transcript", "label_messages"), lambda: _make_rooms(mem))
    _wire_writes(mem)


# ---------------------------------------------------------------- at open


def _vectors(mem: Memory) -> tuple[Embedder | None, VectorIndex | None]:
    """The embedder and vector index the settings ask for, checked against the database
    (EmbedderMismatchError when another model made its vectors). Loads no model."""
    from memlane.search.recall import embedder_from_settings, keep_older_minilm, model_info, vector_index_for
    from memlane.search.vectors import check_model

    embedder = embedder_from_settings(mem.settings.embedder)
    index = vector_index_for(mem.store) if embedder is not None else None
    if embedder is not None and index is None:
        log.warning("store %s keeps no vectors; search is keyword-only", mem.store.url)
        embedder = None
    if embedder is not None and index is not None:
        embedder = keep_older_minilm(embedder, index, mem.settings.embedder)
        check_model(index, model_info(embedder))  # raises EmbedderMismatchError
    return embedder, index


def _wire_writes(mem: Memory) -> None:
    parts, store = mem.parts, mem.store

    def wake_and_cap(session: Session, stored: list[Message]) -> None:
        # What SessionManager.on_append acts on; other writes need no session manager.
        # The session as the append left it: a count of just these messages is its first write.
        first = session.message_count == len(stored)
        new_for_user = first and session.user_id is not None and session.status in _OPEN
        if session.status == "paused" or new_for_user:
            manager = parts.sessions
            if manager is not None:
                manager.on_append(session, stored)

    def reactivate(session: Session, stored: list[Message]) -> None:
        """A message to a resumed or cleanly shut down session makes it active again."""
        if stored and session.status in _RESUMABLE:
            with contextlib.suppress(MemlaneError):
                store.update_session(session.id, status="active")

    def unarchive(session: Session, stored: list[Message]) -> None:
        if session.status == "archived" and any(m.id is not None for m in stored):
            notes = store.note_repository()
            if notes is not None:
                notes.unarchive_session(session.id)  # a room that speaks again is active again

    def note_authors(_session: Session, stored: list[Message]) -> None:
        if parts.built("recall"):  # an engine made later reads the names from the store
            engine = parts.recall
            if engine is not None:
                engine.note_authors(stored)

    # Keyword rows of new messages (SQLite writes them after the message: migration 18):
    # judged and indexed on a thread of their own once background work starts.
    from memlane.search.keyword_backlog import KeywordBacklog

    keywords = KeywordBacklog(store)
    mem.add_observer(keywords.observe, derived=True, on_start=keywords.start)
    mem.add_closer(keywords.stop)

    mem.add_observer(note_authors)
    mem.add_observer(wake_and_cap)
    mem.add_observer(reactivate)
    mem.add_observer(unarchive)
    if mem.settings.checkpoint_per_turn == "sync":

        def checkpoint_turn(session_id: str) -> None:
            checkpoints = parts.checkpoints
            if checkpoints is not None:
                checkpoints.turn_stored(session_id)

        parts.turn_hooks.append(checkpoint_turn)
    minutes = mem.settings.maintain_every_minutes
    if minutes and store.note_repository() is not None:
        from memlane.rooms.lifecycle import MaintenanceTimer

        timer = MaintenanceTimer(mem, minutes)
        mem.add_closer(timer.close)


# ---------------------------------------------------------------- parts, on first use


def _make_recall(mem: Memory, embedder: Embedder | None, index: VectorIndex | None) -> None:
    from memlane.search.engine import RecallEngine
    from memlane.search.indexer import Indexer

    parts = mem.parts
    if embedder is not None and index is not None:
        indexer = Indexer(mem.store, index, embedder)
        # The worker starts with the rest of the background work (a search, a context read,
        # flush, a server), so a process that only writes never loads the model.
        mem.add_observer(indexer.observe, derived=True, on_start=indexer.start)
        # At exit without close(): no more embedding; the next start's backlog scan resumes it.
        mem.add_closer(indexer.close, at_exit=indexer.stop)
        parts.forget_hooks.append(indexer.forget)
        parts.indexer = indexer
        parts.flush_hooks.append(indexer.flush)
    engine = RecallEngine(mem.store, embedder=embedder, index=index)
    mem.add_closer(engine.close)
    parts.recall = engine
    parts.search = engine.search
    _wire_backlog(mem, index)


def _wire_backlog(mem: Memory, index: VectorIndex | None) -> None:
    """Derived work a write leaves to the background (keyword rows, vectors), counted in ``stats()``
    (``memlane stats``, ``/metrics``) and ``mem.backlog()`` while it waits."""
    from memlane.ports import EMBEDDED_ROLES

    parts, store = mem.parts, mem.store

    def backlog() -> dict[str, int]:
        counts = {"keywords": store.keyword_backlog()}
        if index is not None:
            counts["vectors"] = max(0, store.count_with_text(EMBEDDED_ROLES) - index.count())
        return counts

    parts.backlog = backlog
    parts.stats_hooks.append(lambda: {f"backlog_{kind}": n for kind, n in backlog().items()})

def _make_state(mem: Memory) -> None:
    from memlane.state.tracker import StateTracker

    tracker = StateTracker(mem.store)
    mem.parts.state = tracker
    # State tracking costs a few ms per turn: never on the caller's thread.
    mem.add_observer(tracker.on_append, background=True)
    mem.parts.forget_hooks.append(tracker.on_forget)


def _make_sessions(mem: Memory) -> None:
    mem.parts.sessions = session_manager(mem)


def session_manager(mem: Memory) -> SessionManager:
    """``mem.sessions``: expiry, the per-user cap and topic changes, with the settings' limits
    (session_idle_timeout_minutes, max_active_sessions_per_user, split_on_topic_change,
    topic_change_threshold)."""
    from datetime import timedelta

    from memlane.state.sessions import SessionManager

    parts, s = mem.parts, mem.settings

    def indexer_embedder() -> Embedder | None:
        indexer = parts.indexer
        return indexer.embedder if indexer is not None else None

    return SessionManager(
        mem, create_session=mem.create_session, tracker=parts.state, indexer_embedder=indexer_embedder,
        idle_timeout=timedelta(minutes=s.session_idle_timeout_minutes),
        max_active_per_user=s.max_active_sessions_per_user,
        split_on_topic_change=s.split_on_topic_change,
        topic_change_threshold=s.topic_change_threshold,
    )


def _make_summaries(mem: Memory) -> None:
    """Rolling summaries (context/summaries.py), and checkpoints written after each
    summary update (state/checkpoint.py: checkpoints are built from context packets)."""
    from memlane.context.summaries import SummaryManager
    from memlane.state.checkpoint import CheckpointManager
    from memlane.state.tracker import get_state, share_summary

    parts = mem.parts
    tracker = parts.state  # made before (parts are made in order)
    manager = SummaryManager(mem)
    checkpoints = CheckpointManager(
        mem, manager, sealer=mem.sealer,
        state_of=lambda session_id: get_state(parts.state or mem, session_id),
    )
    if tracker is not None:  # the state keeps the rolling summary too
        manager.on_record.append(lambda record: share_summary(tracker, record))
    manager.after_update.append(checkpoints.after_turn)
    parts.summaries = manager
    parts.checkpoints = checkpoints
    mem.add_observer(manager.observe, on_close=manager.close, derived=True)
    parts.forget_hooks.append(manager.forget)
    parts.forget_hooks.append(checkpoints.forget)
    parts.flush_hooks.append(manager.flush)


def _make_rooms(mem: Memory) -> None:
    """Notes, memory commands and speaker rendering bound to the current Anchor."""
    from memlane.rooms.anchor import anchor_id, label_messages, render_transcript

    parts = mem.parts

    def current_anchor() -> str:
        return anchor_id(mem.settings)

    def render(messages: Sequence[Message], **options: Any) -> str:
        options.setdefault("anchor_name", mem.settings.anchor_name)
        return render_transcript(messages, current_anchor(), **options)

    def label(messages: Sequence[Message]) -> list[Message]:
        return label_messages(messages, current_anchor(), anchor_name=mem.settings.anchor_name)

    parts.render_transcript = render
    parts.label_messages = label

    notes = mem.store.note_repository()
    if notes is None:
        log.info("store %s keeps no notes yet; notes and memory commands are off", mem.store.url)
        return
    from memlane.notes.gate import PromotionGate
    from memlane.notes.promoter import Promoter
    from memlane.notes.service import NotesService
    from memlane.rooms.commands import is_command
    from memlane.rooms.component import extractor_for, summary_tokens_saved

    store = mem.store

    def person_lock(tenant_id: str, user_id: str | None) -> AbstractContextManager[None]:
        # Not a real session id: a key of its own for "this person's notes", so the lock
        # spans every session (and process) that writes notes about them.
        return store.session_lock(f"\x1fperson\x1f{tenant_id}\x1f{user_id or ''}", "notes")

    gate = PromotionGate(notes, min_importance=mem.settings.notes_min_importance, person_lock=person_lock)
    promoter = Promoter(store, lambda: mem.settings, notes, gate, extractor_for(mem.settings),
                        anchor=current_anchor, is_command=is_command)
    def recall_embedder() -> Embedder | None:
        engine = parts.recall
        return engine.embedder if engine is not None else None

    service = NotesService(
        mem, notes, gate, promoter, embedder=recall_embedder,
        erase_notes=lambda ids: mem.erase(note_ids=ids).notes,
    )
    parts.notes = service
    parts.forget_hooks.append(service.on_forget)

    def promote(session: Session, stored: list[Message]) -> None:
        if mem.settings.notes_enabled:
            promoter.observe(session, stored)

    mem.add_observer(promote, on_close=promoter.close, derived=True)
    parts.flush_hooks.append(promoter.flush)

    def stats() -> dict[str, Any]:
        out = service.stats()
        out["tokens_saved_by_summaries"] = summary_tokens_saved(store)
        return out

    parts.stats_hooks.append(stats)
