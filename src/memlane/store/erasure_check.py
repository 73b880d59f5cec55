"""Is what was forgotten still gone? The erasure log and the outbox, checked against the rows.

Two ways forgotten data comes back or lingers, both of which ``memlane doctor`` reports:

- the erasure log (``<db>-erasures``, SQLite) names ids that exist again: a backup was
  restored by copying the file instead of ``memlane restore`` (which replays the log);
- the change-event outbox still names a forgotten session beyond its one
  ``session.forgotten`` marker (a store written before migrations 12/11 (SQLite/PostgreSQL), or a manual
  restore), or keeps that marker past :data:`FORGOTTEN_MARKER_SECONDS`.

``repair_erasures`` erases again what the log names, removes those events and prunes
the stale markers; it only ever deletes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memlane.store.erase import EraseCounts, EraseRequest, ErasureEntry, ErasureLog
from memlane.store.events import FORGOTTEN_MARKER_SECONDS, EventReads

_CHUNK = 500
#: Events that name a session which no longer exists. Note events are left alone (a note
#: may outlive its session) and so is the session's own session.forgotten marker.
_LEFTOVERS = (
    "FROM change_events e WHERE e.session_id IS NOT NULL AND e.kind <> 'session.forgotten' "
    "AND e.kind NOT IN ('note.added', 'note.superseded', 'note.removed') AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id)"
)


@dataclass(slots=True)
class ErasureHealth:
    log_kept: bool  # False: this backend keeps no erasure log (PostgreSQL: use its own backups)
    log_entries: int = 0
    torn_lines: int = 0  # lines a crash cut short (the erase they logged had not returned)
    back: dict[str, int] = field(default_factory=dict)  # sessions/messages/notes erased, present again
    outbox_leftovers: int = 0  # events still naming a forgotten session
    stale_markers: int = 0  # session.forgotten markers past FORGOTTEN_MARKER_SECONDS


class ErasureChecks(EventReads):
    """Mixed into both stores with the outbox reads (they provide ``read``,
    ``_write_records``, ``erase`` and ``_dialect``; the SQLite store also ``erasures``)."""

    erasures: ErasureLog | None = None

    def erase(self, request: EraseRequest, *, log: bool = True) -> EraseCounts:
        raise NotImplementedError

    def _present(self, table: str, column: str, values: Sequence[Any], before: float) -> list[Any]:
        """Which of ``values`` exist in ``table`` among rows made before ``before`` (epoch)."""
        d = self._dialect
        found: list[Any] = []
        for start in range(0, len(values), _CHUNK):
            clause, params = d.in_list(column, values[start:start + _CHUNK])
            found += [r[0] for r in self.read(
                f"SELECT {column} FROM {table} WHERE {clause} AND created_at <= {d.mark}",
                (*params, d.time(_utc(before))))]
        return found

    def _entries_back(self) -> list[tuple[ErasureEntry, dict[str, int]]]:
        if self.erasures is None:
            return []
        out = []
        for entry in self.erasures.entries():
            back = {
                "sessions": len(self._present("sessions", "id", entry.session_ids, entry.at)),
                "messages": len(self._present("messages", "id", entry.message_ids, entry.at)),
                "notes": len(self._present("notes", "id", entry.note_ids, entry.at)),
            }
            if any(back.values()):
                out.append((entry, back))
        return out

    def erasure_health(self, now: float | None = None) -> ErasureHealth:
        now = time.time() if now is None else now
        health = ErasureHealth(log_kept=self.erasures is not None)
        if self.erasures is not None:
            health.log_entries = len(self.erasures.entries())
            if self.erasures.path.exists():
                lines = [ln for ln in self.erasures.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
                health.torn_lines = len(lines) - health.log_entries
            for _, back in self._entries_back():
                for kind, n in back.items():
                    if n:
                        health.back[kind] = health.back.get(kind, 0) + n
        health.outbox_leftovers = int(self.read(f"SELECT count(*) {_LEFTOVERS}")[0][0])
        health.stale_markers = int(self.read(
            f"SELECT count(*) FROM change_events WHERE kind = 'session.forgotten' AND at < {self._dialect.mark}",
            (now - FORGOTTEN_MARKER_SECONDS,))[0][0])
        return health

    def repair_erasures(self, now: float | None = None) -> dict[str, int]:
        """Erase again what the log names, drop events naming forgotten sessions and stale
        markers; counts of what went."""
        done = {"sessions": 0, "messages": 0, "notes": 0}
        for entry, _ in self._entries_back():
            counts = self.erase(entry.request(), log=False)
            for kind, n in counts.to_dict().items():
                done[kind] += n
        now = time.time() if now is None else now

        def scrub(conn: Any) -> int:
            return int(conn.execute(f"DELETE FROM change_events WHERE id IN (SELECT e.id {_LEFTOVERS})").rowcount)

        done["events"] = self._write_records(scrub)
        done["events"] += self.prune_events(now)
        return done


def _utc(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)
