"""The edges hold: Host/Origin checks, bounded JSON nesting, broken files, one validation layer.

Every input an independent attack used gets a clear error here, from the library and the
REST server alike, and leaves the stored data as it was.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.errors import CorruptDatabaseError, InvalidInputError
from tests.server_support import auth, cli_env, client_for, new_key

DEEP = 50_000


def _mem(tmp_path: Path) -> Memory:
    mem = Memory(tmp_path / "m.db", embedder="none")
    mem.add("s1", "hello there")
    return mem


def _snapshot(mem: Memory) -> list[tuple[str, list[str]]]:
    from memlane.models import SessionFilter

    return [(s.id, [m.content for m in mem.load_session(s.id, include_hidden=True)])
            for s in mem.store.list_sessions(SessionFilter(), limit=100)]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memlane.cli.main", *args], capture_output=True,
                          text=True, env=cli_env(home), timeout=300)


# ------------------------------------------------------------------ DNS rebinding


def test_a_loopback_server_refuses_foreign_host_and_origin_on_every_route(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem, client_for(mem) as api:
        evil = {"Host": "evil.example"}
        for method, path in [("GET", "/v1/sessions"), ("DELETE", "/v1/sessions/s1"), ("GET", "/metrics"),
                             ("GET", "/healthz"), ("GET", "/"), ("POST", "/mcp")]:
            res = api.request(method, path, headers=evil)
            assert res.status_code == 403, (method, path)
            assert "evil.example" in res.json()["error"]["message"]
        res = api.get("/v1/sessions", headers={"Origin": "http://evil.example"})
        assert res.status_code == 403 and "Origin" in res.json()["error"]["message"]
        for ok in ("127.0.0.1:8765", "localhost", "[::1]:9"):
            assert api.get("/v1/sessions", headers={"Host": ok}).status_code == 200, ok
        assert api.get("/v1/sessions", headers={"Origin": "http://localhost:3000"}).status_code == 200
        assert mem.store.get_session("s1") is not None  # the DELETE was never processed


def test_allowed_hosts_are_configurable(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem, client_for(mem, allowed_hosts=["memory.internal"]) as api:
        assert api.get("/v1/sessions", headers={"Host": "memory.internal"}).status_code == 200
        assert api.get("/v1/sessions", headers={"Host": "127.0.0.1"}).status_code == 403
    with Memory(tmp_path / "m.db", embedder="none", allowed_hosts="a.example, b.example") as mem, \
            client_for(mem) as api:
        assert api.get("/v1/sessions", headers={"Host": "b.example"}).status_code == 200
        assert api.get("/v1/sessions", headers={"Host": "c.example"}).status_code == 403


# ------------------------------------------------------------------ /metrics


def test_metrics_need_an_admin_key_when_keys_are_required(tmp_path: Path) -> None:
    from memlane.server.auth import key_store_for

    with _mem(tmp_path) as mem:
        tenant, admin = new_key(mem, "a"), new_key(mem, "admin")
        with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
            assert api.get("/metrics").status_code == 401
            refused = api.get("/metrics", headers=auth(tenant))
            assert refused.status_code == 403 and "admin" in refused.json()["error"]["message"]
            assert api.get("/metrics", headers=auth(admin)).status_code == 200


# ------------------------------------------------------------------ deep JSON


def _deep_list() -> str:
    return "[" * DEEP + "]" * DEEP


def _deep_dict(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_deep_json_is_refused_everywhere_it_enters(tmp_path: Path) -> None:
    with _mem(tmp_path) as mem:
        before = _snapshot(mem)
        with pytest.raises(InvalidInputError, match="nested deeper than 64"):
            mem.import_sessions(_deep_list())
        with pytest.raises(InvalidInputError, match="nested deeper than 64"):
            mem.add("s1", {"role": "user", "content": "x", "metadata": _deep_dict(5_000)})
        with pytest.raises(InvalidInputError, match="nested deeper than 64"):
            mem.create_session(session_id="s2", metadata=_deep_dict(100))
        with client_for(mem) as api:
            res = api.post("/v1/import", content=json.dumps({"data": "x"})[:-1] + ", \"x\": " + _deep_list() + "}",
                           headers={"content-type": "application/json"})
            assert res.status_code == 422 and "nested deeper" in res.json()["error"]["message"]
            res = api.post("/v1/import", json={"data": _deep_list()})
            assert res.status_code == 422 and "nested deeper" in res.json()["error"]["message"]
            res = api.post("/v1/sessions/s1/messages", content=json.dumps(
                {"role": "user", "content": "x"})[:-1] + ', "metadata": ' + json.dumps(_deep_dict(100)) + "}",
                headers={"content-type": "application/json"})
            assert res.status_code == 422
        assert _snapshot(mem) == before


def test_cli_import_of_deep_or_non_utf8_files_says_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _mem(tmp_path).close()
    deep = tmp_path / "deep.json"
    deep.write_text(_deep_list())
    done = _cli(tmp_path, "--store", str(db), "import", str(deep))
    assert done.returncode == 2 and "deep.json" in done.stderr and "nested deeper" in done.stderr
    assert "Traceback" not in done.stderr
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"caf\xe9": 1}'.encode("latin-1"))
    done = _cli(tmp_path, "--store", str(db), "import", str(latin))
    assert done.returncode == 2 and "latin.json is not UTF-8" in done.stderr and "re-export" in done.stderr
    assert "Traceback" not in done.stderr


# ------------------------------------------------------------------ broken files


@pytest.mark.parametrize("damage", ["truncated", "not_sqlite"])
def test_a_broken_database_gets_a_clear_error_and_is_not_touched(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="none") as mem:
        for i in range(300):
            mem.add("s", f"message number {i} " * 20)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3] if damage == "truncated" else b"hello, not a database\n" * 500)
    broken = db.read_bytes()
    with pytest.raises(CorruptDatabaseError, match="memlane restore"), Memory(db, embedder="none") as mem:
        mem.load_session("s")
    done = _cli(tmp_path, "--store", str(db), "history", "s")
    assert done.returncode == 10, done.stderr
    assert str(db) in done.stderr and "memlane restore" in done.stderr and "Traceback" not in done.stderr
    assert db.read_bytes() == broken  # nothing was changed


# ------------------------------------------------------------------ one validation layer

#: (what, library call, REST request, expected: None = accepted, else a fragment of the error)
BAD_INPUTS: list[tuple[str, Any, tuple[str, str, dict[str, Any]], str | None]] = [
    ("NUL in content", lambda m: m.add("s1", "a\x00b"),
     ("POST", "/v1/sessions/s1/messages", {"json": {"role": "user", "content": "a\x00b"}}), "NUL"),
    ("NUL in session id", lambda m: m.create_session(session_id="x\x00y"),
     ("POST", "/v1/sessions", {"json": {"session_id": "x\x00y"}}), "NUL"),
    ("lone surrogate", lambda m: m.add("s1", "a\ud800b"),
     ("POST", "/v1/sessions/s1/messages", {"content": b'{"role":"user","content":"a\\ud800b"}',
                                           "headers": {"content-type": "application/json"}}), "surrogate"),
    ("max_tokens '100'", lambda m: m.window("s1", "100"),
     ("GET", "/v1/sessions/s1/messages?max_tokens=100", {}), None),
    ("max_tokens 1.5", lambda m: m.window("s1", 1.5),
     ("GET", "/v1/sessions/s1/messages?max_tokens=1.5", {}), "whole number"),
    ("max_tokens inf", lambda m: m.window("s1", math.inf),
     ("GET", "/v1/sessions/s1/messages?max_tokens=inf", {}), "whole number"),
    ("max_tokens 0", lambda m: m.window("s1", 0),
     ("GET", "/v1/sessions/s1/messages?max_tokens=0", {}), "between 1"),
    ("max_tokens True", lambda m: m.window("s1", True),
     ("POST", "/v1/sessions/s1/context", {"json": {"max_tokens": True}}), "whole number"),
    ("metadata filter key with a dot", lambda m: m.list_sessions(metadata={"a.b": 1}),
     ("GET", '/v1/sessions?metadata={"a.b": 1}', {}), "plain name"),
    ("metadata filter key with $", lambda m: m.list_sessions(metadata={"$[0]": 1}),
     ("GET", '/v1/sessions?metadata={"$[0]": 1}', {}), "plain name"),
    ("metadata filter value a list", lambda m: m.list_sessions(metadata={"a": [1]}),
     ("GET", '/v1/sessions?metadata={"a": [1]}', {}), "string, number or boolean"),
    ("metadata not an object", lambda m: m.add("s1", {"role": "user", "content": "x", "metadata": [1]}),
     ("POST", "/v1/sessions/s1/messages", {"json": {"role": "user", "content": "x", "metadata": [1]}}),
     "object"),
    ("import not JSON", lambda m: m.import_sessions("{not json"),
     ("POST", "/v1/import", {"json": {"data": "{not json"}}), "not valid JSON"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_library_and_rest_agree_on_each_bad_input(tmp_path: Path, case: Any) -> None:
    _, call, (method, path, kwargs), expected = case
    with _mem(tmp_path) as mem:
        before = _snapshot(mem)
        if expected is None:
            call(mem)
        else:
            with pytest.raises(InvalidInputError, match=expected):
                call(mem)
        with client_for(mem) as api:
            res = api.request(method, path, **kwargs)
            if expected is None:
                assert res.status_code == 200, res.text
            else:
                assert res.status_code == 422, res.text
                assert expected.lower() in res.text.lower()
        assert _snapshot(mem) == before
