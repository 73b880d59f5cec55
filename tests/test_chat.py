"""`memlane chat` driven through stdin in a subprocess, against a small real HTTP server on
127.0.0.1 that speaks the chat-completions protocol (memlane.tiny_model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.tiny_model import TinyModel  # the one stand-in chat model (examples, bench, tests)
from tests.server_support import open_memory, run_cli, running_server


def _food_answer(messages: list[dict[str, Any]]) -> str:
    """Answers like a model that read its context: it quotes what it knows about food."""
    context = " ".join(str(m.get("content")) for m in messages[:-1])
    question = messages[-1]["content"]
    if "vegetarian" in context and "eat" in question:
        return "Since you are vegetarian, try the bean stew."
    return f"You said: {question}"


@pytest.fixture
def model() -> Iterator[TinyModel]:
    with TinyModel(answer=_food_answer) as m:
        yield m


def chat(tmp_path: Path, args: list[str], lines: list[str], env_key: str | None = None) -> str:
    extra = {"OPENAI_API_KEY": env_key} if env_key else None
    r = run_cli(["--store", str(tmp_path / "chat.db"), "chat", "--user", "ana", *args], tmp_path,
                input_text="\n".join(lines) + "\n", extra_env=extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_chat_saves_both_sides_and_sends_the_packet(tmp_path: Path, model: TinyModel) -> None:
    out = chat(tmp_path, ["--base-url", model.url, "--model", "tiny", "--session", "kitchen"], [
        "Hi, I'm Ana and I'm vegetarian.",
        "What should I eat tonight?",
        "/history",
        "/search vegetarian",
        "/context what to cook",
        "/remember my sister lives in Graz",
        "/sessions",
        "/save",
        "/help",
        "/quit",
    ], env_key="sk-test")
    assert "You said: Hi, I'm Ana and I'm vegetarian." in out
    assert "Since you are vegetarian, try the bean stew." in out  # the first turn reached the model
    assert len(model.requests) == 2
    second = model.requests[1]
    assert second["path"] == "/v1/chat/completions" and second["model"] == "tiny"
    assert second["auth"] == "Bearer sk-test"
    assert second["messages"][-1] == {"role": "user", "content": "What should I eat tonight?"}
    assert "vegetarian" in json.dumps(second["messages"][:-1])
    assert "budget:" in out and "/remember" in out and "kitchen" in out and "saved: 4 messages" in out
    assert "noted" in out or "remembered" in out
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        msgs = mem.load_session("kitchen")
        assert [(m.role, m.content) for m in msgs] == [
            ("user", "Hi, I'm Ana and I'm vegetarian."),
            ("assistant", "You said: Hi, I'm Ana and I'm vegetarian."),
            ("user", "What should I eat tonight?"),
            ("assistant", "Since you are vegetarian, try the bean stew."),
        ]
        (first, _) = mem.list_turns("kitchen")
        assert first.model_used == "tiny" and msgs[0].author_name == "ana"


def test_chat_commands_clear_load_forget(tmp_path: Path, model: TinyModel) -> None:
    chat(tmp_path, ["--base-url", model.url, "--session", "old-one"], ["the door is blue", "/quit"])
    out = chat(tmp_path, ["--base-url", model.url], [
        "/load old-o",  # by prefix
        "/clear",
        "/history",
        "/forget",
        "y",
        "/sessions",
        "/quit",
    ])
    assert "loaded old-one" in out and "the door is blue" in out
    assert "cleared: 2 messages hidden" in out and "forgot old-one" in out
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        # /forget is the audited Anchor command: the history is gone, an empty shell stays.
        assert mem.load_session("old-one", include_hidden=True) == []
        (entry,) = mem.parts.notes.store.list_audit(session_id="old-one")
        assert (entry.action, entry.is_anchor, entry.allowed, entry.result) == (
            "forget_conversation", True, True, "ok")


def test_chat_dry_run_shows_the_packet_and_calls_nothing(tmp_path: Path, model: TinyModel) -> None:
    with Memory(tmp_path / "chat.db", embedder="hashing") as mem:
        mem.create_session("Be brief.", session_id="trip", user_id="ana")
        mem.store_interaction("I'm vegetarian", "Noted.", session_id="trip")
    out = chat(tmp_path, ["--dry-run", "--base-url", model.url, "--session", "trip"], ["What do I eat?", "/quit"])
    assert "dry run" in out and "I'm vegetarian" in out and "What do I eat?" in out and "budget:" in out
    assert model.requests == []
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        assert len(mem.load_session("trip")) == 2  # nothing stored


def test_chat_packet_shows_tool_calls_as_calls(tmp_path: Path, model: TinyModel) -> None:
    call = {"id": "call_w1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        mem.add_messages("trip", [
            {"role": "user", "content": "Weather in Lisbon?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "22C and sunny", "tool_call_id": "call_w1", "name": "get_weather"},
        ])
    out = chat(tmp_path, ["--dry-run", "--base-url", model.url, "--session", "trip"], ["And tomorrow?", "/quit"])
    assert '→ calls get_weather(city="Lisbon")  [call_w1]' in out
    assert '"arguments"' not in out  # no raw JSON


def test_chat_without_a_model_says_how_to_configure_one(tmp_path: Path) -> None:
    out = chat(tmp_path, ["--base-url", "http://127.0.0.1:9/v1", "--session", "s"], ["hello?", "/quit"])
    assert "No model answered at http://127.0.0.1:9/v1" in out
    assert "llm_base_url" in out and "ollama" in out.lower() and "--dry-run" in out
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        assert mem.load_session("s") == []


def test_chat_through_a_memlane_server(tmp_path: Path, model: TinyModel) -> None:
    mem = open_memory(tmp_path / "served.db")
    with running_server(mem) as url:
        chat(tmp_path, ["--server", url, "--base-url", model.url, "--session", "remote"], ["hello server", "/quit"])
        assert [m.content for m in mem.load_session("remote")] == ["hello server", "You said: hello server"]
    mem.close()


def test_chat_is_the_anchor_in_the_cli_conversation_and_runs_memory_commands(
    tmp_path: Path, model: TinyModel
) -> None:
    url = ["--base-url", model.url]
    out = chat(tmp_path, url, [
        "Ich trinke am liebsten Kakao am Abend.",
        "merk dir das",
        "what do you remember about Kakao?",
        "/quit",
    ])
    # The order ran as a command; the ordinary message and the question reached the model,
    # the question with the remembered exchange in its context packet.
    assert [r["messages"][-1]["content"] for r in model.requests] == [
        "Ich trinke am liebsten Kakao am Abend.", "what do you remember about Kakao?"]
    assert "Kakao am Abend" in json.dumps(model.requests[1]["messages"][:-1], ensure_ascii=False)
    assert "Ich merke mir" in out
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        # No --session: the CLI's default conversation, the one `memlane say` uses.
        assert mem.settings.cli_session_id == "cli"
        first, reply, _question, _answer = mem.load_session("cli")
        assert first.author_id == "cli-user" and mem.is_anchor(first.author_id) and first.author_name == "ana"
        assert first.pinned and reply.pinned  # "merk dir das" pinned the exchange
        audit = mem.parts.notes.store.list_audit(session_id="cli")
        assert sorted(e.action for e in audit) == ["remember"]
        assert all(e.is_anchor and e.allowed and e.actor_id == "cli-user" for e in audit)

    # Saying "forget this conversation" forgets, with the Anchor check and an audit entry.
    out = chat(tmp_path, url, ["vergiss dieses Gespräch", "/history", "/quit"])
    assert "Erledigt: Ich habe dieses Gespräch vergessen (4 Nachrichten" in out
    assert len(model.requests) == 2
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        assert mem.load_session("cli", include_hidden=True) == []
        assert mem.search("Kakao") == [] and mem.notes("Kakao") == []
        actions = [e.action for e in mem.parts.notes.store.list_audit(session_id="cli")]
        assert "forget_conversation" in actions


def test_chat_answers_a_repeated_question_from_the_response_cache(tmp_path: Path, model: TinyModel) -> None:
    base = ["--base-url", model.url, "--model", "tiny"]
    out = chat(tmp_path, [*base, "--session", "first"], ["How do I list open ports on Linux?", "/quit"])
    assert "You said: How do I list open ports on Linux?" in out and "response cache" not in out
    # A new session, the same question (the CLI tests embed by hashing: no paraphrase
    # match, see tests/test_response_cache.py for those): answered without the model.
    out = chat(tmp_path, [*base, "--session", "second"], ["how do I list open ports on linux", "/quit"])
    assert "You said: How do I list open ports on Linux?" in out
    assert "(from the response cache: exact match" in out
    assert len(model.requests) == 1
    # --no-cache asks the model.
    out = chat(tmp_path, [*base, "--session", "third", "--no-cache"], ["How do I list open ports on Linux?", "/quit"])
    assert "response cache" not in out and len(model.requests) == 2
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        (turn,) = mem.list_turns("second")
        assert turn.metadata.get("response_cache") == "exact"
        stats = mem.stats()["response_cache"]
        assert stats["hits"] == 1 and stats["lookups"] == 2
    shown = run_cli(["--store", str(tmp_path / "chat.db"), "stats"], tmp_path)
    assert "response_cache hits" in shown.stdout and "response_cache hit_rate" in shown.stdout, shown.stdout
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        # Forgetting the first conversation takes its answer with it.
        mem.delete_session("first")
        assert mem.stats()["response_cache"]["entries"] == 0


def test_the_tiny_model_takes_its_delay_like_a_local_model() -> None:
    """memlane bench caches times the response cache against a model that needs time to
    answer: the one tiny model (memlane.tiny_model) waits ``delay`` before each answer."""
    import time

    import httpx

    with TinyModel(lambda messages: "ok", delay=0.3) as slow:
        started = time.monotonic()
        reply = httpx.post(f"{slow.url}/chat/completions", json={"model": "m", "messages": [
            {"role": "user", "content": "hi"}]}, timeout=10).json()
        assert time.monotonic() - started >= 0.3  # a lower bound: sleep never returns early
    assert reply["choices"][0]["message"]["content"] == "ok" and len(slow.requests) == 1
