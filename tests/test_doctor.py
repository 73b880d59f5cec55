"""`memlane doctor` and GET /v1/health/details on healthy and damaged stores (real files, real PostgreSQL)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from memlane import Memory
from memlane.cli.main import main
from memlane.doctor import diagnose, fix_orphans
from memlane.server.auth import key_store_for
from memlane.store import sqlite_driver
from memlane.store.postgres import PostgresStore
from tests.server_support import client_for


def _seed(db: Path, embedder: str = "hashing") -> None:
    with Memory(db, embedder=embedder) as mem:
        for i in range(3):
            sid = mem.create_session(session_id=f"s{i}", user_id="ana")
            for j in range(4):
                mem.store_interaction(f"question {i}.{j} about Lisbon trams", f"answer {i}.{j}", session_id=sid)
        mem.flush()


def _doctor(db: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    try:
        main(["--store", str(db), "doctor", "--json", *extra])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr().out
    return code, json.loads(out[out.index("{"):])


def _by_check(report: dict, check: str) -> list[dict]:  # type: ignore[type-arg]
    return [f for f in report["findings"] if f["check"] == check]


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")


def test_healthy_store_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    code, report = _doctor(db, capsys)
    assert code == 0 and report["healthy"] is True
    statuses = {f["check"]: f["status"] for f in report["findings"]}
    assert statuses["integrity"] == statuses["keyword_index"] == statuses["orphans"] == "ok"
    assert statuses["embedder"] == statuses["index_lag"] == statuses["wal"] == "ok"


def test_orphans_are_found_then_fixed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    # foreign keys off: what a careless repair does (with the SQL functions memlane's
    # keyword-index triggers call, which any program writing messages must register)
    with sqlite_driver.with_functions(sqlite3.connect(db)) as conn:
        conn.execute("DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE session_id = 's1' LIMIT 2)")
        conn.execute("DELETE FROM sessions WHERE id = 's2'")
    code, report = _doctor(db, capsys)
    assert code == 10  # CorruptRecordError's code in cli/exit_codes.py
    [orphans] = _by_check(report, "orphans")
    assert orphans["needs_action"] and "message_vectors.message_id" in orphans["message"]
    assert "derived.session_id" in orphans["message"] and "--fix-orphans" in orphans["action"]

    code, report = _doctor(db, capsys, "--fix-orphans")
    assert code == 0 and _by_check(report, "orphans")[0]["status"] == "ok"
    with Memory(db, embedder="hashing") as mem:  # the rest of the log is untouched
        assert {s.id for s in mem.list_sessions()} == {"s0", "s1"}
        assert mem.store.count_messages("s0") == 8 and mem.store.count_messages("s1") == 6


def test_vectors_of_another_model_exit_with_the_embedder_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE vector_meta SET value = 'old-model' WHERE key = 'model_id'")
    code, report = _doctor(db, capsys)
    assert code == 9
    [finding] = _by_check(report, "embedder")
    assert "old-model" in finding["message"] and "memlane reindex" in finding["action"]


def test_index_lag_is_reported_without_failing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db, embedder="none")  # written without vectors, now configured with them
    code, report = _doctor(db, capsys)
    assert code == 0
    [lag] = _by_check(report, "index_lag")
    assert lag["status"] == "warn" and lag["message"].startswith("24 messages")


def test_damaged_keyword_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    with sqlite3.connect(db) as conn:  # the table changes behind the index's back
        conn.execute("DROP TRIGGER messages_fts_update")
        conn.execute("UPDATE messages SET content = 'rewritten' WHERE id = 1")
    code, report = _doctor(db, capsys)
    assert code == 10
    [fts] = [f for f in _by_check(report, "keyword_index") if f["status"] == "error"]
    assert "messages_fts" in fts["message"] and "memlane reindex" in fts["action"]


def test_corrupted_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages_by_time'").fetchone()[0]
    with db.open("r+b") as f:  # scribble over one index page
        f.seek((root - 1) * page_size + 8)
        f.write(b"\xff" * 64)
    code, report = _doctor(db, capsys)
    assert code == 10
    [integrity] = _by_check(report, "integrity")
    assert integrity["status"] == "error" and "backup" in integrity["action"]


def test_health_details_for_admins_only(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hashing")
    try:
        mem.store_interaction("hello", "hi", session_id=mem.create_session(session_id="s"))
        mem.flush()
        with client_for(mem) as api:
            body = api.get("/v1/health/details").json()
            assert body["healthy"] is True and body["backend"] == "sqlite"
        _record, key = key_store_for(mem.store).create_key("acme", "agent")
        with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
            reply = api.get("/v1/health/details", headers={"Authorization": f"Bearer {key}"})
            assert reply.status_code == 403
    finally:
        mem.close()


@pytest.mark.postgres
def test_postgres_healthy_then_orphaned(fresh_pg_store: PostgresStore) -> None:
    with Memory(fresh_pg_store, embedder="hashing") as mem:
        sid = mem.create_session(session_id="p1")
        mem.store_interaction("tram 28 to Graça", "noted", session_id=sid)
        mem.flush()
        report = diagnose(mem.store, "hashing")
        assert report.healthy, report.to_dict()
        assert {f.check for f in report.findings} >= {"orphans", "embedder", "index_lag", "disk"}

        def orphan(conn: object) -> None:  # replica mode skips foreign-key triggers (superuser)
            conn.execute("SET LOCAL session_replication_role = replica")  # type: ignore[attr-defined]
            conn.execute("DELETE FROM messages WHERE session_id = 'p1'")  # type: ignore[attr-defined]

        fresh_pg_store.write(orphan)
        report = diagnose(mem.store, "hashing")
        assert not report.healthy
        assert "message_vectors.message_id" in next(f for f in report.findings if f.check == "orphans").message
        assert fix_orphans(mem.store)["message_vectors.message_id"] == 2
        assert diagnose(mem.store, "hashing").healthy


@pytest.mark.postgres
def test_postgres_search_checks(fresh_pg_store: PostgresStore) -> None:
    """Rows without a language, an invalid index left by a failed concurrent build and a
    vector index lost in an interrupted bulk load are reported with what to do; memlane
    reindex mends the first and the last."""
    import psycopg

    url = fresh_pg_store.url
    with Memory(fresh_pg_store, embedder="hashing") as mem:
        sid = mem.create_session(session_id="p2")
        mem.store_interaction("Die Datenbanken laufen wieder", "gut", session_id=sid)
        mem.flush()
        store = mem.store
        report = diagnose(store, "hashing")
        checks = {f.check: f.status for f in report.findings}
        assert checks["languages"] == "ok" and checks["indexes"] == "ok", report.to_dict()
        assert "extensions" not in checks and "vacuum" not in checks  # the embedded server has both
        store.write(lambda conn: conn.execute("UPDATE messages SET lang = NULL"))  # type: ignore[attr-defined]
        store.write(lambda conn: conn.execute("DROP INDEX message_vectors_hnsw"))  # type: ignore[attr-defined]
        # two messages in one session: the build fails and leaves an invalid index behind
        with psycopg.connect(fresh_pg_store._conninfo, autocommit=True) as conn, pytest.raises(
            psycopg.errors.UniqueViolation
        ):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY doctor_bad ON messages (session_id)")
        report = diagnose(store, "hashing")
        found = {(f.check, f.status): f for f in report.findings}
        assert "2 messages" in found["languages", "warn"].message
        assert "memlane reindex" in found["languages", "warn"].action
        assert "message_vectors_hnsw" in found["indexes", "warn"].message
        assert "doctor_bad" in found["indexes", "error"].message and not report.healthy
        store.write(lambda conn: conn.execute("DROP INDEX doctor_bad"))  # type: ignore[attr-defined]
    main(["--store", url, "reindex", "--embedder", "hashing"])
    again = PostgresStore(url)
    try:
        report = diagnose(again, "hashing")
        assert {f.check: f.status for f in report.findings if f.check in ("languages", "indexes")} == {
            "languages": "ok", "indexes": "ok"}, report.to_dict()
        assert report.healthy
    finally:
        again.close()


def test_doctor_opens_no_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--store", str(tmp_path / "nope.db"), "doctor"])
    assert exc.value.code == 4
    assert not (tmp_path / "nope.db").exists()


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite file (what a careless 'backup' is)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def test_erasure_log_finds_forgotten_data_copied_back_and_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    code, report = _doctor(db, capsys)
    assert code == 0 and _by_check(report, "erasure_log")[0]["status"] == "ok"
    _copy(db, tmp_path / "before-forget.db")
    with Memory(db, embedder="hashing") as mem:
        mem.delete_session("s1")
        mem.forget_messages(mem.store.message_ids("s0")[:2])
    code, report = _doctor(db, capsys)
    assert code == 0 and report["healthy"], report  # forgetting leaves a healthy store
    assert "2 erasures logged" in _by_check(report, "erasure_log")[0]["message"]
    # Damage: the old file is copied over the live one instead of `memlane restore`.
    _copy(tmp_path / "before-forget.db", db)
    code, report = _doctor(db, capsys)
    assert code == 10
    [back] = [f for f in _by_check(report, "erasure_log") if f["status"] == "error"]
    assert "1 sessions" in back["message"] and "2 messages" in back["message"]  # s1 (its messages with it), 2 of s0
    assert "--fix-erasures" in back["action"]
    code, report = _doctor(db, capsys, "--fix-erasures")
    assert code == 0 and report["healthy"], report
    with Memory(db, embedder="hashing") as mem:
        assert {s.id for s in mem.list_sessions()} == {"s0", "s2"}
        assert mem.store.count_messages("s0") == 6


def test_outbox_naming_a_forgotten_session_is_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    with sqlite3.connect(db) as conn:  # what a store of before migration 12 kept after a forget
        conn.execute("INSERT INTO change_events (at, tenant_id, kind, session_id, subject_id) "
                     "VALUES (0, NULL, 'message.appended', 'gone-session', 99)")
        conn.execute("INSERT INTO change_events (at, tenant_id, kind, session_id) "
                     "VALUES (0, NULL, 'session.forgotten', 'older-gone')")
    code, report = _doctor(db, capsys)
    assert code == 10
    outbox = {f["status"]: f for f in _by_check(report, "outbox")}
    assert "1 change events still name forgotten sessions" in outbox["error"]["message"]
    assert "1 session.forgotten markers" in outbox["warn"]["message"]
    code, report = _doctor(db, capsys, "--fix-erasures")
    assert code == 0 and [f["status"] for f in _by_check(report, "outbox")] == ["ok"]
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("SELECT session_id FROM change_events")}
    assert not names & {"gone-session", "older-gone"}


@pytest.mark.postgres
def test_postgres_outbox_check(fresh_pg_store: PostgresStore) -> None:
    with Memory(fresh_pg_store, embedder="hashing") as mem:
        mem.store_interaction("tram 28", "noted", session_id=mem.create_session(session_id="p1"))
        mem.delete_session("p1")
        report = diagnose(mem.store, "hashing")
        assert report.healthy, report.to_dict()
        assert next(f for f in report.findings if f.check == "erasure_log").status == "info"
        fresh_pg_store.write(lambda conn: conn.execute(
            "INSERT INTO change_events (at, kind, session_id) VALUES (0, 'message.appended', 'p1')"))
        assert not diagnose(mem.store, "hashing").healthy
        assert fresh_pg_store.repair_erasures()["events"] == 1
        assert diagnose(mem.store, "hashing").healthy
