"""Why a note version stopped being current, said in words from the two versions.

The gate does not store a reason when it supersedes (see gate.py for its rules); the
reason follows from what the successor says compared with what it replaced, so it is
derived when history is read. That also explains notes written before this existed.
"""

from __future__ import annotations

from collections.abc import Callable

from memlane.models import JSON
from memlane.notes.gate import same_value
from memlane.notes.models import Note

__all__ = ["explain_history", "superseded_why"]


def _said_by(new: Note) -> str:
    who = new.author_name or new.author_id
    return f" ({who} said so)" if who else ""


def superseded_why(old: Note, new: Note | None) -> str | None:
    """One sentence: why ``old`` was superseded by ``new`` (None while ``old`` is current).

    ``new`` is the version named by ``old.superseded_by``; None when it is gone (forgotten)
    or the version only expired.
    """
    if old.current:
        return None
    if new is None:
        if old.superseded_by is None:
            return "it stopped being true at its valid-to time (filed as a past version)"
        return f"replaced by note #{old.superseded_by}, which was since forgotten"
    correction = new.metadata.get("correction") if isinstance(new.metadata, dict) else None
    if isinstance(correction, dict):
        by = correction.get("by")
        reason = correction.get("reason")
        text = "corrected by hand" + (f" by {by}" if by else "")
        return text + (f": {reason}" if reason else "")
    if new.origin == "command":
        return f"someone asked memlane to remember otherwise{_said_by(new)}"
    if old.slot and new.slot == old.slot:
        if new.polarity != old.polarity:
            return f"a newer statement about {old.slot} says the opposite{_said_by(new)}"
        if not same_value(old.value, new.value):
            return f"a newer statement about {old.slot} changed it from {old.value!r} to {new.value!r}{_said_by(new)}"
        return f"a newer statement about {old.slot} replaced it{_said_by(new)}"
    if new.polarity != old.polarity:
        return f"contradicted by a newer statement about the same thing{_said_by(new)}"
    return f"a newer preference turned it down{_said_by(new)}"


def explain_history(versions: list[Note], get_note: Callable[[int], Note | None]) -> list[JSON]:
    """Each version as a dict with ``superseded_why`` and the successor's text beside it.

    A successor outside this lineage (a preference that turned another slot's note down) is
    read with ``get_note``.
    """
    by_id = {n.id: n for n in versions}
    out: list[JSON] = []
    for note in versions:
        successor = None
        if note.superseded_by is not None:
            successor = by_id.get(note.superseded_by) or get_note(note.superseded_by)
        item = note.to_dict()
        item["superseded_why"] = superseded_why(note, successor)
        item["superseded_by_text"] = successor.text if successor is not None else None
        out.append(item)
    return out
