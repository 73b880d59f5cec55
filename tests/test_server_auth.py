"""API keys, tenants and the no-auth rule: isolation tested both ways, on every path."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from memlane import Memory
from memlane.cli.serve import decide_auth
from memlane.errors import ConfigError
from memlane.scoping import session_key
from memlane.server.auth import key_store_for, split_key
from tests.server_support import auth, client_for, new_key, run_cli, serve_subprocess


def test_keys_store_only_hashes_and_revoke_takes_effect(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with Memory(path, embedder="none") as mem:
        keys = key_store_for(mem.store)
        record, plaintext = keys.create_key("acme", "agent-1")
        parts = split_key(plaintext)
        assert parts is not None and parts[0] == record.id
        assert keys.verify(plaintext) is not None
        assert keys.verify(plaintext + "x") is None and keys.verify("garbage") is None
        assert [k.id for k in keys.list_keys()] == [record.id]
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("memory.db"))
    assert parts[1].encode() not in raw and plaintext.encode() not in raw  # never the secret
    with Memory(path, embedder="none") as mem:
        keys = key_store_for(mem.store)
        assert keys.revoke_key(record.id) and not keys.revoke_key(record.id)
        assert keys.verify(plaintext) is None and not keys.has_active_keys()
        assert keys.list_keys() == [] and len(keys.list_keys(include_revoked=True)) == 1


def test_decide_auth() -> None:
    assert decide_auth("127.0.0.1", has_keys=False, flag=None) is False
    assert decide_auth("::1", has_keys=False, flag=None) is False
    assert decide_auth("127.0.0.1", has_keys=True, flag=None) is True
    assert decide_auth("0.0.0.0", has_keys=True, flag=None) is True
    with pytest.raises(ConfigError, match="without API keys"):
        decide_auth("0.0.0.0", has_keys=False, flag=None)
    with pytest.raises(ConfigError, match="loopback"):
        decide_auth("192.168.1.5", has_keys=True, flag=False)


def test_tenants_are_isolated_both_ways(mem: Memory) -> None:
    key_a, key_b = new_key(mem, "tenant-a"), new_key(mem, "tenant-b")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
        assert api.get("/v1/sessions").status_code == 401
        assert api.get("/v1/sessions", headers=auth("mlk_nope_nope")).status_code == 401
        assert api.get("/healthz").status_code == 200 and api.get("/").status_code == 200

        def setup(key: str, sid: str, secret: str) -> int:
            h = auth(key)
            assert api.post("/v1/sessions", json={"session_id": sid, "tenant_id": "spoofed"}, headers=h).status_code == 201
            r = api.post(f"/v1/sessions/{sid}/messages", json={"role": "user", "content": secret}, headers=h)
            assert r.status_code == 201
            api.post(f"/v1/sessions/{sid}/turns", json={"query": f"{secret} again", "response": "ok"}, headers=h)
            return int(r.json()["id"])

        mid_a = setup(key_a, "sess-a", "alpha pineapple secret")
        mid_b = setup(key_b, "sess-b", "bravo pineapple secret")
        assert mem.get_session(session_key("tenant-a", "sess-a")).tenant_id == "tenant-a"  # the body's was ignored
        mem.flush()

        for key, mine, theirs, their_mid, their_word in (
            (key_a, "sess-a", "sess-b", mid_b, "bravo"),
            (key_b, "sess-b", "sess-a", mid_a, "alpha"),
        ):
            h = auth(key)
            assert [s["id"] for s in api.get("/v1/sessions", headers=h).json()["sessions"]] == [mine]
            assert api.get("/v1/sessions", params={"tenant_id": "tenant-a"}, headers=h).json()["sessions"][0]["id"] == mine
            for method, path in (
                ("GET", f"/v1/sessions/{theirs}"), ("GET", f"/v1/sessions/{theirs}/messages"),
                ("GET", f"/v1/sessions/{theirs}/turns"), ("GET", f"/v1/sessions/{theirs}/export"),
                ("POST", f"/v1/sessions/{theirs}/end"), ("DELETE", f"/v1/sessions/{theirs}/messages"),
                ("DELETE", f"/v1/sessions/{theirs}"), ("GET", f"/v1/messages/{their_mid}"),
                ("DELETE", f"/v1/messages/{their_mid}"),
            ):
                r = api.request(method, path, headers=h)
                assert r.status_code == 404, (method, path, r.text)
            r = api.patch(f"/v1/messages/{their_mid}", json={"pinned": True}, headers=h)
            assert r.status_code == 404
            hits = api.post("/v1/search", json={"query": "pineapple secret", "top_k": 20}, headers=h).json()["hits"]
            assert hits and {x["session_id"] for x in hits} == {mine}
            assert their_word not in json.dumps(hits)
            r = api.post("/v1/search", json={"query": "pineapple", "session_id": theirs}, headers=h)
            assert r.status_code == 404
            r = api.post(f"/v1/sessions/{theirs}/context", json={"query": "pineapple"}, headers=h)
            assert r.status_code == 404
            r = api.post("/v1/relevant-context", json={"query": "pineapple secret"}, headers=h)
            assert r.status_code == 200, r.text
            found = json.dumps(r.json())
            assert "pineapple" in found and their_word not in found  # its own context, none of theirs
            assert api.get("/v1/whoami", headers=h).json()["tenant"] in ("tenant-a", "tenant-b")
            # writing to their session id lands in a session of the caller's own by that id
            # (ids are per tenant), never in theirs
            r = api.post(f"/v1/sessions/{theirs}/messages", json={"role": "user", "content": "intrude"}, headers=h)
            assert r.status_code == 201 and r.json()["session_id"] == theirs
            r = api.post("/v1/turns", json={"session_id": theirs, "query": "q", "response": "a"}, headers=h)
            assert r.status_code == 201, r.text
            other = "tenant-b" if theirs == "sess-b" else "tenant-a"
            assert "intrude" not in json.dumps([m.content for m in mem.load_session(session_key(other, theirs))])

        # import: the other tenant's export lands in the importer's tenant under the same id
        # (ids are per tenant), and replacing it there never touches the other's session
        export_b = api.get("/v1/sessions/sess-b/export", headers=auth(key_b)).text
        r = api.post("/v1/import", json={"data": export_b, "on_conflict": "replace"}, headers=auth(key_a))
        assert r.status_code == 201, r.text
        assert r.json()["session_ids"] == ["sess-b"]
        assert mem.get_session(session_key("tenant-a", "sess-b")).tenant_id == "tenant-a"
        theirs_b = session_key("tenant-b", "sess-b")
        assert mem.get_session(theirs_b).tenant_id == "tenant-b" and mem.load_session(theirs_b)
        r = api.post("/v1/import", json={"data": export_b, "on_conflict": "new"}, headers=auth(key_a))
        assert r.status_code == 201, r.text
        (copy,) = r.json()["session_ids"]
        assert mem.get_session(session_key("tenant-a", copy)).tenant_id == "tenant-a"

        assert api.delete("/v1/sessions/sess-a", headers=auth(key_a)).json() == {"ok": True}
        assert mem.store.get_session(theirs_b) is not None


def test_keys_cli_and_serve_refuses_public_bind_without_keys(tmp_path: Path) -> None:
    db = str(tmp_path / "keys.db")
    r = run_cli(["--store", db, "serve", "--host", "0.0.0.0", "--port", "0"], tmp_path)
    assert r.returncode == 7 and "without API keys" in r.stderr, r.stderr
    r = run_cli(["--store", db, "keys", "create", "--tenant", "acme", "--name", "bot", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    assert created["key"].startswith("mlk_") and created["tenant_id"] == "acme"
    listed = json.loads(run_cli(["--store", db, "keys", "list", "--json"], tmp_path).stdout)
    assert [k["id"] for k in listed] == [created["id"]] and "key" not in listed[0]

    # keys exist, so even on loopback the server now requires one
    with serve_subprocess(["--store", db, "serve", "--port", "0"], tmp_path) as (url, banner):
        assert any("API keys required" in line for line in banner)
        assert httpx.get(f"{url}/v1/sessions").status_code == 401
        ok = httpx.get(f"{url}/v1/sessions", headers=auth(created["key"]))
        assert ok.status_code == 200 and ok.json() == {"sessions": []}
        # the browsable docs are public like the spec (Swagger UI asks for the key under "Authorize")
        docs = httpx.get(f"{url}/docs")
        assert docs.status_code == 200 and "/static-docs/swagger-ui-bundle.js" in docs.text
        assert httpx.get(f"{url}/static-docs/swagger-ui-bundle.js").status_code == 200

    assert run_cli(["--store", db, "keys", "revoke", created["id"]], tmp_path).returncode == 0
    assert run_cli(["--store", db, "keys", "revoke", created["id"]], tmp_path).returncode == 4
    assert json.loads(run_cli(["--store", db, "keys", "list", "--json"], tmp_path).stdout) == []
    # by name, as the README shows; a name two active keys share must be told apart by id
    for _ in range(2):
        assert run_cli(["--store", db, "keys", "create", "--tenant", "acme", "--name", "twin"], tmp_path).returncode == 0
    twice = run_cli(["--store", db, "keys", "revoke", "twin"], tmp_path)
    assert twice.returncode == 2 and "2 active keys are named 'twin'" in twice.stderr
    assert run_cli(["--store", db, "keys", "create", "--tenant", "acme", "--name", "solo"], tmp_path).returncode == 0
    solo = run_cli(["--store", db, "keys", "revoke", "solo"], tmp_path)
    assert solo.returncode == 0, solo.stderr
    assert sorted(k["name"] for k in json.loads(run_cli(["--store", db, "keys", "list", "--json"], tmp_path).stdout)) \
        == ["twin", "twin"]


def test_serve_without_keys_on_loopback_says_auth_is_off(tmp_path: Path) -> None:
    db = str(tmp_path / "open.db")
    with serve_subprocess(["--store", db, "serve", "--port", "0"], tmp_path) as (url, banner):
        text = "".join(banner)
        assert "auth       OFF" in text and "loopback" in text and url.startswith("http://127.0.0.1:")
        r = httpx.post(f"{url}/v1/sessions/s/messages", json={"role": "user", "content": "hello"})
        assert r.status_code == 201
        assert httpx.get(f"{url}/v1/whoami").json()["auth"] is False


def test_audit_limit_counts_only_the_callers_tenant(mem: Memory) -> None:
    key_a, key_b = new_key(mem, "tenant-a"), new_key(mem, "tenant-b")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
        for key, sid in ((key_a, "audit-a"), (key_b, "audit-b")):
            api.post("/v1/sessions", json={"session_id": sid}, headers=auth(key))
            r = api.post(f"/v1/sessions/{sid}/messages", json={"role": "user", "content": "hi"}, headers=auth(key))
            mid = r.json()["id"]
            if key == key_a:  # one change by tenant A, then newer ones by tenant B
                api.patch(f"/v1/messages/{mid}", json={"pinned": True}, headers=auth(key))
            else:
                for pinned in (True, False, True):
                    api.patch(f"/v1/messages/{mid}", json={"pinned": pinned}, headers=auth(key))
        entries = api.get("/v1/audit", params={"limit": 1}, headers=auth(key_a)).json()["entries"]
        assert [(e["action"], e["session_id"], e["tenant_id"]) for e in entries] == [
            ("pin_message", "audit-a", "tenant-a")
        ]
        assert len(api.get("/v1/audit", params={"limit": 2}, headers=auth(key_b)).json()["entries"]) == 2
