"""The keyword index is written after the message (SQLite migration 18): a write judges no
language and stems nothing; a read of the keyword index, flush() and background work index
what is pending, and nothing is lost when a writer is killed before any of them ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from memlane import Memory
from memlane.store import SQLiteStore
from memlane.store.sqlite import SEARCH_CATCH_UP

GERMAN = "Die Datenbanken wurden gestern auf den neuen Server migriert."
ENGLISH = "We painted the garden fences green last weekend."


def _fts_rows(store: SQLiteStore) -> int:
    return int(store.read("SELECT count(*) FROM messages_fts_docsize")[0][0])


def test_a_write_leaves_the_keyword_row_to_the_first_read(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session(user_id="u")
        mem.add(sid, GERMAN)
        mem.add(sid, ENGLISH, role="assistant")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        assert mem.backlog()["keywords"] == 2 and _fts_rows(store) == 0
        # the search indexes the two pending rows first, in their own languages
        assert [h.message.content for h in mem.search("Datenbank", top_k=3)] == [GERMAN]
        assert [h.message.content for h in mem.search("painting fence", top_k=3)] == [ENGLISH]
        assert mem.backlog()["keywords"] == 0 and _fts_rows(store) == 2
        assert [lang for _, lang in store.message_languages(sid)] == ["de", "en"]
        store.write(lambda c: c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"))


def test_a_bulk_backlog_is_visible_and_flush_indexes_all_of_it(tmp_path: Path) -> None:
    n = SEARCH_CATCH_UP + 500  # more than a search indexes itself
    with Memory(tmp_path / "bulk.db", embedder="none") as mem:
        sid = mem.create_session(user_id="u")
        mem.add_messages(sid, [{"role": "user", "content": f"kayak trip number {i}"} for i in range(n)])
        assert mem.stats()["backlog_keywords"] == n
        mem.flush()
        assert mem.backlog()["keywords"] == 0
        assert len(mem.search("kayak", top_k=n + 10, min_score=None)) == n


def test_background_work_indexes_what_an_earlier_process_left(tmp_path: Path) -> None:
    db = tmp_path / "later.db"
    with Memory(db, embedder="none") as mem:
        sid = mem.create_session(user_id="u")
        mem.add_messages(sid, [{"role": "user", "content": f"ferry {i} to Cacilhas"} for i in range(3000)])
        assert not mem.background_work_started
    with Memory(db, embedder="none") as mem:
        assert mem.backlog()["keywords"] == 3000
        mem.start_background_work()  # its keyword thread takes the backlog, nothing else asked
        thread = next(t for t in threading.enumerate() if t.name == "memlane-keywords")
        deadline = time.monotonic() + 300
        while mem.backlog()["keywords"] and thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.05)
        assert mem.backlog()["keywords"] == 0


WRITER = """
import sys, time
from memlane import Memory
mem = Memory(sys.argv[1], embedder="none")
sid = mem.create_session(session_id="s", user_id="u")
for i in range(50):
    mem.add(sid, f"question {i}: when does the night train to Porto leave?")
print("written", flush=True)
time.sleep(600)
"""


def test_a_writer_killed_before_indexing_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "HOME": str(tmp_path), "MEMLANE_CONFIG": str(tmp_path / "none.yaml")}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    with Memory(db, embedder="none") as mem:
        assert mem.backlog()["keywords"] == 50
        hits = mem.search("night train Porto", top_k=100, min_score=None)
        assert len(hits) == 50
        assert mem.backlog()["keywords"] == 0
