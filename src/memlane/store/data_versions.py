"""Per-tenant data versions: one counter per tenant that every write a context packet may
read moves, in the write's own transaction (SQLite migration 20, PostgreSQL 21).

A context packet reads far more than its session: summaries and the tracker's state
(``derived``), long-term notes of the user and tenant, and the keyword and vector indexes
that recall searches across the user's sessions. Background work (summaries, the keyword
backlog, the embedder, the note promoter) writes those without a session version or a
change event, so the shared hot cache keys a packet by its tenant's version instead
(:mod:`memlane.hot_packets`): triggers on every table a packet reads bump it, whatever
code path writes, so no writer can forget to. The version is never read for anything
else; a packet built while it moved is not kept.

On PostgreSQL, ``message_vectors`` exists only where pgvector does; a store that gets the
extension later gets the trigger when the vectors migration runs (store/postgres.py).

Cost: one indexed upsert per written row, in the same transaction. On PostgreSQL a bumped
row stays locked until COMMIT, so one row per tenant (migration 21) made every writer of a
tenant - sessions, instances, the embedder, summaries - commit one at a time, and could
deadlock against the change-event lock (an append bumps at its session UPDATE and then
takes that lock; a new session or note takes that lock and then bumps). Migration 24
splits the counter into rows per tenant: a transaction bumps the first row no other
transaction holds (``FOR UPDATE SKIP LOCKED``, which never waits) and adds one when all
are held, so there are about as many rows as the tenant's most concurrent writers and no
writer waits for another's version row. ``tenant_versions`` became a view giving each tenant's sum: every
committed write still raises it, nothing lowers it (rows are only ever incremented), so
a packet keyed by it still goes stale with every write.
"""

from __future__ import annotations

__all__ = ["POSTGRES_SHARDS_SQL", "POSTGRES_SQL", "POSTGRES_VECTORS_TRIGGER", "SQLITE_SQL"]

#: (table, SQL giving the row's tenant from ``{row}`` (new/old), operations) of SQLite.
_SQLITE_TABLES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("sessions", "VALUES ({row}.tenant_id, 1)", ("INSERT", "UPDATE", "DELETE")),
    ("notes", "VALUES ({row}.tenant_id, 1)", ("INSERT", "UPDATE", "DELETE")),
    ("messages", "SELECT tenant_id, 1 FROM sessions WHERE id = {row}.session_id", ("INSERT", "UPDATE", "DELETE")),
    ("derived", "SELECT tenant_id, 1 FROM sessions WHERE id = {row}.session_id", ("INSERT", "UPDATE", "DELETE")),
    ("turns", "SELECT tenant_id, 1 FROM sessions WHERE id = {row}.session_id", ("INSERT", "UPDATE", "DELETE")),
    ("session_archive", "SELECT tenant_id, 1 FROM sessions WHERE id = {row}.session_id", ("INSERT", "DELETE")),
    ("message_facets", "SELECT tenant_id, 1 FROM sessions WHERE id = {row}.session_id", ("INSERT", "DELETE")),
    ("message_vectors",
     "SELECT s.tenant_id, 1 FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id = {row}.message_id",
     ("INSERT", "UPDATE", "DELETE")),
)


def _sqlite_sql() -> str:
    out = [
        "CREATE TABLE tenant_versions (tenant_id TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL);",
    ]
    for table, source, operations in _SQLITE_TABLES:
        for op in operations:
            row = "old" if op == "DELETE" else "new"
            select = source.format(row=row)
            if select.startswith("VALUES"):
                select = f"SELECT {select[len('VALUES ('):-1]} WHERE true"
            # A row whose session went first (a cascade) finds no tenant: the session's own
            # DELETE bumped it.
            out.append(
                f"CREATE TRIGGER data_version_{table}_{op.lower()} AFTER {op} ON {table} BEGIN "
                f"INSERT INTO tenant_versions(tenant_id, version) {select} "
                "ON CONFLICT(tenant_id) DO UPDATE SET version = version + 1; END;"
            )
    return "\n".join(out)


SQLITE_SQL = _sqlite_sql()

#: The trigger function of both PostgreSQL migrations: finds the written row's tenant, then
#: runs ``bump`` (which counter row moves is what migration 24 changed).
_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION memlane_data_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_tenant TEXT;
    sid TEXT;
BEGIN
    IF TG_TABLE_NAME IN ('session_archive', 'message_facets') THEN
        IF TG_OP = 'DELETE' THEN sid := OLD.session_id; ELSE sid := NEW.session_id; END IF;
        SELECT tenant_id INTO row_tenant FROM sessions WHERE id = sid;
    ELSIF TG_OP = 'DELETE' THEN row_tenant := OLD.tenant_id;
    ELSE row_tenant := NEW.tenant_id;
    END IF;
    IF row_tenant IS NULL THEN RETURN NULL; END IF;
{bump}
    RETURN NULL;
END $$;
"""

POSTGRES_SQL = """
CREATE TABLE tenant_versions (tenant_id TEXT PRIMARY KEY, version BIGINT NOT NULL);
{function}
DO $$
DECLARE tbl TEXT;
BEGIN
    FOREACH tbl IN ARRAY ARRAY['sessions', 'notes', 'messages', 'derived', 'turns', 'session_archive',
                               'message_facets', 'message_vectors'] LOOP
        -- message_vectors exists only where pgvector does (migration 2 is optional)
        IF to_regclass(tbl) IS NOT NULL THEN
            EXECUTE format('CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE ON %I '
                           'FOR EACH ROW EXECUTE FUNCTION memlane_data_version()', tbl);
        END IF;
    END LOOP;
END $$;
""".format(function=_PG_FUNCTION.format(bump="""
    INSERT INTO tenant_versions AS t (tenant_id, version) VALUES (row_tenant, 1)
        ON CONFLICT (tenant_id) DO UPDATE SET version = t.version + 1;"""))

#: For a store whose pgvector arrived after its data versions (migration 2 is optional and
#: retried at each start): the trigger the data-versions migration could not make then.
POSTGRES_VECTORS_TRIGGER = """
CREATE TRIGGER data_version AFTER INSERT OR UPDATE OR DELETE ON message_vectors
    FOR EACH ROW EXECUTE FUNCTION memlane_data_version();
"""

#: PostgreSQL migration 24: the counter of migration 21 split into rows per tenant (see the
#: module's docstring); the old counts move to shard 0, so no version goes back.
POSTGRES_SHARDS_SQL = """
LOCK TABLE tenant_versions IN ACCESS EXCLUSIVE MODE;
CREATE TABLE tenant_version_shards (
    tenant_id TEXT NOT NULL,
    shard BIGINT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, shard)
);
CREATE SEQUENCE tenant_version_shard_ids;  -- starts at 1: shard 0 is the old count
INSERT INTO tenant_version_shards (tenant_id, shard, version) SELECT tenant_id, 0, version FROM tenant_versions;
DROP TABLE tenant_versions;
CREATE VIEW tenant_versions AS
    SELECT tenant_id, SUM(version)::BIGINT AS version FROM tenant_version_shards GROUP BY tenant_id;
{function}
""".format(function=_PG_FUNCTION.format(bump="""
    -- the first row no other transaction holds (SKIP LOCKED never waits; rows this one
    -- holds are not skipped), else a new row nobody else can hold yet
    UPDATE tenant_version_shards SET version = version + 1
        WHERE (tenant_id, shard) = (SELECT tenant_id, shard FROM tenant_version_shards
                                    WHERE tenant_id = row_tenant ORDER BY shard LIMIT 1
                                    FOR UPDATE SKIP LOCKED);
    IF NOT FOUND THEN
        INSERT INTO tenant_version_shards (tenant_id, shard, version)
            VALUES (row_tenant, nextval('tenant_version_shard_ids'), 1);
    END IF;"""))
