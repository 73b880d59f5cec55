"""Seed 000/001 (harombe): conversation memory, semantic search and RAG, as harombe runs it.

Written from the seed's own text: its config blocks, the MemoryManager calls, the RAG
flow ("What did we discuss about Python last week?") and its error-handling list. The
config snippets are copied here as literals (tests never read the seed documents).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from memlane import Memory
from memlane.config import load_settings
from memlane.errors import ConfigError
from memlane.models import utcnow
from memlane.tiny_model import TinyModel  # the one stand-in chat model (examples, bench, tests)
from tests.server_support import run_cli

SEED_000_CONFIG = """\
memory:
  enabled: true # Enable conversation memory
  storage_path: {db} # SQLite database location
  max_history_tokens: 4096 # Token limit for context
  auto_prune_days: 30 # Auto-delete old sessions
  strategy: simple # simple, summarization, hybrid
"""

SEED_001_CONFIG = """\
memory:
  enabled: true
  storage_path: {db}
  max_history_tokens: 4096

  # Vector store configuration
  vector_store:
    enabled: true
    backend: chromadb # Only chromadb supported now
    embedding_model: sentence-transformers/all-MiniLM-L6-v2 # Model to use
    embedding_provider: sentence-transformers # Local embeddings
    persist_directory: ~/.harombe/vectors # Storage directory (null = in-memory)
    collection_name: harombe_embeddings # Collection name

  # RAG configuration
  rag:
    enabled: true
    top_k: 5 # Number of similar messages to retrieve
    min_similarity: 0.7 # Similarity threshold (0.0-1.0)
"""


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "harombe.yaml"
    path.write_text(text.format(db=tmp_path / "memory.db"))
    return path


def test_both_seed_configs_start_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s0 = load_settings(_config(tmp_path, SEED_000_CONFIG), env={})
    assert (s0.strategy, s0.auto_prune_days, s0.max_history_tokens) == ("simple", 30, 4096)
    with caplog.at_level(logging.WARNING, logger="memlane.config"):
        s1 = load_settings(_config(tmp_path, SEED_001_CONFIG), env={})
    # Mapped: the same MiniLM model (bundled), the RAG switch, top_k and the floor.
    assert s1.embedder == "minilm"
    assert (s1.rag_enabled, s1.rag_top_k, s1.rag_min_score) == (True, 5, 0.7)
    # Accepted but not needed: warned about by name, with what memlane does instead.
    warned = caplog.text
    for key in ("vector_store.backend", "vector_store.persist_directory", "vector_store.collection_name"):
        assert key in warned
    assert "memory database" in warned


def test_keys_no_seed_uses_are_still_errors(tmp_path: Path) -> None:
    typo = SEED_001_CONFIG.replace("    top_k: 5", "    top_kk: 5")
    with pytest.raises(ConfigError, match="top_kk"):
        load_settings(_config(tmp_path, typo), env={})
    with pytest.raises(ConfigError, match="colour"):
        load_settings(_config(tmp_path, SEED_000_CONFIG + "  colour: red\n"), env={})


def test_vector_store_disabled_means_keyword_search(tmp_path: Path) -> None:
    off = SEED_001_CONFIG.replace("    enabled: true\n    backend", "    enabled: false\n    backend")
    assert load_settings(_config(tmp_path, off), env={}).embedder == "none"


def test_memory_manager_calls(tmp_path: Path) -> None:
    """The MemoryManager API of seed 000, call for call."""
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session("You are harombe.", {"user": "ana", "tags": ["dev"]})
        mem.save_message(sid, {"role": "user", "content": "hello"})
        mem.save_message(sid, {"role": "assistant", "content": "hi, how can I help?"})
        assert [m.content for m in mem.load_session(sid)] == ["hello", "hi, how can I help?"]
        recent = mem.get_recent_messages(sid, max_tokens=4096)
        assert recent[0].role == "system" and recent[-1].content == "hi, how can I help?"
        assert [s.id for s in mem.list_sessions(limit=10)] == [sid]
        old = mem.create_session("old")
        mem.update_session(old, last_active_at=utcnow() - timedelta(days=45))
        assert mem.prune_old_sessions(days=30) == 1
        mem.delete_session(sid)
        assert mem.list_sessions() == []


def test_session_not_found_is_created_automatically(tmp_path: Path) -> None:
    # Error handling: "Session not found: Create new session automatically"
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        mem.save_message("from-yesterday", {"role": "user", "content": "still there?"})
        assert mem.load_session("from-yesterday")[0].content == "still there?"


def test_auto_prune_days_works_without_a_scheduler(tmp_path: Path) -> None:
    cfg = _config(tmp_path, SEED_000_CONFIG)
    with Memory(settings=load_settings(cfg, env={}), embedder="none") as mem:
        stale = mem.create_session("stale")
        fresh = mem.create_session("fresh")
        mem.update_session(stale, last_active_at=utcnow() - timedelta(days=31))
    # Opening memory again applies auto_prune_days: 30.
    with Memory(settings=load_settings(cfg, env={}), embedder="none") as mem:
        assert [s.id for s in mem.list_sessions()] == [fresh]


def _conversations(mem: Memory) -> None:
    py = mem.create_session("You are harombe.")
    mem.store_interaction(
        "Can you explain Python decorators? We use them for retries.",
        "A decorator wraps a function; we agreed on a retry decorator with exponential backoff.",
        session_id=py,
    )
    fmt = mem.create_session("You are harombe.")
    mem.store_interaction("What format should the report export use?",
                          "We decided on JSON lines, with CSV on request.", session_id=fmt)
    cat = mem.create_session("You are harombe.")
    mem.store_interaction("My cat is called Miso.", "Nice name!", session_id=cat)
    mem.flush()


def test_relevant_context_respects_min_similarity_and_never_pads(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as mem:
        _conversations(mem)
        hits = mem.search("What did we discuss about Python last week?", min_score=0.7)
        assert hits and all(0.0 <= h.score <= 1.0 for h in hits)
        assert "Python decorators" in hits[0].message.content
        assert not any("Miso" in h.message.content for h in hits)
        context = mem.get_relevant_context("What did we discuss about Python last week?", max_tokens=2048)
        text = "\n".join(m.content for m in context)
        assert "Python decorators" in text and "Miso" not in text and "JSON lines" not in text
        # Nothing stored is about the weather: nothing comes back, however large the budget.
        assert mem.get_relevant_context("what's the weather in Tokyo tomorrow?", max_tokens=4096) == []


def test_chat_answers_from_recalled_context(tmp_path: Path) -> None:
    """The seed's headline RAG flow, through `memlane chat` and a model on 127.0.0.1."""
    cfg = _config(tmp_path, SEED_001_CONFIG)
    with TinyModel() as model:
        args = ["--config", str(cfg), "chat", "--base-url", model.url, "--model", "tiny"]
        first = run_cli([*args, "--session", "monday"], tmp_path, input_text=(
            "Let's use a retry decorator with exponential backoff in the Python API client.\n"
            "And the report export format will be JSON lines.\n/quit\n"))
        assert first.returncode == 0, first.stderr
        later = run_cli([*args, "--session", "friday"], tmp_path,
                        input_text="What did we discuss about Python last week?\n/quit\n")
        assert later.returncode == 0, later.stderr
    asked = model.requests[-1]["messages"]
    assert asked[-1]["content"] == "What did we discuss about Python last week?"
    sent = "\n".join(str(m["content"]) for m in asked[:-1])
    assert "retry decorator" in sent  # recalled from Monday's session, above the 0.7 floor
    assert "From what I know:" in later.stdout and "retry decorator" in later.stdout


def test_only_orders_are_memory_commands_in_english_and_german() -> None:
    from memlane.rooms.commands import parse_command

    for question in ("What did we discuss about Python last week?", "what did we decide about the format?",
                     "was weißt du über Kaffee?", "Erinnerst du dich an Hamburg?"):
        found = parse_command(question)
        assert found is None or found.question, question  # goes to the model, with the packet
    for order, action in (("remember this: the export is JSON lines", "remember"),
                          ("merk dir das: der Türcode ist 4711", "remember"),
                          ("search your memory for decorators", "recall"),
                          ("durchsuche dein Gedächtnis nach Kaffee", "recall"),
                          ("forget this conversation", "forget_conversation"),
                          ("vergiss dieses Gespräch", "forget_conversation")):
        found = parse_command(order)
        assert found is not None and found.action == action and not found.question, order


def test_token_limit_exceeded_falls_back_to_the_most_recent_messages(tmp_path: Path) -> None:
    # Error handling: "Token limit exceeded: Fall back to most recent messages only"
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session("You are harombe.")
        for i in range(40):
            mem.save_message(sid, {"role": "user" if i % 2 == 0 else "assistant",
                                   "content": f"message {i} " + "about the build pipeline " * 10})
        recent = mem.get_recent_messages(sid, max_tokens=200)
        kept = [m.content.split()[1] for m in recent if m.role != "system"]
        assert kept and kept[-1] == "39"  # the newest, in order, as many as fit
        assert [int(k) for k in kept] == list(range(40 - len(kept), 40))
        assert mem.counter.count_messages(recent) <= 200
