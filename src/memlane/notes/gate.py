"""The promotion gate: score a candidate, then create, merge or supersede (``write_if_worthy``).

The rules, in order:

1. Below ``min_importance`` the candidate is rejected (noise stays in the log only).
2. A current note of the same person with the same slot, value and polarity is the same
   knowledge said again: the note is *merged* (one more source, seen_count + 1, the higher
   importance kept).
3. A current note in the same slot with another value or polarity is a change of mind:
   the new note *supersedes* it (the old one gets ``valid_to`` and stays in the lineage).
   Slots the candidate ``negates`` ("I prefer tea over coffee" -> ``pref:coffee``) close
   their current positive notes the same way.
4. Preferences are also compared by their *object* across slots (subject = the same
   person, object = :func:`~memlane.notes.extract.object_key`, language-neutral): an
   opposite statement about the same object ("My favourite drink is tea" -> "I don't like
   tea anymore") supersedes; a ranking that turns an object down ("coffee, not tea")
   supersedes the positive notes about it; a new preference for what an earlier ranking
   put second ("tea over coffee" -> "I prefer coffee now") supersedes that ranking; and the
   same liking said in another language ("pref:kaffee" / "pref:coffee") is merged.
5. A statement older than what is current (an imported or late-processed message) does
   not overwrite the present: it is filed as a past version of the lineage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from memlane.language import words
from memlane.notes.extract import object_key, slot_object
from memlane.notes.models import Note, NoteCandidate, WriteOutcome
from memlane.notes.store import NoteFilter, NoteStore

__all__ = ["PromotionGate", "same_value"]


def _norm(value: str | None) -> str:
    return " ".join(words(value or ""))


def same_value(a: str | None, b: str | None) -> bool:
    """Values equal after case, punctuation and spacing are ignored."""
    return _norm(a) == _norm(b)


#: Holds a person's notes for one decision: ``(tenant_id, user_id) -> context manager``.
PersonLock = Callable[[str, str | None], AbstractContextManager[None]]


class PromotionGate:
    """Decides what happens to each candidate.

    Thread-safe within one process; ``person_lock`` (the store's ``session_lock`` on a
    per-person key, see ``rooms/component.py``) makes it safe across processes too: two
    processes promoting *different* sessions of one person must not both find no current
    note in a slot and both write one.
    """

    def __init__(self, notes: NoteStore, *, min_importance: float = 0.5,
                 person_lock: PersonLock | None = None) -> None:
        self.notes = notes
        self.min_importance = min_importance
        self._lock = threading.Lock()
        self._person_lock = person_lock

    def write_if_worthy(self, cand: NoteCandidate, *, tenant_id: str = "default",
                        force: bool = False) -> WriteOutcome:
        """Write ``cand`` if it is worth keeping; ``force`` skips the score (explicit requests)."""
        if not force and cand.importance < self.min_importance:
            return WriteOutcome("rejected", reason=f"importance {cand.importance:.2f} < {self.min_importance:.2f}")
        held = self._person_lock(tenant_id, cand.user_id) if self._person_lock else nullcontext()
        with self._lock, held:
            return self._write(cand, tenant_id)

    def _write(self, cand: NoteCandidate, tenant_id: str) -> WriteOutcome:
        slots = [s for s in [cand.slot, *cand.negates] if s]
        current = self.notes.current_in_slot(tenant_id, cand.user_id, slots) if slots else []
        same_slot = [n for n in current if cand.slot and n.slot == cand.slot]
        negated = [n for n in current if n.slot in cand.negates and n.polarity > 0 and n.slot != cand.slot]
        seen = {n.id for n in same_slot + negated}
        dupes, contradicted = self._by_object(cand, tenant_id, seen)
        negated += contradicted

        for note in same_slot:
            if note.polarity == cand.polarity and same_value(note.value, cand.value):
                merged = self.notes.merge_note(
                    note.id or 0, cand.source_ids, cand.session_id, cand.importance
                )
                closed = self._close(negated, cand, tenant_id) if merged is not None else []
                if merged is None:
                    return WriteOutcome("rejected", reason="its source messages were forgotten")
                return WriteOutcome("merged", merged, closed)
        if dupes and not same_slot:
            # The same liking said again in other words or another language: one note.
            merged = self.notes.merge_note(dupes[0].id or 0, cand.source_ids, cand.session_id, cand.importance)
            if merged is None:
                return WriteOutcome("rejected", reason="its source messages were forgotten")
            return WriteOutcome("merged", merged, self._close(negated, cand, tenant_id))

        newer = [n for n in same_slot + negated if n.valid_from > cand.valid_from]
        if newer:
            # What is current was said later: file this as a past version, change nothing now.
            first = min(newer, key=lambda n: n.valid_from)
            note = self._note(cand, tenant_id)
            note.lineage_id = first.lineage_id or first.id
            note.valid_to = first.valid_from
            stored = self.notes.add_note(note)
            if stored is None:
                return WriteOutcome("rejected", reason="its source messages were forgotten")
            return WriteOutcome("historical", stored)

        old = same_slot + negated
        stored = self.notes.add_note(self._note(cand, tenant_id), supersede=[n.id or 0 for n in old])
        if stored is None:
            return WriteOutcome("rejected", reason="its source messages were forgotten")
        if old:
            return WriteOutcome("superseded", stored, old)
        return WriteOutcome("created", stored)

    def _by_object(self, cand: NoteCandidate, tenant_id: str, seen: set[int | None]) -> tuple[list[Note], list[Note]]:
        """Current preferences of the same person about the same objects: (duplicates, contradicted)."""
        lang = cand.metadata.get("lang")
        obj = object_key(cand.value, lang)
        if cand.kind != "preference" or cand.user_id is None or not obj:
            return [], []
        against = {slot_object(s, lang) for s in cand.negates} - {""}
        ranks = bool(cand.metadata.get("comparative"))
        flt = NoteFilter(tenant_id=tenant_id, user_id=cand.user_id, kind="preference")
        dupes: list[Note] = []
        contradicted: list[Note] = []
        for note in self.notes.list_notes(flt, limit=1000):
            if note.id in seen:
                continue
            other = object_key(note.value, note.metadata.get("lang"))
            if other == obj and note.polarity != cand.polarity:
                contradicted.append(note)  # "likes tea" vs "does not like tea"
            elif note.polarity > 0 and other in against:
                contradicted.append(note)  # "coffee, not tea" turns down "likes tea"
            elif (ranks and cand.polarity > 0 and obj in note.metadata.get("against", ())
                  and other != obj):
                contradicted.append(note)  # "prefer coffee now" overturns "tea over coffee"
            elif (other == obj and note.polarity == cand.polarity and (note.slot or "").startswith("pref:")
                  and (cand.slot or "").startswith("pref:")):
                dupes.append(note)
        return dupes, contradicted

    def _close(self, notes: list[Note], cand: NoteCandidate, tenant_id: str) -> list[Note]:
        return [self.notes.expire_note(n.id or 0, cand.valid_from) for n in notes if n.valid_from <= cand.valid_from]

    @staticmethod
    def _note(cand: NoteCandidate, tenant_id: str) -> Note:
        return Note(
            text=cand.text,
            kind=cand.kind,
            tenant_id=tenant_id,
            user_id=cand.user_id,
            session_id=cand.session_id,
            slot=cand.slot,
            value=cand.value,
            polarity=cand.polarity,
            author_id=cand.author_id,
            author_name=cand.author_name,
            importance=cand.importance,
            confidence=cand.confidence,
            entities=list(cand.entities),
            # What a ranking turned down, kept so a later change of mind can overturn it.
            metadata={**cand.metadata, **({"against": sorted(
                {slot_object(s, cand.metadata.get("lang")) for s in cand.negates} - {""})} if cand.negates else {})},
            origin=cand.origin,
            valid_from=cand.valid_from,
            source_ids=list(cand.source_ids),
        )
