"""`memlane doctor`: is this store healthy, and if not, what should the operator do?

The store gathers facts (``store/health.py``); this module judges them. Each finding
says what was seen and what to do. A finding that ``needs_action`` names the memlane
error class it amounts to, so the CLI's exit code comes from the one mapping in
``cli/exit_codes.py`` and the server's status from ``server/errors.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from memlane import errors
from memlane.store.base import Store
from memlane.store.erasure_check import ErasureHealth
from memlane.store.health import StoreHealth

#: WAL beyond this means checkpoints are not keeping up (a long reader holds it open).
WAL_WARN_BYTES = 256 * 1024 * 1024
#: Less free disk than this (or than the database itself) risks a failed write.
FREE_DISK_WARN_BYTES = 1024 * 1024 * 1024
#: How many unembedded messages the lag check counts before it stops counting.
LAG_COUNT_CAP = 100_000

_ERRORS: dict[str, type[errors.MemlaneError]] = {
    "corrupt": errors.CorruptRecordError,
    "embedder": errors.EmbedderMismatchError,
    "storage": errors.StorageError,
}


@runtime_checkable
class HealthReporting(Protocol):
    def health(self) -> StoreHealth: ...
    def delete_orphans(self) -> dict[str, int]: ...


@runtime_checkable
class ErasureReporting(Protocol):
    def erasure_health(self, now: float | None = None) -> ErasureHealth: ...
    def repair_erasures(self, now: float | None = None) -> dict[str, int]: ...


@dataclass(slots=True)
class Finding:
    check: str  # integrity, keyword_index, orphans, index_lag, embedder, disk, wal, erasure_log, outbox,
    #             and on PostgreSQL languages, indexes, extensions, vacuum
    status: str  # ok, info, warn, error
    message: str
    action: str = ""  # what to do; empty when nothing is needed
    error: str = ""  # key of _ERRORS when this needs action

    @property
    def needs_action(self) -> bool:
        return bool(self.error)


@dataclass(slots=True)
class Report:
    store: str
    backend: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not any(f.needs_action for f in self.findings)

    def as_error(self) -> errors.MemlaneError | None:
        """The first finding that needs action as the memlane error it amounts to."""
        for finding in self.findings:
            if finding.needs_action:
                return _ERRORS[finding.error](*_error_args(finding))
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "backend": self.backend,
            "healthy": self.healthy,
            "findings": [asdict(f) | {"needs_action": f.needs_action} for f in self.findings],
        }


def _error_args(finding: Finding) -> tuple[Any, ...]:
    if finding.error == "corrupt":
        return (finding.check, None, finding.message)
    return (f"{finding.message}; {finding.action}",)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def diagnose(store: Store, embedder_spec: str | None) -> Report:
    """Check ``store``; ``embedder_spec`` is the configured embedder (settings.embedder)."""
    if not isinstance(store, HealthReporting):
        raise errors.InvalidInputError(f"store {store.url} cannot report its health")
    facts = store.health()
    report = Report(store=store.url, backend=facts.backend)
    add = report.findings.append
    _integrity(facts, add)
    _orphans(facts, add)
    _vectors(store, embedder_spec, add)
    _disk(facts, add)
    if facts.backend == "postgres":
        _postgres(facts, add)
    if isinstance(store, ErasureReporting):
        _erasures(store.erasure_health(), add)
    for note in facts.notes:
        add(Finding("not_checked", "info", note))
    return report


def fix_orphans(store: Store) -> dict[str, int]:
    """Delete rows whose source is gone; how many per table.column."""
    if not isinstance(store, HealthReporting):
        raise errors.InvalidInputError(f"store {store.url} cannot report its health")
    return store.delete_orphans()


def fix_erasures(store: Store) -> dict[str, int]:
    """Erase again what the erasure log names and scrub the outbox; counts of what went."""
    if not isinstance(store, ErasureReporting):
        raise errors.InvalidInputError(f"store {store.url} keeps no erasure records")
    return store.repair_erasures()


_FIX_ERASURES = "memlane doctor --fix-erasures"


def _counted(counts: dict[str, int]) -> str:
    """``{"notes": 2, "messages": 5}`` as "5 messages, 2 notes" (sorted by what is counted)."""
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))


def _erasures(facts: ErasureHealth, add: Any) -> None:
    if facts.back:
        listed = _counted(facts.back)
        add(Finding(
            "erasure_log", "error",
            f"forgotten data is back: {listed} the erasure log says were erased exist again "
            "(a backup copied into place instead of restored with memlane restore?)",
            f"erase them again: {_FIX_ERASURES} (replays the erasure log)", "corrupt",
        ))
    elif facts.log_kept:
        add(Finding("erasure_log", "ok",
                    f"{facts.log_entries} erasures logged; everything they erased is still gone"))
    else:
        add(Finding("erasure_log", "info",
                    "this backend keeps no erasure log: restore PostgreSQL backups only with the "
                    "erasures made since replayed (or take a new backup after each forget)"))
    if facts.torn_lines:
        add(Finding("erasure_log", "info",
                    f"{facts.torn_lines} erasure-log line(s) cut short by a crash: the erase each "
                    "logged had not returned, so it was not acknowledged"))
    if facts.outbox_leftovers:
        add(Finding(
            "outbox", "error",
            f"{facts.outbox_leftovers} change events still name forgotten sessions",
            f"remove them: {_FIX_ERASURES}", "corrupt",
        ))
    else:
        add(Finding("outbox", "ok", "no change event names a forgotten session beyond its marker"))
    if facts.stale_markers:
        add(Finding(
            "outbox", "warn",
            f"{facts.stale_markers} session.forgotten markers are over an hour old (writes prune "
            "them; this store has had none since)",
            f"prune them now: {_FIX_ERASURES}",
        ))


def _integrity(facts: StoreHealth, add: Any) -> None:
    if facts.integrity_problems:
        shown = "; ".join(facts.integrity_problems[:5])
        add(Finding(
            "integrity", "error", f"the database file is damaged: {shown}",
            "stop writers, restore the newest backup (memlane backup) or export what still reads "
            "(memlane export) into a new store; on SQLite `sqlite3 DB .recover` salvages rows",
            "corrupt",
        ))
    elif facts.integrity_checked:
        add(Finding("integrity", "ok", "page integrity check passed"))
    for index, problem in facts.fts_problems.items():
        add(Finding(
            "keyword_index", "error", f"{index} disagrees with its table: {problem}",
            "rebuild it: memlane reindex (rebuilds keyword index and vectors from the log)", "corrupt",
        ))
    if facts.backend == "sqlite" and not facts.fts_problems and facts.integrity_checked:
        add(Finding("keyword_index", "ok", "full-text indexes match their tables"))


def _orphans(facts: StoreHealth, add: Any) -> None:
    if not facts.orphans:
        add(Finding("orphans", "ok", "no derived rows without their source"))
        return
    listed = ", ".join(f"{n} in {where}" for where, n in sorted(facts.orphans.items()))
    add(Finding(
        "orphans", "warn", f"rows whose source is gone: {listed}",
        "they were written with foreign keys off or by a partial restore; "
        "delete them with memlane doctor --fix-orphans (the log does not need them)", "corrupt",
    ))


def _vectors(store: Store, spec: str | None, add: Any) -> None:
    from memlane.search.recall import configured_model, vector_index_for

    index = vector_index_for(store)
    if index is None:
        add(Finding("embedder", "info", "this store keeps no vectors; search is keyword-only"))
        return
    stored = index.model_info()
    wanted = configured_model(spec, index)
    vectors = index.count()
    if wanted is None:
        add(Finding(
            "embedder", "info",
            f"embedding is switched off; {vectors} stored vectors are not used",
        ))
    elif stored is not None and vectors and (
        (stored.model_id, stored.dimension, stored.recipe)
        != (wanted.model_id, wanted.dimension, wanted.recipe)
    ):
        add(Finding(
            "embedder", "error",
            f"the {vectors} stored vectors came from {stored.describe()}, "
            f"but the configured embedder is {wanted.describe()}",
            "re-embed with the configured model: memlane reindex "
            "(or set embedder back to the stored model in the config)", "embedder",
        ))
    else:
        made_by = stored.describe() if stored is not None else wanted.describe()
        add(Finding("embedder", "ok", f"vectors match the configured embedder {made_by}"))
    if wanted is None:
        return
    lag = len(index.missing_ids(LAG_COUNT_CAP))
    if lag:
        more = "+" if lag >= LAG_COUNT_CAP else ""
        add(Finding(
            "index_lag", "warn", f"{lag}{more} messages have no vector yet (not found by meaning)",
            "any memlane process with embedding on catches up in the background "
            "(memlane serve, or memlane reindex to do it now)",
        ))
    else:
        add(Finding("index_lag", "ok", "every message that should have a vector has one"))


def _postgres(facts: StoreHealth, add: Any) -> None:
    """PostgreSQL's own checks: what keeps search right (languages, indexes) and fast (VACUUM)."""
    if facts.without_language:
        listed = _counted(facts.without_language)
        add(Finding(
            "languages", "warn",
            f"{listed} have no language and are keyword-indexed as English (written before "
            "migration 10/15 or by hand): a German word form does not find them",
            "judge them: memlane reindex (stop the processes writing to the database first)",
        ))
    else:
        add(Finding("languages", "ok", "every message and note is stemmed in its own language"))
    if facts.invalid_indexes:
        add(Finding(
            "indexes", "error", f"invalid indexes (a failed concurrent build): {', '.join(facts.invalid_indexes)}",
            "rebuild them: REINDEX INDEX <name>, or drop them and run memlane reindex", "storage",
        ))
    if facts.missing_indexes:
        add(Finding(
            "indexes", "warn", f"missing: {'; '.join(facts.missing_indexes)}",
            "rebuild them: memlane reindex (an interrupted bulk load or migration leaves them out)",
        ))
    if not facts.invalid_indexes and not facts.missing_indexes:
        add(Finding("indexes", "ok", "keyword and vector indexes are present and valid"))
    for extension, role in sorted(facts.skipped_extensions.items()):
        add(Finding(
            "extensions", "info", f"extension {extension} is not installed ({role})",
            f"install it on the server (CREATE EXTENSION {extension}); memlane applies the "
            "skipped migration at its next start",
        ))
    for table, (dead, live) in sorted(facts.dead_rows.items()):
        add(Finding(
            "vacuum", "warn", f"{table} holds {dead} dead row versions beside {live} live ones",
            f"VACUUM is behind (autovacuum off, or a long transaction holds it back): VACUUM (ANALYZE) {table}",
        ))


def _disk(facts: StoreHealth, add: Any) -> None:
    if facts.database_bytes:
        add(Finding("disk", "ok", f"database {_size(facts.database_bytes)}"))
    if facts.free_disk_bytes is not None and facts.free_disk_bytes < max(
        FREE_DISK_WARN_BYTES, facts.database_bytes
    ):
        add(Finding(
            "disk", "error", f"only {_size(facts.free_disk_bytes)} free beside the database",
            "free disk space or move the database: writes fail when the disk fills", "storage",
        ))
    if facts.wal_bytes is not None and facts.wal_bytes > WAL_WARN_BYTES:
        add(Finding(
            "wal", "warn", f"write-ahead log is {_size(facts.wal_bytes)}",
            "a long-running reader keeps checkpoints from finishing: restart idle readers; "
            "the log shrinks at the next checkpoint",
        ))
    elif facts.wal_bytes is not None:
        add(Finding("wal", "ok", f"write-ahead log {_size(facts.wal_bytes)}"))
