"""The REST API on a real SQLite file: sessions, messages, turns, search, export, errors, metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memlane import Memory
from tests.server_support import client_for


@pytest.fixture
def api(mem: Memory) -> Iterator[TestClient]:
    with client_for(mem) as client:
        yield client


def test_session_lifecycle(api: TestClient, mem: Memory) -> None:
    r = api.post("/v1/sessions", json={
        "session_id": "room-1", "title": "Trip", "user_id": "ana", "system_prompt": "Be brief.",
        "metadata": {"lang": "de"},
    })
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "room-1" and r.json()["metadata"] == {"lang": "de"}
    api.post("/v1/sessions", json={"session_id": "room-2", "user_id": "bob"})
    assert mem.get_session("room-1").title == "Trip"  # really stored

    listed = api.get("/v1/sessions", params={"user_id": "ana"}).json()["sessions"]
    assert [s["id"] for s in listed] == ["room-1"]
    by_meta = api.get("/v1/sessions", params={"metadata": '{"lang": "de"}'}).json()["sessions"]
    assert [s["id"] for s in by_meta] == ["room-1"]
    for bad in ('{"a.b": 1}', '{"x": [1]}', "[1]", "nope", '{"x": "\\ud800"}'):
        r = api.get("/v1/sessions", params={"metadata": bad})
        assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_input", (bad, r.text)
    assert api.post("/v1/sessions", json={"session_id": "room-1"}).status_code == 409

    r = api.patch("/v1/sessions/room-1", json={"title": "Lisbon trip", "status": "paused"})
    assert r.json()["title"] == "Lisbon trip" and r.json()["status"] == "paused"
    assert api.post("/v1/sessions/room-1/end").json() == {"ok": True}
    assert [s["id"] for s in api.get("/v1/sessions", params={"status": "ended"}).json()["sessions"]] == ["room-1"]

    assert api.delete("/v1/sessions/room-1").json() == {"ok": True}
    r = api.get("/v1/sessions/room-1")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "session_not_found" and "room-1" in r.json()["error"]["message"]
    assert api.delete("/v1/sessions/room-1").status_code == 404


def test_messages_turns_and_windows(api: TestClient, mem: Memory) -> None:
    r = api.post("/v1/sessions/s1/messages", json={"role": "user", "content": "hi there", "author_name": "Ana"})
    assert r.status_code == 201 and r.json()["id"] >= 1 and r.json()["token_count"] > 0
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    r = api.post("/v1/sessions/s1/messages/batch", json={"messages": [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "weather"},
    ]})
    assert r.status_code == 201, r.text
    # all or nothing: a tool result without its call is refused and nothing is written
    r = api.post("/v1/sessions/s1/messages/batch", json={"messages": [
        {"role": "user", "content": "one more"},
        {"role": "tool", "content": "x", "tool_call_id": "nope"},
    ]})
    assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_input"
    assert len(mem.load_session("s1")) == 3

    r = api.post("/v1/sessions/s1/turns", json={
        "query": "wie geht's?", "response": "gut!", "metadata": {"intent": "smalltalk", "topic": "x"},
    })
    assert r.status_code == 201
    turns = api.get("/v1/sessions/s1/turns").json()["turns"]
    assert turns[-1]["turn_id"] == r.json()["turn_id"] and turns[-1]["intent"] == "smalltalk"

    msgs = api.get("/v1/sessions/s1/messages").json()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "user", "assistant"]
    assert msgs[1]["tool_calls"][0]["id"] == "call_1"
    window = api.get("/v1/sessions/s1/messages", params={"max_tokens": 12}).json()
    assert 0 < window["tokens"] <= 12 and window["messages"][-1]["content"] == "gut!"

    assert api.delete("/v1/sessions/s1/messages").json() == {"count": 5}
    assert api.get("/v1/sessions/s1/messages").json()["messages"] == []
    assert len(api.get("/v1/sessions/s1/messages", params={"include_hidden": "true"}).json()["messages"]) == 5

    mid = msgs[0]["id"]
    assert api.patch(f"/v1/messages/{mid}", json={"importance": 0.9, "pinned": True}).json()["pinned"] is True
    assert api.get(f"/v1/messages/{mid}").json()["importance"] == 0.9
    assert api.delete(f"/v1/messages/{mid}").json() == {"count": 1}
    assert api.get(f"/v1/messages/{mid}").status_code == 404


def test_store_interaction_uses_the_users_active_session(api: TestClient) -> None:
    first = api.post("/v1/turns", json={"query": "q1", "response": "a1", "user_id": "ana"}).json()
    second = api.post("/v1/turns", json={"query": "q2", "response": "a2", "user_id": "ana"}).json()
    assert first["session_id"] == second["session_id"]
    other = api.post("/v1/turns", json={"query": "q", "response": "a", "user_id": "bob"}).json()
    assert other["session_id"] != first["session_id"]


def test_search_shows_score_parts(api: TestClient, mem: Memory) -> None:
    api.post("/v1/sessions", json={"session_id": "food", "title": "Food talk"})
    api.post("/v1/sessions/food/messages", json={"role": "user", "content": "I am vegetarian and love Lisbon"})
    api.post("/v1/sessions/food/messages", json={"role": "user", "content": "The train to Sintra leaves at nine"})
    mem.flush()
    hits = api.post("/v1/search", json={"query": "vegetarian", "top_k": 3}).json()["hits"]
    assert hits and hits[0]["message"]["content"].startswith("I am vegetarian")
    assert hits[0]["session_title"] == "Food talk" and "keyword" in hits[0]["scores"]
    assert api.post("/v1/search", json={"query": ""}).status_code == 422


def test_untitled_sessions_are_named_after_their_first_user_message(api: TestClient, mem: Memory) -> None:
    api.post("/v1/sessions", json={"session_id": "named", "title": "Food talk"})
    api.post("/v1/sessions/named/messages", json={"role": "user", "content": "vegetarian places please"})
    api.post("/v1/sessions", json={"session_id": "plain"})
    api.post("/v1/sessions/plain/messages", json={"role": "user", "content": "Is   the vegetarian\nplace open " + "x" * 80})
    api.post("/v1/sessions", json={"session_id": "empty"})
    listed = {x["id"]: x["display_title"] for x in api.get("/v1/sessions").json()["sessions"]}
    assert listed["named"] == "Food talk" and listed["empty"] is None
    assert listed["plain"].startswith("Is the vegetarian place open x") and len(listed["plain"]) <= 60
    assert api.get("/v1/sessions/plain").json()["display_title"] == listed["plain"]
    mem.flush()
    hits = api.post("/v1/search", json={"query": "vegetarian", "top_k": 5}).json()["hits"]
    assert {h["session_id"]: h["session_title"] for h in hits} == {"named": "Food talk", "plain": listed["plain"]}


def test_export_import_round_trip(api: TestClient, mem: Memory) -> None:
    api.post("/v1/sessions", json={"session_id": "x", "title": "T"})
    api.post("/v1/sessions/x/turns", json={"query": "hello", "response": "hi"})
    for fmt, media in (("json", "application/json"), ("jsonl", "application/x-ndjson"), ("markdown", "text/markdown")):
        r = api.get("/v1/sessions/x/export", params={"format": fmt})
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
    text = api.get("/v1/sessions/x/export", params={"format": "jsonl"}).text
    r = api.post("/v1/import", json={"data": text, "format": "jsonl"})
    assert r.status_code == 409 and r.json()["error"]["type"] == "conflict"
    api.delete("/v1/sessions/x")
    r = api.post("/v1/import", json={"data": text, "format": "jsonl"})
    assert r.status_code == 201 and r.json()["session_ids"] == ["x"]
    assert [m.content for m in mem.load_session("x")] == ["hello", "hi"]
    assert mem.list_turns("x")[0].user_message.content == "hello"
    assert api.post("/v1/import", json={"data": "not json", "format": "json"}).status_code == 422


def test_error_bodies_are_consistent(mem: Memory) -> None:
    with client_for(mem, max_body_bytes=2048) as api:
        r = api.post("/v1/sessions", content=b'{"title": ', headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error"
        assert "JSON" in r.json()["error"]["message"]

        r = api.post("/v1/sessions/s/messages", json={"role": "user", "content": "x" * 5000})
        assert r.status_code == 413 and r.json()["error"]["type"] == "payload_too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold for streamed bodies too
            yield b'{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        r = api.post("/v1/sessions/s/messages", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert mem.store.get_session("s") is None  # nothing was written

        r = api.post("/v1/sessions/s/messages", json={"role": "robot", "content": "x"})
        assert r.status_code == 422 and "role" in r.json()["error"]["message"]
        r = api.post("/v1/sessions/s/messages", json={"role": "user", "content": "x", "colour": "red"})
        assert r.status_code == 422
        r = api.post("/v1/sessions/s/messages", content='{"role": "user", "content": "\\ud800"}',
                     headers={"content-type": "application/json"})
        assert r.status_code == 422 and "surrogate" in r.text
        r = api.post("/v1/sessions/s/messages", content='{"role": "user", "content": "x", "metadata": {"a": NaN}}',
                     headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        deep = '{"role": "user", "content": "x", "metadata": {"a": ' + "[" * 500 + "]" * 500 + "}}"
        r = api.post("/v1/sessions/s/messages", content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "nested deeper" in r.json()["error"]["message"]
        assert api.get("/v1/sessions/%ED%A0%80").status_code in (404, 422)
        assert api.get("/v1/nope").json()["error"]["type"] == "not_found"
        assert api.put("/v1/sessions").json()["error"]["type"] == "method_not_allowed"
        assert api.get("/v1/messages/99999999999999999999").status_code == 422


def test_every_feature_is_present_and_answers(api: TestClient, mem: Memory) -> None:
    """All optional features exist in this build: whoami says so and none answers 501."""
    features = api.get("/v1/whoami").json()["features"]
    assert features == {"context": True, "state": True, "relevant_context": True, "notes": True, "add_note": True}
    api.post("/v1/sessions/s/turns", json={"query": "I'm vegetarian. Lisbon in May?", "response": "Noted!"})
    assert api.post("/v1/sessions/nope/context", json={"query": "x"}).status_code == 404
    r = api.post("/v1/sessions/s/context", json={"query": "what do I eat?", "max_tokens": 500})
    assert r.status_code == 200, r.text
    packet = r.json()
    assert packet["budget"]["max_tokens"] == 500 and 0 < packet["budget"]["used"] <= 500
    assert any("vegetarian" in str(m.get("content")) for m in packet["messages"])
    r = api.get("/v1/sessions/s/state")
    assert r.status_code == 200 and r.json()["session_id"] == "s" and "vegetarian" in r.json()["active_topics"]
    assert api.get("/v1/sessions/nope/state").status_code == 404
    r = api.post("/v1/relevant-context", json={"query": "vegetarian", "max_tokens": 200})
    assert r.status_code == 200 and any("vegetarian" in m["content"] for m in r.json()["messages"])


def _gauge(text: str, name: str) -> float:
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, f"{name} not exported once in /metrics"
    return values[0]


def test_embedder_queue_depth_metric_drains(api: TestClient, mem: Memory) -> None:
    api.post("/v1/sessions/q/messages/batch", json={
        "messages": [{"role": "user", "content": f"message number {i} about trains"} for i in range(40)]})
    during = _gauge(api.get("/metrics").text, "memlane_embedder_queue_depth")
    assert during >= 0  # background embedding may already be done; it must never go negative
    mem.flush()
    assert _gauge(api.get("/metrics").text, "memlane_embedder_queue_depth") == 0.0
    assert _gauge(api.get("/metrics").text, "memlane_pending_writes") == 0.0


def test_health_metrics_and_inspector(api: TestClient, mem: Memory) -> None:
    assert api.get("/healthz").json()["status"] == "ok"
    api.post("/v1/sessions/m/messages", json={"role": "user", "content": "count me"})
    api.post("/v1/sessions/m/turns", json={"query": "a", "response": "b"})
    text = api.get("/metrics").text
    assert "memlane_messages_stored_total 3.0" in text
    assert 'memlane_http_requests_total{method="POST",route="/v1/sessions/{session_id}/turns",status="201"} 1.0' in text
    assert "memlane_http_request_duration_seconds_bucket" in text and "memlane_embedder_queue_depth" in text
    page = api.get("/")
    assert page.status_code == 200 and "memlane" in page.text
    spec = api.get("/openapi.json").json()
    assert "/v1/sessions/{session_id}/messages" in spec["paths"]


def test_openapi_document_in_repo_matches_the_app(mem: Memory) -> None:
    """docs/openapi.json is regenerated with: python -m memlane.server.openapi > docs/openapi.json"""
    from memlane.server.openapi import spec_text

    committed = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"
    assert committed.exists(), "docs/openapi.json is missing"
    assert json.loads(committed.read_text()) == json.loads(spec_text()), (
        "docs/openapi.json is stale: python -m memlane.server.openapi > docs/openapi.json"
    )


def test_state_and_notes_are_tenant_scoped(mem: Memory) -> None:
    from memlane.server.auth import key_store_for
    from tests.server_support import auth, new_key

    key_a, key_b = new_key(mem, "a"), new_key(mem, "b")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as api:
        assert all(api.get("/v1/whoami", headers=auth(key_a)).json()["features"].values())
        api.post("/v1/sessions/sa/turns", headers=auth(key_a), json={
            "query": "I'm vegetarian, and can you book the Sintra train?", "response": "Sure, I will book it."})
        api.post("/v1/sessions/sb/turns", headers=auth(key_b), json={"query": "I love jazz", "response": "Nice"})
        r = api.get("/v1/sessions/sa/state", headers=auth(key_a))
        assert r.status_code == 200 and "Sintra" in r.json()["active_topics"]
        assert any(loop["kind"] == "promise" for loop in r.json()["loops"])
        assert api.get("/v1/sessions/sa/state", headers=auth(key_b)).status_code == 404
        r = api.post("/v1/notes", headers=auth(key_a), json={"text": "Ana's sister lives in Graz", "session_id": "sa"})
        assert r.status_code == 201, r.text
        assert r.json()["tenant_id"] == "a"
        r = api.post("/v1/notes", headers=auth(key_a), json={"text": "no session given"})
        assert r.status_code == 422 and "session_id" in r.json()["error"]["message"]
        assert api.post("/v1/notes", headers=auth(key_b), json={"text": "x", "session_id": "sa"}).status_code == 404
        texts_a = [n["text"] for n in api.get("/v1/notes", headers=auth(key_a)).json()["notes"]]
        texts_b = [n["text"] for n in api.get("/v1/notes", headers=auth(key_b)).json()["notes"]]
        assert "Ana's sister lives in Graz" in texts_a and "Ana's sister lives in Graz" not in texts_b
        found = api.get("/v1/notes", headers=auth(key_a), params={"query": "Graz", "session_id": "sa"}).json()
        assert any("Graz" in n["text"] for n in found["notes"])
        assert api.get("/v1/notes", headers=auth(key_b), params={"session_id": "sa"}).status_code == 404


def test_backlog_of_background_work_is_in_metrics(api: TestClient, mem: Memory, tmp_path: Path) -> None:
    # Another process writes (it only writes: it leaves the derived work to others).
    with Memory(tmp_path / "memory.db", embedder="hashing") as writer:
        writer.add_messages("w", [{"role": "user", "content": f"Zug nach Sintra, Nachricht {i}"} for i in range(30)])
    assert _gauge(api.get("/metrics").text, "memlane_backlog_vectors") == 30.0
    mem.flush()  # the server's background work catches up
    assert _gauge(api.get("/metrics").text, "memlane_backlog_vectors") == 0.0
    assert _gauge(api.get("/metrics").text, "memlane_backlog_keywords") == 0.0
    assert mem.stats()["backlog_vectors"] == 0 == mem.stats()["backlog_keywords"]
