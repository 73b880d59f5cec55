"""Copy a whole memlane database to another store (``memlane migrate --from ... --to ...``).

The unit of work is a session: each is written to the target with
``Store.restore_session`` in one transaction (on PostgreSQL together with its derived
state), so an interruption at any moment leaves only whole sessions behind. Running
the same command again skips sessions the target already holds with the same number
of messages, and copies the rest: the migration is resumable.

Message ids are kept by default (``keep_ids``) when the target is PostgreSQL, so
anything that points at a message — vectors, notes' sources, an API client — stays
valid. The vectors of a SQLite source are then copied as they are instead of being
re-embedded (which can take hours on a large log).

At the end every table is counted on both sides, per session, and any difference is
reported; tables of parts that have no counterpart in the target yet are named, never
dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlane.errors import EmbedderMismatchError, InvalidInputError
from memlane.models import JSON, SessionFilter
from memlane.store.base import Store, TurnRecord
from memlane.store.sqlite import SQLiteStore

log = logging.getLogger(__name__)

#: progress(phase, done, total): phases are "sessions", "vectors" and "verify".
Progress = Callable[[str, int, int], None]

#: Tables that belong to the conversation log and are copied session by session.
LOG_TABLES = ("sessions", "messages", "turns", "derived")
#: Tables that are copied, rebuilt or bookkeeping; anything else in the source is reported.
#: change_events is not copied: the target's triggers write its own events as rows arrive.
#: Nor is the response cache: its answers are keyed by message and note ids the target
#: hands out anew, and a cache refills by use. Nor are tenant_versions: they are cache keys,
#: not data, and the target's triggers count its own writes (on PostgreSQL it is a view).
_HANDLED = frozenset(
    {*LOG_TABLES, "tool_call_ids", "message_vectors", "vector_meta", "vector_deletions", "schema_migrations",
     "sqlite_sequence", "change_events", "change_events_pruned", "response_cache", "response_cache_sources",
     "response_cache_counts", "tenant_versions"}
)


@dataclass
class MigrationReport:
    source: str
    target: str
    sessions: int = 0
    copied: int = 0
    skipped: int = 0
    messages: int = 0
    turns: int = 0
    derived: int = 0
    vectors: int = 0
    vectors_note: str = ""
    #: table -> (rows in source, rows in target), after the copy
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: other parts' tables copied row for row: table -> rows written by this run
    tables: dict[str, int] = field(default_factory=dict)
    #: source tables this migration does not carry (no PostgreSQL counterpart yet)
    not_copied: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        # the log must match exactly; other tables may hold more in the target (its own
        # audit entries, keys created there) but never less
        return not self.problems and all(
            a == b if table in LOG_TABLES else b >= a for table, (a, b) in self.counts.items()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "sessions": self.sessions,
            "copied": self.copied,
            "skipped": self.skipped,
            "messages": self.messages,
            "turns": self.turns,
            "derived": self.derived,
            "vectors": self.vectors,
            "vectors_note": self.vectors_note,
            "counts": {k: {"source": a, "target": b} for k, (a, b) in self.counts.items()},
            "problems": list(self.problems),
            "tables": dict(self.tables),
            "not_copied": dict(self.not_copied),
        }


# ---------------------------------------------------------------------------- store access


def _is_postgres(store: Store) -> bool:
    from memlane.store import postgres  # only imported when psycopg is installed

    return isinstance(store, postgres.PostgresStore)


def _read(store: Store, query: str) -> list[Any]:
    """A parameterless SQL read on either SQL store (the log tables have the same names)."""
    read = getattr(store, "read", None)
    if not callable(read):
        raise InvalidInputError(f"cannot migrate {store.url}: it is not a SQL store")
    rows: list[Any] = read(query)
    return rows


def _session_ids(store: Store, page: int = 1000) -> list[str]:
    ids: list[str] = []
    offset = 0
    while True:
        batch = store.list_sessions(SessionFilter(), limit=page, offset=offset)
        ids.extend(s.id for s in batch)
        if len(batch) < page:
            return list(dict.fromkeys(ids))
        offset += page


def _derived_of(store: Store, session_id: str) -> dict[str, JSON]:
    lister = getattr(store, "list_derived", None)  # both SQL stores (sql_reads.py)
    if callable(lister):
        found: dict[str, JSON] = lister(session_id)
        return found
    return {}


def _grouped(store: Store, table: str) -> dict[str, int]:
    column = "id" if table == "sessions" else "session_id"
    query = f"SELECT {column}, count(*) FROM {table} GROUP BY {column}"
    return {str(r[0]): int(r[1]) for r in _read(store, query)}


def _extra_tables(store: Store) -> dict[str, int]:
    """Source tables outside the log with rows in them (reported as not copied)."""
    if isinstance(store, SQLiteStore):
        names = [r[0] for r in store.read("SELECT name FROM sqlite_master WHERE type = 'table'")]
        # FTS5 keeps its index in shadow tables named after the virtual table
        fts = {n for n in names if n.endswith("_fts")}
        names = [n for n in names if n not in fts and not any(n.startswith(f + "_") for f in fts)]
    else:
        names = [r[0] for r in _read(store, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    out: dict[str, int] = {}
    for name in sorted(set(names) - _HANDLED):
        n = int(_read(store, f'SELECT count(*) FROM "{name}"')[0][0])
        if n:
            out[name] = n
    return out


# ---------------------------------------------------------------------------- other parts' tables


def _pg_table_info(target: Any) -> tuple[dict[str, dict[str, str]], dict[str, set[str]], dict[str, list[str]]]:
    """Per target table: {column: type} (generated columns left out), the tables it
    references, and its primary-key columns."""
    columns: dict[str, dict[str, str]] = {}
    for table, column, data_type, generated in target.read(
        "SELECT table_name, column_name, data_type, is_generated FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    ):
        if generated != "ALWAYS":
            columns.setdefault(table, {})[column] = data_type
    refs: dict[str, set[str]] = {}
    for child, parent in target.read(
        "SELECT c.relname, p.relname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "JOIN pg_class p ON p.oid = k.confrelid WHERE k.contype = 'f' "
        "AND c.relnamespace = current_schema()::regnamespace"
    ):
        refs.setdefault(child, set()).add(parent)
    keys: dict[str, list[str]] = {}
    for table, column in target.read(
        "SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indisprimary AND c.relnamespace = current_schema()::regnamespace ORDER BY a.attnum"
    ):
        keys.setdefault(table, []).append(column)
    return columns, refs, keys


def _foreign_keys(target: Any, table: str) -> list[tuple[str, str, str]]:
    """(column, parent table, parent column) of the table's single-column foreign keys
    to other tables."""
    rows = target.read(
        "SELECT a.attname, p.relname, pa.attname FROM pg_constraint k "
        "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] "
        "JOIN pg_class p ON p.oid = k.confrelid "
        "JOIN pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = k.confkey[1] "
        "WHERE k.contype = 'f' AND k.conrelid = %s::regclass AND k.conrelid <> k.confrelid "
        "AND cardinality(k.conkey) = 1",
        (table,),
    )
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def _self_references(target: Any, table: str) -> list[str]:
    rows = target.read(
        "SELECT a.attname FROM pg_constraint k JOIN pg_attribute a ON a.attrelid = k.conrelid "
        "AND a.attnum = ANY(k.conkey) WHERE k.contype = 'f' AND k.conrelid = k.confrelid "
        "AND k.conrelid = %s::regclass",
        (table,),
    )
    return [str(r[0]) for r in rows]


def _converter(data_type: str) -> Callable[[Any], Any]:
    """SQLite's stored value -> what psycopg should send for a PostgreSQL column."""
    import json
    from datetime import UTC, datetime

    from psycopg.types.json import Jsonb

    if data_type.startswith("timestamp"):
        def ts(v: Any) -> Any:
            if isinstance(v, int | float):
                return datetime.fromtimestamp(v, UTC)
            return datetime.fromisoformat(v) if isinstance(v, str) else v
        return ts
    if data_type in ("json", "jsonb"):
        return lambda v: Jsonb(json.loads(v)) if isinstance(v, str) else (None if v is None else Jsonb(v))
    if data_type == "boolean":
        return lambda v: None if v is None else bool(v)
    return lambda v: v


def _copy_extra_tables(
    source: SQLiteStore, target: Store, report: MigrationReport, *, keep_ids: bool, progress: Progress
) -> None:
    """Copy the tables of other parts (notes, facets, archive, audit log, API keys) that
    exist on both sides, row for row, converting SQLite's types to the target's."""
    from psycopg import sql

    extra = _extra_tables(source)
    if not extra or not _is_postgres(target):
        return
    if not keep_ids:
        for name in extra:
            report.problems.append(f"{name}: not copied, message ids changed (run without --new-ids)")
        return
    columns, refs, keys = _pg_table_info(target)
    todo = [t for t in extra if t in columns]
    ordered: list[str] = []
    while todo:  # parents first (notes before note_sources)
        ready = [t for t in todo if not (refs.get(t, set()) - {t}) & set(todo)] or todo[:1]
        ordered.extend(ready)
        todo = [t for t in todo if t not in ready]
    progress("tables", 0, len(ordered))
    for done, table in enumerate(ordered, start=1):
        src_cols = {r[1] for r in source.read(f'PRAGMA table_info("{table}")')}
        cols = [c for c in columns[table] if c in src_cols]
        convert = [_converter(columns[table][c]) for c in cols]
        late = [c for c in _self_references(target, table) if c in cols]  # set after all rows exist
        pk = [c for c in keys.get(table, []) if c in cols]
        quoted = ", ".join(f'"{c}"' for c in cols)
        rows = source.read(f'SELECT {quoted} FROM "{table}"')
        # rows of sessions or messages that were not copied (reported above) cannot follow
        for column, parent, parent_col in _foreign_keys(target, table):
            if column not in cols:
                continue
            at = cols.index(column)
            wanted = sorted({r[at] for r in rows if r[at] is not None})
            present: set[Any] = set()
            for start in range(0, len(wanted), 5000):
                present.update(r[0] for r in target.read(  # type: ignore[attr-defined]
                    sql.SQL("SELECT {} FROM {} WHERE {} = ANY(%s)").format(
                        sql.Identifier(parent_col), sql.Identifier(parent), sql.Identifier(parent_col)
                    ),
                    (wanted[start : start + 5000],),
                ))
            kept = [r for r in rows if r[at] is None or r[at] in present]
            if len(kept) < len(rows):
                report.problems.append(
                    f"{table}: {len(rows) - len(kept)} rows not copied, their {parent} are not in the target"
                )
            rows = kept
        values = [
            tuple(None if c in late else f(v) for c, f, v in zip(cols, convert, row, strict=True))
            for row in rows
        ]
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.Placeholder() * len(cols)),
        )
        fixups: list[tuple[Any, ...]] = []
        if late and pk:
            for row in rows:
                by_name = dict(zip(cols, row, strict=True))
                if any(by_name[c] is not None for c in late):
                    fixups.append((*(by_name[c] for c in late), *(by_name[c] for c in pk)))
        update = sql.SQL("UPDATE {} SET {} WHERE {}").format(
            sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(c)) for c in late),
            sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(c)) for c in pk) if pk else sql.SQL("false"),
        )
        identity = [
            str(r[0]) for r in target.read(  # type: ignore[attr-defined]
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = %s AND is_identity = 'YES'", (table,)
            )
        ]

        def run(conn: Any, insert: Any = insert, values: Any = values, fixups: Any = fixups,
                update: Any = update, identity: list[str] = identity, table: str = table) -> int:
            cur = conn.cursor()
            written = 0
            for start in range(0, len(values), 1000):
                cur.executemany(insert, values[start : start + 1000])
                written += max(cur.rowcount, 0)
            if fixups:
                cur.executemany(update, fixups)
            for column in identity:  # explicit ids bypass the sequence: move it past them
                conn.execute(
                    sql.SQL(
                        "SELECT setval(seq, top) FROM (SELECT pg_get_serial_sequence({t}, {c})::regclass "
                        "AS seq, (SELECT max({col}) FROM {tbl}) AS top) s "
                        "WHERE top > coalesce(pg_sequence_last_value(seq), 0)"
                    ).format(t=sql.Literal(table), c=sql.Literal(column), col=sql.Identifier(column),
                             tbl=sql.Identifier(table))
                )
            return written

        report.tables[table] = target.write(run)  # type: ignore[attr-defined]
        progress("tables", done, len(ordered))


# ---------------------------------------------------------------------------- copy


def _copy_session(source: Store, target: Store, session_id: str, *, keep_ids: bool) -> tuple[int, int, int]:
    session = source.get_session(session_id)
    if session is None:
        return 0, 0, 0  # deleted while we were copying
    messages = list(source.iter_messages(session_id, include_hidden=True))
    position = {m.id: i for i, m in enumerate(messages)}
    turns: list[tuple[TurnRecord, int, int]] = []
    for t in source.list_turns(session_id, limit=10**9):
        ui, ai = position.get(t.user_message.id), position.get(t.assistant_message.id)
        if ui is None or ai is None:
            continue
        record = TurnRecord(
            turn_id=t.turn_id, intent=t.intent, action_name=t.action_name, job_refs=tuple(t.job_refs),
            model_used=t.model_used, confidence_score=t.confidence_score,
            processing_time=t.processing_time, resolved_query=t.resolved_query,
            context_used=t.context_used, metadata=t.metadata,
        )
        turns.append((record, ui, ai))
    derived = _derived_of(source, session_id)
    session.message_count = len(messages)
    if _is_postgres(target):
        target.restore_session(  # type: ignore[call-arg]
            session, messages, turns, derived=derived, keep_ids=keep_ids
        )
    else:
        target.restore_session(session, messages, turns)
        for kind, value in derived.items():
            target.put_derived(session_id, kind, value)
    return len(messages), len(turns), len(derived)


def _sqlite_vectors(store: SQLiteStore, batch: int) -> Iterator[tuple[list[int], np.ndarray]]:
    last = 0
    while True:
        rows = store.read(
            "SELECT message_id, embedding FROM message_vectors WHERE message_id > ? ORDER BY message_id LIMIT ?",
            (last, batch),
        )
        if not rows:
            return
        ids = [int(r[0]) for r in rows]
        data = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
        yield ids, data.astype(np.float32)
        last = ids[-1]


def _copy_vectors(
    source: Store, target: Store, report: MigrationReport, *, keep_ids: bool, progress: Progress
) -> None:
    from memlane.ports import check_model

    if not isinstance(source, SQLiteStore):
        report.vectors_note = "vectors are not copied from this source; run `memlane reindex` on the target"
        return
    tables = {r[0] for r in source.read("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "message_vectors" not in tables:
        return
    src_index = source.vector_index()
    info = src_index.model_info() if src_index is not None else None
    total = int(source.read("SELECT count(*) FROM message_vectors")[0][0])
    if info is None or total == 0:
        return
    if not keep_ids:
        report.vectors_note = "message ids changed, so vectors were not copied; run `memlane reindex` on the target"
        return
    dst_index = target.vector_index()
    if dst_index is None:
        report.vectors_note = "the target keeps no vectors (no pgvector); search there is keyword-only"
        return
    try:
        check_model(dst_index, info)
    except EmbedderMismatchError as exc:
        report.problems.append(f"vectors not copied: {exc}")
        return
    progress("vectors", 0, total)
    bulk = getattr(dst_index, "bulk_load", None)
    has_graph = getattr(dst_index, "has_graph", None)
    # Many vectors into an empty index, or resuming a bulk load that was killed before it
    # rebuilt the graph: load without the HNSW index and build it once at the end.
    use_bulk = callable(bulk) and (
        (dst_index.count() == 0 and total > 10_000) or (callable(has_graph) and not has_graph())
    )
    with bulk() if use_bulk else nullcontext():  # type: ignore[misc]
        _copy_vector_batches(source, target, dst_index, report, total, progress)
    report.vectors_note = f"copied from the source ({info.describe()})"


def _copy_vector_batches(
    source: SQLiteStore, target: Store, dst_index: Any, report: MigrationReport, total: int, progress: Progress
) -> int:
    done = 0
    for ids, data in _sqlite_vectors(source, 1000):
        have: set[int] = set()
        if _is_postgres(target):
            have = {int(r[0]) for r in target.read(  # type: ignore[attr-defined]
                "SELECT message_id FROM message_vectors WHERE message_id = ANY(%s)", (ids,)
            )}
        keep = [i for i, mid in enumerate(ids) if mid not in have]
        if keep:
            report.vectors += dst_index.upsert([ids[i] for i in keep], data[keep])
        done += len(ids)
        progress("vectors", done, total)
    return done


def migrate(
    source: Store,
    target: Store,
    *,
    keep_ids: bool | None = None,
    vectors: bool = True,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy every session of ``source`` into ``target``; resumable; verified at the end.

    ``keep_ids`` defaults to True for a PostgreSQL target (the only one that can write
    explicit ids). Raises nothing for per-session differences: they are listed in
    ``report.problems``.
    """
    say: Progress = progress or (lambda _phase, _done, _total: None)
    if keep_ids is None:
        keep_ids = _is_postgres(target)
    if keep_ids and not _is_postgres(target):
        raise InvalidInputError("keep_ids needs a PostgreSQL target; use keep_ids=False")
    report = MigrationReport(source=_describe(source), target=_describe(target))
    ids = _session_ids(source)
    report.sessions = len(ids)
    source_counts = _grouped(source, "messages")
    in_target = {s: n for s, n in _read(target, "SELECT id, message_count FROM sessions")}
    say("sessions", 0, len(ids))
    for done, sid in enumerate(ids, start=1):
        if sid in in_target:
            if int(in_target[sid]) == source_counts.get(sid, 0):
                report.skipped += 1  # copied by an earlier, interrupted run
            else:
                report.problems.append(
                    f"session {sid!r} is already in the target with {in_target[sid]} messages "
                    f"(source: {source_counts.get(sid, 0)}); left untouched, delete it there to copy it again"
                )
        else:
            m, t, d = _copy_session(source, target, sid, keep_ids=keep_ids)
            report.copied += 1
            report.messages += m
            report.turns += t
            report.derived += d
        say("sessions", done, len(ids))
    if vectors:
        _copy_vectors(source, target, report, keep_ids=keep_ids, progress=say)
    if isinstance(source, SQLiteStore):
        _copy_extra_tables(source, target, report, keep_ids=keep_ids, progress=say)
    verify(source, target, report, progress=say)
    extra = _extra_tables(source)
    for table in report.tables:
        n_target = int(_read(target, f'SELECT count(*) FROM "{table}"')[0][0])
        report.counts[table] = (extra.pop(table, 0), n_target)
    report.not_copied = extra
    return report


def verify(source: Store, target: Store, report: MigrationReport, *, progress: Progress | None = None) -> None:
    """Count every log table on both sides, in total and per session, into ``report``."""
    say: Progress = progress or (lambda _phase, _done, _total: None)
    say("verify", 0, len(LOG_TABLES))
    wanted = set(_session_ids(source))
    for i, table in enumerate(LOG_TABLES, start=1):
        a, b = _grouped(source, table), _grouped(target, table)
        # the target may hold other sessions too: compare the source's sessions only
        report.counts[table] = (sum(a.values()), sum(n for s, n in b.items() if s in wanted))
        for sid in sorted(s for s in wanted if a.get(s, 0) != b.get(s, 0))[:20]:
            report.problems.append(f"{table}: session {sid!r} has {a.get(sid, 0)} in the source, {b.get(sid, 0)} in the target")
        say("verify", i, len(LOG_TABLES))


def _describe(store: Store) -> str:
    stats_url = store.stats().get("url")
    return str(stats_url or store.url)
