"""Long-term notes: distilled knowledge, separate from the session lane (seed 002's
promotion gate; seed 003's contradiction handling). See ``service.py`` for the API."""

from memlane.notes.models import AuditEntry, Facet, Note, NoteCandidate, WriteOutcome

__all__ = ["AuditEntry", "Facet", "Note", "NoteCandidate", "WriteOutcome"]
