"""The notes lane as one object: listing, adding, history, and notes for a context packet.

``mem.parts.notes`` is a :class:`NotesService`. Called as a function it is the
context engine's provider: ``notes(session_id, query, max_tokens) -> list[Note]`` — the
notes that are true now, visible in that conversation (its own notes and the Anchor's
notes from anywhere), relevant to the query first, within ``max_tokens``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlane.errors import (
    InvalidInputError,
    MemlaneError,
    NoteSupersededError,
    NotFoundError,
    SessionNotFoundError,
)
from memlane.lru import LRUCache
from memlane.models import check_json, utcnow
from memlane.notes.gate import PromotionGate
from memlane.notes.models import FACET_KINDS, NOTE_KINDS, Facet, Note, NoteCandidate, WriteOutcome
from memlane.notes.promoter import Promoter
from memlane.notes.store import NoteFilter, NoteStore

if TYPE_CHECKING:
    from memlane.ports import Embedder, Essentials

__all__ = ["NotesService"]

log = logging.getLogger(__name__)

#: Notes that match nothing in the query still come along when they are this important
#: (what the Anchor asked to keep, facts about the Anchor): proactive recall.
PROACTIVE_IMPORTANCE = 0.7
#: Tokens of the "- " bullet and newline the packet adds per note.
_LINE_OVERHEAD = 3
#: Cosine similarity above which a note counts as relevant when an embedder is attached.
_SEMANTIC_MIN = 0.35


class NotesService:
    """Long-term notes of one memory: the context's notes provider and the notes API.

    ``erase_notes`` deletes notes through the memory's one erase routine and says how many
    went; ``embedder`` gives the search part's embedder, if any (notes are ranked by meaning
    too then).
    """

    def __init__(
        self, essentials: Essentials, notes: NoteStore, gate: PromotionGate, promoter: Promoter, *,
        erase_notes: Callable[[Sequence[int]], int],
        embedder: Callable[[], Embedder | None] = lambda: None,
    ) -> None:
        self.essentials = essentials
        self._erase_notes = erase_notes
        self._embedder = embedder
        self.store = notes
        self.gate = gate
        self.promoter = promoter
        # (note id, text) -> vector; bounded, and dropped when the note goes (any process)
        self._vectors: LRUCache[tuple[int, str], Any] = LRUCache(4096)

    # ------------------------------------------------------------ who is the Anchor

    def anchor(self) -> str:
        from memlane.rooms.anchor import anchor_id

        return anchor_id(self.essentials.settings)

    # ------------------------------------------------------------ provider for mem.context

    def __call__(self, session_id: str, query: str | None, max_tokens: int) -> list[Note]:
        try:
            return self.for_context(session_id, query, max_tokens)
        except MemlaneError:
            raise
        except Exception as exc:  # the packet must not fail because of notes
            log.exception("notes for the context of %s failed", session_id)
            raise MemlaneError(f"notes unavailable: {exc}") from exc

    def superseded_messages(self, message_ids: Sequence[int]) -> set[int]:
        """Of ``message_ids``, those whose every fact was superseded by a newer note: what
        they say is no longer true ("I love coffee" after "I prefer tea now"), and the
        assistant's reply to such a message ("A flat white it is.")."""
        out: set[int] = set()
        for mid in message_ids:
            for source in (mid, mid - 1):  # the message itself, or the one it replies to
                notes = self.store.get_notes(self.store.notes_from(message_ids=[source]))
                if not notes or not all(n.superseded_by is not None for n in notes):
                    continue
                if source != mid:
                    pair = self.essentials.store.get_messages([source, mid])
                    if len(pair) != 2 or pair[0].session_id != pair[1].session_id \
                            or [m.role for m in pair] != ["user", "assistant"]:
                        continue
                out.add(mid)
                break
        return out

    def for_context(self, session_id: str, query: str | None, max_tokens: int) -> list[Note]:
        """Current notes visible in ``session_id``: relevant to ``query`` first, within budget."""
        if max_tokens < 1:
            return []
        session = self.essentials.store.get_session(session_id)
        if session is None:
            return []
        self.promoter.catch_up(session_id, timeout=2.0)
        flt = NoteFilter(tenant_id=session.tenant_id, visible_in=session_id, anchor_id=self.anchor())
        ranked: dict[int, tuple[float, Note]] = {}
        if query and query.strip():
            for note, score in self.store.search_notes(query, flt, limit=50):
                ranked[note.id or 0] = (2.0 + min(score, 10.0) / 10.0 + note.importance, note)
        pool = self.store.list_notes(flt, limit=300)
        semantic = self._semantic(query, pool) if query and query.strip() else {}
        now = utcnow()
        for note in pool:
            nid = note.id or 0
            sim = semantic.get(nid, 0.0)
            if nid in ranked:
                if sim:
                    s, n = ranked[nid]
                    ranked[nid] = (s + sim, n)
                continue
            if sim >= _SEMANTIC_MIN:
                ranked[nid] = (1.5 + sim + note.importance, note)
            elif note.importance >= PROACTIVE_IMPORTANCE or not query:
                age_days = max((now - note.valid_from).total_seconds() / 86400.0, 0.0)
                ranked[nid] = (note.importance + 0.3 * math.exp(-age_days / 30.0), note)
        ordered = [n for _, n in sorted(ranked.values(), key=lambda p: (-p[0], -(p[1].id or 0)))]
        out: list[Note] = []
        used = 0
        for note in ordered:
            cost = self.essentials.counter.count(note.text) + _LINE_OVERHEAD
            if used + cost > max_tokens:
                continue  # a shorter note further down may still fit
            out.append(note)
            used += cost
        return out

    def _semantic(self, query: str, notes: Sequence[Note]) -> dict[int, float]:
        """Cosine similarity of the query to each note, when recall has an embedder."""
        embedder = self._embedder()
        if embedder is None or not notes:
            return {}
        try:
            found: dict[tuple[int, str], Any] = {(n.id or 0, n.text): self._vectors.get((n.id or 0, n.text)) for n in notes}
            missing = [n for n in notes if found[(n.id or 0, n.text)] is None]
            if missing:
                vecs = embedder.embed([n.text for n in missing])
                for n, v in zip(missing, vecs, strict=True):
                    found[(n.id or 0, n.text)] = v
                    self._vectors.put((n.id or 0, n.text), v)
            q = embedder.embed_query(query)
            q = q[0] if getattr(q, "ndim", 1) == 2 else q
            return {n.id or 0: float(found[(n.id or 0, n.text)] @ q) for n in notes}
        except Exception as exc:  # lexical ranking still works without vectors
            log.debug("semantic note ranking unavailable: %s", exc)
            return {}

    # ------------------------------------------------------------ public API

    def list_notes(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        kind: str | None = None,
        tenant_id: str | None = None,
        include_history: bool = False,
        limit: int = 50,
    ) -> list[Note]:
        """Notes, newest knowledge first; ``session_id`` limits to what that conversation sees."""
        if limit < 1:
            raise InvalidInputError("limit must be at least 1")
        if kind is not None and kind not in NOTE_KINDS:
            raise InvalidInputError(f"kind must be one of {sorted(NOTE_KINDS)}, got {kind!r}")
        flt = NoteFilter(tenant_id=tenant_id, user_id=user_id, kind=kind, current_only=not include_history)
        if session_id is not None:
            session = self.essentials.store.get_session(session_id)
            if session is None:
                raise SessionNotFoundError(session_id)
            self.promoter.catch_up(session_id)
            flt.visible_in, flt.anchor_id = session_id, self.anchor()
            flt.tenant_id = tenant_id or session.tenant_id
        else:
            self.promoter.catch_up_pending()
        if query is not None and query.strip():
            return [n for n, _ in self.store.search_notes(query, flt, limit=limit)]
        return self.store.list_notes(flt, limit=limit)

    def facets(
        self,
        *,
        session_id: str | None = None,
        kind: str | None = None,
        value: str | None = None,
        limit: int = 200,
    ) -> list[Facet]:
        """Entities, links, dates and system actions found in messages, oldest first."""
        if limit < 1:
            raise InvalidInputError("limit must be at least 1")
        if kind is not None and kind not in FACET_KINDS:
            raise InvalidInputError(f"facet kind must be one of {sorted(FACET_KINDS)}, got {kind!r}")
        # Facets are written when the promotion gate reads messages (every few turns, off the
        # hot path of add); catch up first so the answer covers every stored message.
        if session_id is not None:
            if self.essentials.store.get_session(session_id) is None:
                raise SessionNotFoundError(session_id)
            self.promoter.catch_up(session_id)
        else:
            self.promoter.catch_up_pending()
        return self.store.list_facets(session_id=session_id, kind=kind, value=value, limit=limit)

    def add(
        self,
        text: str,
        *,
        kind: str = "fact",
        user_id: str | None = None,
        session_id: str | None = None,
        importance: float = 0.8,
        slot: str | None = None,
        value: str | None = None,
        polarity: int = 1,
        source_ids: Sequence[int] = (),
        valid_from: datetime | None = None,
        metadata: dict[str, Any] | None = None,
        origin: str = "api",
    ) -> WriteOutcome:
        """Write a note directly (merged or superseding by ``slot`` like any other)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("a note needs non-empty text")
        if kind not in NOTE_KINDS:
            raise InvalidInputError(f"kind must be one of {sorted(NOTE_KINDS)}, got {kind!r}")
        if not 0.0 <= float(importance) <= 1.0:
            raise InvalidInputError("importance must be in 0..1")
        if polarity not in (1, -1):
            raise InvalidInputError("polarity must be 1 or -1")
        tenant = "default"
        if session_id is not None:
            session = self.essentials.store.get_session(session_id)
            if session is None:
                raise SessionNotFoundError(session_id)
            tenant = session.tenant_id
        ids = [int(i) for i in source_ids]
        if ids and len(self.essentials.store.get_messages(ids)) != len(set(ids)):
            raise NotFoundError(f"some of the source messages {ids} do not exist")
        cand = NoteCandidate(
            text=text.strip(), kind=kind, user_id=user_id or self.anchor(), source_ids=ids,
            session_id=session_id or "", slot=slot or f"{kind}:{' '.join(text.lower().split())[:200]}",
            value=value if value is not None else text.strip(), polarity=polarity,
            importance=float(importance), valid_from=valid_from or utcnow(), origin=origin,
            metadata=check_json(metadata, "metadata"),
        )
        outcome = self.gate.write_if_worthy(cand, tenant_id=tenant, force=True)
        if outcome.note is None:
            raise NotFoundError(f"the note could not be written: {outcome.reason}")
        return outcome

    def get(self, note_id: int) -> Note:
        found = self.store.get_note(note_id)
        if found is None:
            raise NotFoundError(f"note {note_id} does not exist")
        return found

    def history(self, note_id: int) -> list[Note]:
        """Every version of the note's lineage, oldest first; the current one has no valid_to."""
        return self.store.history(note_id)

    def correct(self, note_id: int, text: str, *, value: str | None = None, reason: str | None = None,
                corrected_by: str | None = None) -> Note:
        """Replace what a current note says with a corrected version that supersedes it.

        The corrected version keeps the note's slot, person, conversation and sources; the
        old one stays in the lineage with ``superseded_by`` pointing here, and ``why``
        (:func:`memlane.notes.why.superseded_why`) reads the reason from the new version's
        metadata. ``value`` defaults to the new text when the old value was the old text.
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("a corrected note needs non-empty text")
        old = self.get(note_id)
        if not old.current:
            raise NoteSupersededError(note_id, old.superseded_by)
        if value is None:
            value = text.strip() if old.value in (None, old.text) else old.value
        meta = {k: v for k, v in old.metadata.items() if k not in ("correction",)}
        meta["correction"] = {k: v for k, v in (("reason", reason), ("by", corrected_by)) if v}
        new = replace(
            old, text=text.strip(), value=value, id=None, valid_from=utcnow(), valid_to=None,
            supersedes=None, superseded_by=None, seen_count=1, origin="api", metadata=check_json(meta, "metadata"),
            created_at=utcnow(), updated_at=utcnow(), source_ids=list(old.source_ids),
        )
        stored = self.store.add_note(new, supersede=[note_id], only_current=True)
        if stored is None:
            raise NotFoundError(f"note {note_id} could not be corrected: its source messages were forgotten")
        return stored

    def forget_note(self, note_id: int) -> int:
        """Delete a note and every version of it (through the one erase routine)."""
        ids = [n.id or 0 for n in self.store.history(note_id)]
        return self._erase_notes(ids) if ids else 0

    # ------------------------------------------------------------ forgetting

    def on_forget(self, session_id: str, message_ids: Sequence[int] | None) -> None:
        """Forget hook: drop in-process copies; the store erases the notes themselves."""
        if message_ids is None:
            self.promoter.forget(session_id)
            ids = self.store.notes_from(session_id=session_id)
        else:
            ids = self.store.notes_from(message_ids=message_ids)
        self.drop_note_vectors(ids)

    def drop_note_vectors(self, note_ids: Sequence[int] | None) -> None:
        """Drop the vectors of these notes (all when None) kept in this process (their text
        is in the key)."""
        if note_ids is None:
            self._vectors.clear()
            return
        doomed = set(note_ids)
        for key in self._vectors.snapshot_keys():
            if key[0] in doomed:
                self._vectors.pop(key)

    def stats(self) -> dict[str, Any]:
        return self.store.stats()
