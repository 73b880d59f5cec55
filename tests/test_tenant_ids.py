"""Session ids are per tenant: two tenants use the same id without seeing or touching each other.

Over REST with real API keys (each key's tenant is its namespace), in the library (the key
``memlane.scoping.session_key`` names), and the migration that moves the sessions of an
existing database (SQLite and PostgreSQL) to their keys without losing anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from memlane import Memory
from memlane.models import Session
from memlane.scoping import SEPARATOR, public_session_id, session_key, tenant_of_key
from memlane.server.auth import key_store_for
from memlane.store import sqlite_driver
from tests.pg_fixture import fresh_pg_memory
from tests.server_support import auth, client_for, new_key, run_cli

SID = "support-42"


def _events(api: object, key: str) -> list[dict[str, object]]:
    r = api.get("/v1/events", params={"since": 0, "follow": "false"}, headers=auth(key))  # type: ignore[attr-defined]
    assert r.status_code == 200, r.text
    return [json.loads(line[len("data: "):]) for line in r.text.splitlines() if line.startswith("data: ")]


def test_two_tenants_use_the_same_session_id_over_rest(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        acme, beta = new_key(mem, "acme"), new_key(mem, "beta")
        with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
            for key, word in ((acme, "aardvark"), (beta, "bumblebee")):
                r = api.post("/v1/sessions", json={"session_id": SID, "title": f"{word} desk"}, headers=auth(key))
                assert r.status_code == 201, r.text  # not "already taken": the other tenant's id is not ours
                assert r.json()["id"] == SID
                for i in range(3):
                    r = api.post(f"/v1/sessions/{SID}/messages",
                                 json={"role": "user", "content": f"the {word} ticket number {i}"}, headers=auth(key))
                    assert r.status_code == 201 and r.json()["session_id"] == SID
            mem.flush(60)

            for key, mine, theirs in ((acme, "aardvark", "bumblebee"), (beta, "bumblebee", "aardvark")):
                h = auth(key)
                got = api.get(f"/v1/sessions/{SID}", headers=h).json()
                assert got["id"] == SID and got["title"] == f"{mine} desk"
                texts = [m["content"] for m in api.get(f"/v1/sessions/{SID}/messages", headers=h).json()["messages"]]
                assert texts == [f"the {mine} ticket number {i}" for i in range(3)]
                assert [s["id"] for s in api.get("/v1/sessions", headers=h).json()["sessions"]] == [SID]
                for query in ("ticket number", theirs):
                    hits = api.post("/v1/search", json={"query": query, "top_k": 20}, headers=h).json()["hits"]
                    assert {x["session_id"] for x in hits} <= {SID} and theirs not in json.dumps(hits)
                hits = api.post("/v1/search", json={"query": "ticket", "session_id": SID}, headers=h).json()["hits"]
                assert hits and all(mine in x["message"]["content"] for x in hits)
                export = api.get(f"/v1/sessions/{SID}/export", headers=h).text
                assert mine in export and theirs not in export and SEPARATOR not in export
                events = _events(api, key)
                assert events and {e["session_id"] for e in events} == {SID}
                assert {e["tenant_id"] for e in events} == {"acme" if mine == "aardvark" else "beta"}
                assert SEPARATOR not in json.dumps(api.get(f"/v1/sessions/{SID}/turns", headers=h).json())
                # the routes that call Memory themselves name the caller's session too
                r = api.get(f"/v1/sessions/{SID}/facets", headers=h)
                assert r.status_code == 200, r.text
                r = api.post(f"/v1/sessions/{SID}/commands", json={"text": "hello there"}, headers=h)
                assert r.status_code == 200 and r.json()["recognized"] is False
                r = api.post(f"/v1/sessions/{SID}/response-cache",
                             json={"query": "which ticket?", "response": f"the {mine} one", "model": "m"}, headers=h)
                assert r.status_code == 201, r.text
                r = api.post(f"/v1/sessions/{SID}/response-cache/lookup",
                             json={"query": "which ticket?", "model": "m"}, headers=h)
                assert r.json()["hit"]["response"] == f"the {mine} one"

            # acme forgets its support-42: beta's stays whole, and acme may use the id again
            assert api.delete(f"/v1/sessions/{SID}", headers=auth(acme)).json() == {"ok": True}
            assert api.get(f"/v1/sessions/{SID}", headers=auth(acme)).status_code == 404
            texts = [m["content"] for m in api.get(f"/v1/sessions/{SID}/messages", headers=auth(beta)).json()["messages"]]
            assert len(texts) == 3 and all("bumblebee" in t for t in texts)
            assert api.post("/v1/search", json={"query": "bumblebee"}, headers=auth(beta)).json()["hits"]
            assert api.post("/v1/sessions", json={"session_id": SID}, headers=auth(acme)).status_code == 201
            assert api.get(f"/v1/sessions/{SID}/messages", headers=auth(acme)).json()["messages"] == []
        # the library names each by its key; the default tenant's id is a third session
        assert mem.store.get_session(session_key("beta", SID)) is not None
        assert mem.store.get_session(SID) is None
        assert mem.load_session(session_key("beta", SID))[0].content == "the bumblebee ticket number 0"


def test_a_key_cannot_reach_another_tenants_session_by_its_key(tmp_path: Path) -> None:
    """The stored key of another tenant's session names nothing for a key: ids in bodies are
    printable (keys are not), and a key in the path is read inside the caller's tenant."""
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        acme, beta = new_key(mem, "acme"), new_key(mem, "beta")
        with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
            assert api.post(f"/v1/sessions/{SID}/messages", json={"role": "user", "content": "acme only"},
                            headers=auth(acme)).status_code == 201
            stolen = session_key("acme", SID)
            r = api.get(f"/v1/sessions/{quote(stolen)}/messages", headers=auth(beta))
            assert r.status_code == 404, r.text  # beta's key for it is beta+acme+id: nothing
            r = api.post("/v1/search", json={"query": "acme", "session_id": stolen}, headers=auth(beta))
            assert r.status_code == 422
            r = api.post("/v1/sessions", json={"session_id": f"acme{SEPARATOR}{SID}"}, headers=auth(beta))
            assert r.status_code == 422
        assert [m.content for m in mem.load_session(stolen)] == ["acme only"]


def test_a_server_without_keys_addresses_every_tenants_session_by_its_key(tmp_path: Path) -> None:
    """The local admin (no keys) sees every tenant's sessions, listed by key, and can open them."""
    with Memory(tmp_path / "m.db", embedder="none") as mem, client_for(mem) as api:
        key = mem.create_session(session_id=SID, tenant_id="acme")
        mem.add(key, "acme's words")
        listed = [x["id"] for x in api.get("/v1/sessions").json()["sessions"]]
        assert listed == [key]
        r = api.get(f"/v1/sessions/{quote(key)}/messages")
        assert r.status_code == 200 and [m["content"] for m in r.json()["messages"]] == ["acme's words"]
        assert api.get(f"/v1/sessions/{quote(SEPARATOR + SID)}").status_code == 422  # no tenant: no key


def test_the_library_names_a_tenants_session_by_its_key(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        a = mem.create_session(session_id=SID, tenant_id="acme")
        b = mem.create_session(session_id=SID, tenant_id="beta")
        plain = mem.create_session(session_id=SID)
        assert len({a, b, plain}) == 3 and plain == SID
        assert (tenant_of_key(a), public_session_id(a)) == ("acme", SID)
        mem.add(a, "acme's words")
        mem.add(b, "beta's words")
        assert [m.content for m in mem.load_session(a)] == ["acme's words"]
        assert [h.message.session_id for h in mem.search("words", tenant_id="beta")] == [b]
        # a message to a key that does not exist yet creates it in the key's tenant
        mem.add(session_key("gamma", "new"), "hello")
        assert mem.get_session(session_key("gamma", "new")).tenant_id == "gamma"
        # export names the tenant's own id; import puts it back under the key
        doc = mem.export_session(a)
        assert json.loads(doc)["session"]["id"] == SID and SEPARATOR not in doc
        mem.delete_session(a)
        assert mem.import_sessions(doc) == [a]
        assert [m.content for m in mem.load_session(a)] == ["acme's words"]


def _legacy(mem: Memory) -> None:
    """What an existing database holds: tenant sessions stored under their plain ids."""
    mem.store.create_session(Session(id="room", tenant_id="acme", title="acme's room"))
    mem.store.create_session(Session(id="lobby", tenant_id="default"))
    mem.add("room", "the lighthouse keeper's code is 7")
    mem.add("room", "noted, the lighthouse code", role="assistant")
    mem.add("lobby", "a default tenant message")
    mem.add_note("the acme keeper likes lighthouses", session_id="room")
    mem.flush(60)


def _check_migrated(mem: Memory) -> None:
    key = session_key("acme", "room")
    assert mem.store.get_session("room") is None
    moved = mem.store.get_session(key)
    assert moved is not None and moved.tenant_id == "acme" and moved.title == "acme's room"
    assert moved.message_count == 2
    assert [m.content for m in mem.load_session(key)] == ["the lighthouse keeper's code is 7",
                                                          "noted, the lighthouse code"]
    assert [m.content for m in mem.load_session("lobby")] == ["a default tenant message"]
    assert {h.message.session_id for h in mem.search("lighthouse keeper")} == {key}
    assert [n.session_id for n in mem.notes(tenant_id="acme")] == [key]
    assert [t.session_id for t in mem.list_turns(key)] == [key] * len(mem.list_turns(key))
    # the move itself is no change anyone made: no created/forgotten events for it
    kinds = [e.kind for e in mem.events(since=0)]
    assert "session.forgotten" not in kinds and kinds.count("session.created") == 2


def test_migration_moves_an_existing_sqlite_databases_sessions(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hashing") as mem:
        _legacy(mem)
    # as a database written before migration 13: plain ids, 13 not applied yet
    conn = sqlite_driver.connect(str(db), None)
    for table in ("messages", "notes", "change_events", "derived"):
        conn.execute(f"UPDATE {table} SET session_id = 'room' WHERE session_id = ?", (session_key("acme", "room"),))
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("UPDATE sessions SET id = 'room' WHERE id = ?", (session_key("acme", "room"),))
    conn.execute("DELETE FROM schema_migrations WHERE version = 13")
    conn.commit()
    conn.close()
    with Memory(db, embedder="hashing") as mem:
        _check_migrated(mem)
        acme = new_key(mem, "acme")
        with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
            r = api.get("/v1/sessions/room/messages", headers=auth(acme))
            assert r.status_code == 200 and len(r.json()["messages"]) == 2


@pytest.fixture
def pg_mem(pg_url: str) -> Iterator[Memory]:
    with fresh_pg_memory(pg_url, embedder="hashing") as mem:
        yield mem


def test_migration_moves_an_existing_postgres_databases_sessions(pg_mem: Memory, pg_url: str) -> None:
    from memlane.store.postgres_schema import MIGRATIONS

    mem = pg_mem
    _legacy(mem)
    key = session_key("acme", "room")
    store = mem.store

    def undo(conn: object) -> None:  # back to plain ids, as before migration 13
        run = conn.execute  # type: ignore[attr-defined]
        run("INSERT INTO sessions (id, tenant_id, title, metadata, status, created_at, updated_at, "
            "last_active_at, message_count) SELECT 'room', tenant_id, title, metadata, status, created_at, "
            "updated_at, last_active_at, message_count FROM sessions WHERE id = %s", (key,))
        for table in ("messages", "turns", "derived", "notes", "change_events", "message_vectors"):
            run(f"UPDATE {table} SET session_id = 'room' WHERE session_id = %s", (key,))
        run("DELETE FROM sessions WHERE id = %s", (key,))

    store.write(undo)  # type: ignore[attr-defined]
    assert store.get_session("room") is not None and store.get_session(key) is None
    store.write(lambda conn: conn.execute(MIGRATIONS[13][1].encode()))  # type: ignore[attr-defined]
    _check_migrated_rows(mem)


def _check_migrated_rows(mem: Memory) -> None:
    key = session_key("acme", "room")
    assert mem.store.get_session("room") is None
    moved = mem.store.get_session(key)
    assert moved is not None and moved.message_count == 2 and moved.title == "acme's room"
    assert [m.content for m in mem.load_session(key)] == ["the lighthouse keeper's code is 7",
                                                          "noted, the lighthouse code"]
    assert {h.message.session_id for h in mem.search("lighthouse keeper")} == {key}
    assert [n.session_id for n in mem.notes(tenant_id="acme")] == [key]


def test_cli_takes_and_shows_a_tenants_own_ids(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="none") as mem:
        mem.add(mem.create_session(session_id=SID, tenant_id="acme"), "acme's ticket")
        mem.add(mem.create_session(session_id=SID, tenant_id="beta"), "beta's ticket")
        mem.add(SID, "the default tenant's ticket")
    for tenant, word in (("acme", "acme's"), ("beta", "beta's")):
        done = run_cli(["--store", str(db), "--tenant", tenant, "history", SID, "--json"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert [m["content"] for m in json.loads(done.stdout)] == [f"{word} ticket"]
        listed = run_cli(["--store", str(db), "--tenant", tenant, "sessions", "--json"], tmp_path)
        assert [s["id"] for s in json.loads(listed.stdout)] == [SID]
    done = run_cli(["--store", str(db), "history", SID, "--json"], tmp_path)
    assert [m["content"] for m in json.loads(done.stdout)] == ["the default tenant's ticket"]
    listed = run_cli(["--store", str(db), "sessions", "--json"], tmp_path)
    assert sorted(s["id"] for s in json.loads(listed.stdout)) == sorted([SID, f"acme/{SID}", f"beta/{SID}"])
    done = run_cli(["--store", str(db), "--tenant", "acme", "delete", SID, "--yes"], tmp_path)
    assert done.returncode == 0, done.stderr
    with Memory(db, embedder="none") as mem:
        assert mem.store.get_session(session_key("acme", SID)) is None
        assert [m.content for m in mem.load_session(session_key("beta", SID))] == ["beta's ticket"]


def test_cli_notes_and_audit_keep_to_the_tenant(tmp_path: Path) -> None:
    """`memlane --tenant T notes ...` and `memlane --tenant T audit` take and show T's own
    session ids and see nothing of another tenant (as the other commands and REST with a key)."""
    from typer.testing import CliRunner

    from memlane.cli.main import app
    from memlane.notes.models import AuditEntry

    db = tmp_path / "m.db"
    note_of: dict[str, int] = {}
    with Memory(db, embedder="none") as mem:
        for tenant in ("acme", "beta"):
            key = mem.create_session(session_id=SID, tenant_id=tenant, user_id="ana")
            mem.add(key, f"the {tenant} wiki is at https://{tenant}.example/wiki")
            note_of[tenant] = mem.add_note(f"{tenant} ships on Fridays", user_id="ana", session_id=key).id or 0
            mem.audit(AuditEntry(action="remember", actor_id="ana", actor_name="Ana", is_anchor=False, allowed=True,
                                 result="ok", session_id=key, tenant_id=tenant, command=f"remember {tenant}"))

    def cli(*args: str, ok: bool = True) -> str:
        """stdout of a command that works; the error of one that must fail (main() prints it)."""
        done = CliRunner().invoke(app, ["--store", str(db), *args])
        assert (done.exit_code == 0) == ok, done.output
        return done.output if ok else str(done.exception)

    for tenant, other in (("acme", "beta"), ("beta", "acme")):
        for listed in (json.loads(cli("--tenant", tenant, "notes", "list", "--json")),
                       json.loads(cli("--tenant", tenant, "notes", "list", "--session", SID, "--json"))):
            assert note_of[tenant] in [n["id"] for n in listed]  # with what promotion learned of the link
            assert {(n["tenant_id"], n["session_id"]) for n in listed} == {(tenant, SID)}
        audit = json.loads(cli("--tenant", tenant, "audit", "--json"))
        assert [(e["command"], e["session_id"]) for e in audit] == [(f"remember {tenant}", SID)]
        facets = json.loads(cli("--tenant", tenant, "notes", "facets", "--kind", "link", "--json"))
        assert {(f["value"], f["session_id"]) for f in facets} == {(f"https://{tenant}.example/wiki", SID)}
        assert "does not exist" in cli("--tenant", tenant, "notes", "history", str(note_of[other]), ok=False)
        cli("--tenant", tenant, "notes", "forget", str(note_of[other]), "--yes", ok=False)

    assert "--session" in cli("--tenant", "acme", "notes", "add", "acme deploys with Ansible", ok=False)
    added = json.loads(cli("--tenant", "acme", "notes", "add", "acme deploys with Ansible", "--session", SID,
                           "--user", "ana", "--json"))
    assert added["session_id"] == SID and added["tenant_id"] == "acme"
    everyone = json.loads(cli("audit", "--json"))  # without --tenant: every tenant, keys shown tenant/id
    assert sorted(e["session_id"] for e in everyone) == [f"acme/{SID}", f"beta/{SID}"]
    with Memory(db, embedder="none") as mem:
        assert "beta ships on Fridays" in [n.text for n in mem.notes(tenant_id="beta")]  # forget refused
