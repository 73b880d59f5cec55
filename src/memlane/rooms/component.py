"""Component hook (``memlane.components``): notes, rooms, commands and lifecycle attach here.

Registers on the Memory:

* ``mem.parts.notes`` — the :class:`~memlane.notes.service.NotesService`; calling it
  is the context engine's notes provider ``(session_id, query, max_tokens) -> list[Note]``;
* ``mem.parts.render_transcript`` / ``label_messages`` — speaker rendering bound
  to the current Anchor (see :mod:`memlane.rooms.anchor`);
* ``mem.parts.stats_hooks`` — notes, archive and summary savings for ``mem.stats()``;
* a forget hook (notes learned from forgotten messages go too), an observer that counts
  turns for the promotion gate and brings an archived room back when it speaks again,
  and a chained ``flush`` that also waits for the gate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from memlane.models import Message, Session
from memlane.notes.extract import Extractor, LLMExtractor, RuleExtractor
from memlane.notes.gate import PromotionGate
from memlane.notes.promoter import Promoter
from memlane.notes.service import NotesService
from memlane.rooms.anchor import anchor_id, label_messages, render_transcript
from memlane.rooms.commands import is_command

if TYPE_CHECKING:
    from memlane.memory import Memory
    from memlane.store import Store

__all__ = ["attach", "summary_tokens_saved"]

log = logging.getLogger(__name__)


def _extractor(mem: Memory) -> Extractor:
    s = mem.settings
    if s.notes_extractor == "llm":
        if s.llm_base_url and s.llm_model:
            return LLMExtractor(s.llm_base_url, s.llm_model, api_key_env=s.llm_api_key_env)
        log.warning("notes_extractor is 'llm' but llm_base_url/llm_model are not set; using the rules")
    return RuleExtractor()


def summary_tokens_saved(store: Store) -> int:
    """Tokens the rolling summaries save over the turns they cover."""
    return store.derived_total("summary", "tokens_saved")


def attach(mem: Memory) -> None:
    def current_anchor() -> str:
        return anchor_id(mem.settings)

    def render(messages: Sequence[Message], **options: Any) -> str:
        options.setdefault("anchor_name", mem.settings.anchor_name)
        return render_transcript(messages, current_anchor(), **options)

    def label(messages: Sequence[Message]) -> list[Message]:
        return label_messages(messages, current_anchor(), anchor_name=mem.settings.anchor_name)

    mem.parts.render_transcript = render
    mem.parts.label_messages = label

    notes = mem.store.note_repository()
    if notes is None:
        log.info("store %s keeps no notes yet; notes and memory commands are off", mem.store.url)
        return
    store = mem.store

    def person_lock(tenant_id: str, user_id: str | None) -> AbstractContextManager[None]:
        # Not a real session id: a key of its own for "this person's notes", so the lock
        # spans every session (and process) that writes notes about them.
        return store.session_lock(f"\x1fperson\x1f{tenant_id}\x1f{user_id or ''}", "notes")

    gate = PromotionGate(notes, min_importance=mem.settings.notes_min_importance, person_lock=person_lock)
    promoter = Promoter(store, lambda: mem.settings, notes, gate, _extractor(mem), anchor=current_anchor,
                        is_command=is_command)
    service = NotesService(mem, notes, gate, promoter)
    mem.parts.notes = service
    mem.parts.forget_hooks.append(service.on_forget)

    def unarchive(session: Session, stored: list[Message]) -> None:
        if session.status == "archived" and any(m.id is not None for m in stored):
            notes.unarchive_session(session.id)  # a room that speaks again is active again

    def promote(session: Session, stored: list[Message]) -> None:
        if mem.settings.notes_enabled:
            promoter.observe(session, stored)

    mem.add_observer(unarchive)
    mem.add_observer(promote, on_close=promoter.close, derived=True)

    mem.parts.flush_hooks.append(promoter.flush)

    def stats() -> dict[str, Any]:
        out = service.stats()
        out["tokens_saved_by_summaries"] = summary_tokens_saved(mem.store)
        return out

    mem.parts.stats_hooks.append(stats)

    minutes = mem.settings.maintain_every_minutes
    if minutes:
        from memlane.rooms.lifecycle import MaintenanceTimer

        timer = MaintenanceTimer(mem, minutes)
        mem.add_closer(timer.close)
