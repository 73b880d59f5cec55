"""MemoryClient against a real uvicorn server: the same calls give the same results as Memory."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory, Message, SearchHit, Session, Turn
from memlane.client import LOCAL_ONLY, MemoryClient
from memlane.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    SessionNotFoundError,
    StorageError,
)
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from tests.server_support import new_key, open_memory, running_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Memory, str]]:
    mem = open_memory(tmp_path / "server.db")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=False) as url:
        yield mem, url
    mem.close()


def agent_script(mem: Any) -> dict[str, Any]:
    """What an agent does with memory; run once on Memory and once on MemoryClient."""
    sid = mem.create_session(system_prompt="You are helpful.", metadata={"user": "ana"}, user_id="ana",
                             session_id="chat-1", title="Trip")
    first = mem.save_message(sid, {"role": "user", "content": "I'm vegetarian and visit Lisbon in May."})
    mem.add(sid, "Noted: vegetarian tips for Lisbon.", role="assistant")
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    mem.add_messages(sid, [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        Message(role="tool", content="sunny, 24C", tool_call_id="c1", name="weather"),
    ])
    turn_id = mem.store_interaction("wie geht's?", "gut!", session_id=sid,
                                    metadata={"intent": "smalltalk", "model_used": "llama3.2:3b"})
    mem.flush()
    recent = mem.get_recent_messages(sid, max_tokens=4096)
    hits = mem.search("vegetarian Lisbon", top_k=3)
    turns = mem.list_turns(sid)
    ctx = mem.get_conversation_context(sid, limit=5)
    sessions = mem.list_sessions(limit=5, user_id="ana")
    exported = mem.export_session(sid, "jsonl")
    important = mem.mark_important(first.id or 0, importance=0.8)
    cleared = mem.clear_session(sid)
    after_clear = mem.get_recent_messages(sid, max_tokens=4096)
    hidden = mem.load_session(sid, include_hidden=True)
    ended = mem.end_session(sid)
    session = mem.get_session(sid)
    deleted = mem.delete_session(sid)
    deleted_again = mem.delete_session(sid)
    imported = mem.import_sessions(exported, "jsonl")
    return {
        "recent": [(m.role, m.content, m.tool_call_id) for m in recent],
        "recent_types": {type(m) for m in recent},
        "first_hit": hits[0].message.content if hits else None,
        "hit_types": {type(h) for h in hits},
        "turns": [(t.turn_id == turn_id, t.intent, t.user_message.content, t.assistant_message.content) for t in turns],
        "turn_types": {type(t) for t in turns},
        "ctx": [(c["query"], c["response"], c["model_used"]) for c in ctx],
        "sessions": [(s.id, s.title, s.metadata, s.message_count) for s in sessions],
        "session_types": {type(s) for s in sessions},
        "important": (important.importance, important.pinned),
        "cleared": cleared, "after_clear": [(m.role, m.content) for m in after_clear], "hidden": len(hidden),
        "ended": (ended, session.status), "deleted": deleted, "deleted_again": deleted_again,
        "imported": imported, "reimported": [m.content for m in mem.load_session(sid)],
    }


def test_client_mirrors_memory(served: tuple[Memory, str], tmp_path: Path) -> None:
    _, url = served
    with Memory(tmp_path / "local.db", embedder="hashing") as local:
        expected = agent_script(local)
    with MemoryClient(url) as remote:  # the one line an agent changes
        got = agent_script(remote)
    assert got == expected
    assert got["recent_types"] == {Message} and got["hit_types"] == {SearchHit}
    assert got["turn_types"] == {Turn} and got["session_types"] == {Session}
    assert "vegetarian" in got["first_hit"]


def test_client_raises_the_library_errors(served: tuple[Memory, str]) -> None:
    mem, url = served
    with MemoryClient(url) as remote:
        with pytest.raises(SessionNotFoundError) as info:
            remote.get_session("missing")
        assert info.value.session_id == "missing"
        with pytest.raises(InvalidInputError, match="role"):
            remote.save_message("s", {"role": "robot", "content": "x"})
        with pytest.raises(InvalidInputError, match="unknown"):
            remote.save_message("s", {"role": "user", "content": "x", "colour": "red"})
        remote.create_session(session_id="taken")
        with pytest.raises(ConflictError):
            remote.create_session(session_id="taken")
        with pytest.raises(InvalidInputError):
            remote.search("")
        assert remote.health()["status"] == "ok"
        # ids that are not URL-safe still address the right session
        sid = remote.create_session(session_id="!room:matrix.org?x=1#y")
        remote.add(sid, "hi")
        assert [m.content for m in mem.load_session(sid)] == ["hi"]
    with MemoryClient("http://127.0.0.1:9", timeout=2) as dead, pytest.raises(StorageError, match="cannot reach"):
        dead.list_sessions()


def test_client_with_keys_sees_only_its_tenant(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "tenants.db")
    key_a, key_b = new_key(mem, "a"), new_key(mem, "b")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:
        with MemoryClient(url, api_key=key_a) as a, MemoryClient(url, api_key=key_b) as b:
            a.store_interaction("my cat is called Miso", "cute!", session_id="a1")
            b.store_interaction("my dog is called Rex", "nice!", session_id="b1")
            assert [s.id for s in a.list_sessions()] == ["a1"] and [s.id for s in b.list_sessions()] == ["b1"]
            a.create_session(session_id="a2", metadata={"room": "!x:matrix.org"})
            assert [s.id for s in a.list_sessions(metadata={"room": "!x:matrix.org"})] == ["a2"]
            assert {h.message.session_id for h in a.search("called")} == {"a1"}
            assert {h.message.session_id for h in b.search("called")} == {"b1"}
            with pytest.raises(SessionNotFoundError):
                a.load_session("b1")
            assert a.delete_session("b1") is False and b.get_session("b1").tenant_id == "b"
        with MemoryClient(url) as anonymous, pytest.raises(PermissionDeniedError, match="API key"):
            anonymous.list_sessions()
    mem.close()


def test_client_context_state_and_notes(served: tuple[Memory, str]) -> None:
    mem, url = served
    with MemoryClient(url) as remote:
        sid = remote.create_session(system_prompt="You plan trips.", session_id="ctx")
        remote.store_interaction("I'm vegetarian. Lisbon in May?", "Noted!", session_id=sid)
        remote.store_interaction("Book the Sintra train please", "Will do.", session_id=sid)
        packet = remote.context(sid, "what do I eat?", max_tokens=300)
        local = mem.context(sid, "what do I eat?", 300)
        assert packet.to_messages() == local.to_messages()
        assert packet.budget is not None and local.budget is not None
        assert packet.budget.max_tokens == 300 and packet.budget.sections == local.budget.sections
        assert packet.strategy == local.strategy and packet.active_topics == local.active_topics
        assert [m.content for m in packet.recent_turns] == [m.content for m in local.recent_turns]
        assert remote.get_state(sid) == json.loads(json.dumps(mem.get_state(sid).to_dict(), default=str))
        note = remote.add_note("Ana's sister lives in Graz", session_id=sid)
        assert note.id is not None and note.tenant_id == "default"
        assert any("Graz" in n.text for n in remote.notes("Graz", session_id=sid))
        assert [m.content for m in remote.get_relevant_context("vegetarian", 200)] == [
            m.content for m in mem.get_relevant_context("vegetarian", 200)]


def test_every_memory_method_is_mirrored_or_named_local_only() -> None:
    """An agent switching to the server must either find the method or read why it is missing."""
    public = {n for n in dir(Memory) if not n.startswith("_")}
    offered = {n for n in dir(MemoryClient) if not n.startswith("_")}
    missing = public - offered
    assert missing == set(LOCAL_ONLY), (
        f"add a client method or a LOCAL_ONLY reason for {sorted(missing - set(LOCAL_ONLY))}; "
        f"drop stale LOCAL_ONLY entries {sorted(set(LOCAL_ONLY) - missing)}"
    )
    assert all(reason.strip() for reason in LOCAL_ONLY.values())
    for name in public & offered:  # a method where Memory has a method, a property where it has one
        kind = isinstance(inspect.getattr_static(Memory, name), property)
        assert isinstance(inspect.getattr_static(MemoryClient, name), property) == kind, name
        assert kind or callable(getattr(MemoryClient, name)), name


def test_client_facets_match_memory(served: tuple[Memory, str]) -> None:
    mem, url = served
    call = {"id": "c1", "type": "function", "function": {"name": "book_train", "arguments": '{"to": "Sintra"}'}}
    with MemoryClient(url) as remote:
        sid = remote.create_session(session_id="facets")
        remote.add_messages(sid, [
            {"role": "user", "content": "Ana met Lena in Graz on 12 May 2024, see https://example.org/trip"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ])
        mem.flush()
        got = remote.facets(sid)
        assert got == mem.facets(sid) and {f.kind for f in got} == {"entity", "link", "time", "action"}
        assert [f.value for f in remote.facets(sid, "link")] == ["https://example.org/trip"]
        assert [f.kind for f in remote.facets(sid, value="Graz")] == ["entity"]
        with pytest.raises(InvalidInputError, match="session_id"):
            remote.facets()
        with pytest.raises(SessionNotFoundError):
            remote.facets("missing")


def test_memory_commands_over_the_server_check_the_anchor_and_audit(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "server.db", embedder="hashing", anchor_id="@jan:matrix.org", anchor_name="JanHein")
    try:
        with running_server(mem, keys=key_store_for(mem.store), require_auth=False) as url, \
                MemoryClient(url) as client:
            sid = client.create_session(session_id="!room:matrix.org")
            client.add(sid, "My flight is on Friday at 9.", author_id="@jan:matrix.org")
            client.add(sid, "Good luck!", author_id="@maria:matrix.org", author_name="Maria")

            plain = client.handle_command(sid, "What is quantum computing?", "@jan:matrix.org")
            assert not plain.recognized  # not a command: the caller sends it to the model

            refused = client.handle_command(sid, "vergiss dieses Gespräch", "@maria:matrix.org",
                                            author_name="Maria")
            assert refused.recognized and not refused.allowed and not refused.changed
            assert refused.lang == "de" and refused.message
            assert len(mem.get_recent_messages(sid, max_tokens=4096)) == 2  # nothing changed

            done = client.handle_command(sid, "forget this conversation", "@jan:matrix.org")
            assert done.recognized and done.allowed and done.changed and done.is_anchor
            assert done.audit_id is not None
            assert mem.get_recent_messages(sid, max_tokens=4096) == []
            assert not mem.search("flight Friday", session_id=sid)

            with pytest.raises(SessionNotFoundError):
                client.handle_command("no-such-room", "forget this conversation", "@jan:matrix.org")
    finally:
        mem.close()


def test_client_session_lifecycle_matches_memory(served: tuple[Memory, str]) -> None:
    """The lifecycle half of the surface answers over HTTP what Memory answers in process."""
    mem, url = served
    with MemoryClient(url) as remote:
        sid = remote.active_session_for("ana", "Lisbon trip in May")
        assert remote.active_session_for("ana") == sid == mem.active_session_for("ana")
        assert remote.get_active_session("ana").id == sid
        remote.store_interaction("Can you book the train to Sintra?", "Booked task 7 for you.", session_id=sid)
        remote.flush(10)
        resolved = remote.resolve_references("is it done?", sid)
        assert resolved == json.loads(json.dumps(mem.resolve_references("is it done?", sid).to_dict(), default=str))
        assert remote.detect_topic_change("quantum chromodynamics lecture notes", sid) == mem.detect_topic_change(
            "quantum chromodynamics lecture notes", sid)
        down = remote.shutdown(sid)
        assert mem.get_state(sid).status == "shutdown_clean" and down
        packet = remote.hydrate(sid, "train", max_tokens=400)
        assert packet.to_messages() and mem.get_state(sid).status == "resuming"
        assert remote.archive_session(sid, "quiet") is True and mem.get_session(sid).status == "archived"
        assert remote.archive_session(sid) is False
        assert remote.unarchive_session(sid) is True and mem.get_session(sid).status != "archived"
        note = mem.add_note("Ana lives in Porto", session_id=sid, slot="home", user_id="ana")
        newer = mem.add_note("Ana lives in Lisbon", session_id=sid, slot="home", user_id="ana")
        assert [n.text for n in remote.note_history(newer.id or 0)] == [
            n.text for n in mem.note_history(note.id or 0)] == ["Ana lives in Porto", "Ana lives in Lisbon"]
        assert remote.anchor_id == mem.anchor_id and remote.is_anchor(mem.anchor_id)
        assert remote.stats()["sessions"] == mem.stats()["sessions"]
        assert remote.maintain(dry_run=True)["dry_run"] is True
        assert remote.auto_expire_sessions() == []
        assert remote.prune_old_sessions(365) == 0 and mem.get_session(sid)
        assert remote.pending_writes == 0
        with pytest.raises(InvalidInputError, match="session_id"):
            remote.shutdown()


def test_client_lifecycle_respects_tenants(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "tenants.db")
    key_a, key_b = new_key(mem, "a"), new_key(mem, "b")
    with (
        running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url,
        MemoryClient(url, api_key=key_a) as a,
        MemoryClient(url, api_key=key_b) as b,
    ):
            mine = a.active_session_for("ana")
            assert mem.get_session(session_key("a", mine)).tenant_id == "a"
            assert b.active_session_for("ana") != mine  # the same user id in another tenant
            for call in (lambda: b.archive_session(mine), lambda: b.hydrate(mine),
                         lambda: b.resolve_references("it?", mine), lambda: b.shutdown(mine)):
                with pytest.raises(SessionNotFoundError):
                    call()
            note = a.add_note("likes tea", session_id=mine)
            with pytest.raises(NotFoundError):
                b.note_history(note.id or 0)
            for admin in (b.stats, b.auto_expire_sessions, lambda: b.maintain(), lambda: b.prune_old_sessions(1)):
                with pytest.raises(PermissionDeniedError, match="tenant"):
                    admin()
    mem.close()
def test_client_note_history_forget_and_audit(served: tuple[Memory, str]) -> None:
    mem, url = served
    with MemoryClient(url) as remote:
        remote.create_session(session_id="hist", user_id="ana")
        old = remote.add_note("Ana lives in Graz", session_id="hist", user_id="ana", slot="attr:city", value="Graz")
        new = remote.add_note("Ana lives in Wien", session_id="hist", user_id="ana", slot="attr:city", value="Wien")
        versions = remote.note_history(new.id or 0)
        assert [v.text for v in versions] == ["Ana lives in Graz", "Ana lives in Wien"]
        assert versions[0].valid_to is not None and versions[1].current
        assert remote.forget_note(old.id or 0) == 2
        with pytest.raises(NotFoundError):
            remote.note_history(new.id or 0)
        entry = remote.audit_log(session_id="hist")[0]
        assert (entry.action, entry.allowed, entry.detail["note_id"]) == ("forget_note", True, old.id)
        assert mem.audit_log(session_id="hist")[0].id == entry.id
