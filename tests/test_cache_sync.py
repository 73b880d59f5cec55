"""Per-instance caches follow forgets made by another process (issue 22): process A keeps
its caches warm, process B forgets, and A's next read neither returns nor keeps what went;
on one SQLite file and on a real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from tests.pg_fixture import fresh_pg_memory
from tests.server_support import python

TOKEN = "zorblax"
SPEAKER = "quillemont"  # the forgotten conversation's speaker (names are cached apart)
READER = str(Path(__file__).with_name("_cache_reader.py"))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
    else:
        pg = request.getfixturevalue("pg_url")
        with fresh_pg_memory(pg):  # emptied for this test
            pass
        yield pg


def _seed(url: str) -> int:
    """The conversation and note about TOKEN (in "room"), and one that stays (in "other")."""
    with Memory(url, embedder="hashing") as mem:
        mem.create_session(session_id="room", user_id="anna")
        mem.create_session(session_id="other", user_id="anna")
        for i in range(3):
            mem.add("room", f"The secret code word {i} is {TOKEN}.", author_id="q", author_name=SPEAKER.title())
        mem.add("other", "I like hiking in the Alps.")
        note = mem.add_note(f"Anna's code word is {TOKEN}.", user_id="anna", session_id="other")
        mem.flush(60)
        assert note.id is not None
        return note.id


def _ask(reader: subprocess.Popen[str], command: str) -> dict[str, Any]:
    assert reader.stdin is not None and reader.stdout is not None
    reader.stdin.write(command + "\n")
    reader.stdin.flush()
    line = reader.stdout.readline()  # the reader answers each command with one line
    assert line, f"the reader process ended: {reader.stderr.read() if reader.stderr else ''}"
    result: dict[str, Any] = json.loads(line)
    return result


def test_a_forget_in_process_b_is_honoured_by_process_a(url: str) -> None:
    note_id = _seed(url)
    reader = subprocess.Popen([python(), READER, url, TOKEN, SPEAKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        warm = _ask(reader, "warm")
        assert warm["search"] and warm["notes"]
        assert warm["caches"] == {"query_vectors": True, "speakers": True, "note_vectors": True}
        # Process B: forget the conversation and the note.
        forget = (f"from memlane import Memory\nwith Memory({url!r}, embedder='hashing') as m:\n"
                  f"    m.delete_session('room'); m.forget_note({note_id})")
        subprocess.run([python(), "-c", forget], check=True, timeout=120)
        after = _ask(reader, "read")
        assert after["search"] is False and after["notes"] is False
        assert after["cached"] is False  # the answer quoted the forgotten note
        assert after["caches"] == {"query_vectors": False, "speakers": False, "note_vectors": False}
        assert after["sync"]["handled"] >= 2  # session.forgotten and note.removed at least
    finally:
        if reader.stdin is not None:
            reader.stdin.write("quit\n")
            reader.stdin.flush()
        reader.wait(timeout=60)


def test_sync_costs_one_lookup_when_nothing_changed(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.add("s", "hello")
        mem.search("hello")
        assert mem.cache_sync is not None
        before = mem.cache_sync.to_dict()
        assert mem.sync_caches() == 0
        after = mem.cache_sync.to_dict()
        assert after["checks"] == before["checks"] + 1 and after["changed"] == before["changed"]
        mem.forget_messages([m.id for m in mem.load_session("s") if m.id])
        assert mem.sync_caches() == 1  # its own forget comes round too (harmless, idempotent)


def test_bench_caches_runs_the_chat_script_and_times_the_sync() -> None:
    from memlane.bench_caches import WORKLOAD, format_table, run_chat_bench, run_sync_bench

    chat = run_chat_bench(0.0, embedder="hashing")  # hashed words: exact repeats only
    assert chat["no_cache"]["model_calls"] == len(WORKLOAD) and chat["no_cache"]["hits"] == 0
    cached = chat["cache"]
    assert cached["model_calls"] + cached["hits"] == len(WORKLOAD)
    repeats = len(WORKLOAD) - len({q.casefold().rstrip("?") for _, q in WORKLOAD})
    # Exact repeats hit (normalised ones too); one misses: its context gained a paraphrase
    # turn that hashed words cannot tell is the same question.
    assert cached["hits"] >= repeats - 1
    (sync,) = run_sync_bench(20, postgres=False)
    assert sync["backend"] == "sqlite" and sync["events_handled_after_forget"] >= 1
    assert "cache invalidation" in format_table(chat, [sync])
