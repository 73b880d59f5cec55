"""Cold start: a process that only writes and reads windows loads neither the embedding
model nor the vector data (they load with the first search, or in a server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from memlane import Memory

#: What embedding and vector search bring in; a write-and-window process needs none of it.
MODEL_AND_VECTORS = ("onnxruntime", "onnx", "tokenizers", "simsimd", "memlane.search.matrix",
                     "memlane.search.minilm_w8a8")
#: What judging a language and stemming bring in (the keyword row is written after the
#: message, SQLite migration 18), and the pydantic of the edges: none of it on a write.
LANGUAGE_MODEL = ("numpy", "py3langid", "Stemmer", "snowballstemmer", "pydantic")

SCRIPT = """
import json, sys, threading
from memlane import Memory

mem = Memory(sys.argv[1])  # default settings: the MiniLM embedder, hybrid search
sid = mem.create_session(system_prompt="You are a travel agent.")
for i in range(15):
    mem.add(sid, f"question {i}: what about the train to Sintra?")
    mem.add(sid, f"answer {i}: it leaves Rossio every 20 minutes.", role="assistant")
    window = mem.window(sid, 300)
mem.add_messages(sid, [{"role": "user", "content": "thanks"}, {"role": "assistant", "content": "bye"}])
before_close = sorted(sys.modules)
threads = sorted(t.name for t in threading.enumerate())
mem.close()
print(json.dumps({"modules": before_close, "after_close": sorted(sys.modules), "threads": threads,
                  "window": [m.content for m in window.messages]}))
"""


def _run_script(tmp_path: Path, name: str, text: str, db: Path) -> tuple[Any, str]:
    """Run ``text`` as a fresh process on ``db`` (no config, a private HOME): its JSON and stderr."""
    script = tmp_path / name
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "HOME": str(tmp_path), "MEMLANE_CONFIG": str(tmp_path / "none.yaml")}
    proc = subprocess.run([sys.executable, str(script), str(db)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), proc.stderr


def _run(tmp_path: Path, db: Path) -> dict[str, list[str]]:
    out, stderr = _run_script(tmp_path, "write_and_window.py", SCRIPT, db)
    assert stderr == ""
    return out  # type: ignore[no-any-return]


def test_a_write_and_window_process_loads_no_model_and_no_vectors(tmp_path: Path) -> None:
    db = tmp_path / "cold.db"
    out = _run(tmp_path, db)
    assert out["window"][-1] == "answer 14: it leaves Rossio every 20 minutes."
    for name in MODEL_AND_VECTORS + LANGUAGE_MODEL:
        assert name not in out["modules"], f"{name} was imported by writes and windows"
        assert name not in out["after_close"], f"{name} was imported when memory closed"
    assert not [t for t in out["threads"] if t.startswith(("memlane-indexer", "memlane-embed"))]
    # Nothing is lost: the first search of a later process embeds the backlog.
    with Memory(db) as mem:
        index = mem.parts.recall.index
        assert index.count() == 0 and len(index.missing_ids(100)) == 32
        mem.flush(300)
        assert index.count() == 32
        assert "Rossio" in mem.search("when does the train leave")[0].message.content


ERASE_SCRIPT = """
import json, sys
from memlane import Memory

with Memory(sys.argv[1]) as mem:
    for name in ("keep", "drop"):
        sid = mem.create_session(session_id=name)
        for i in range(10):
            mem.add(sid, f"{name} question {i}: is the ferry to Cacilhas running?")
            mem.add(sid, f"{name} answer {i}: every 15 minutes from Cais do Sodre.", role="assistant")
    deleted = mem.delete_session("drop")
    popped = mem.pop("keep")
    print(json.dumps({"deleted": deleted, "popped": popped.content if popped else None,
                      "started": mem.background_work_started, "modules": sorted(sys.modules)}))
"""


def test_deleting_in_a_write_only_process_loads_no_model(tmp_path: Path) -> None:
    """An erase drains background work only when it runs: a process that writes and
    deletes must not load the embedding model and embed the whole log to delete a row."""
    db = tmp_path / "erase.db"
    out, _ = _run_script(tmp_path, "write_and_erase.py", ERASE_SCRIPT, db)
    assert out["deleted"] is True and out["popped"] == "keep answer 9: every 15 minutes from Cais do Sodre."
    assert out["started"] is False
    for name in MODEL_AND_VECTORS:
        assert name not in out["modules"], f"{name} was imported by an erase"
    # What was erased stays erased once a later process catches up on derived data.
    with Memory(db) as mem:
        mem.flush(300)
        assert mem.parts.recall.index.count() == 19
        hits = mem.search("ferry to Cacilhas", top_k=50)
        assert hits and {h.message.session_id for h in hits} == {"keep"}
        assert all("answer 9" not in h.message.content for h in hits)


def test_bench_cold_reports_figures_ratios_and_targets() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.run([sys.executable, "-m", "memlane.cli.main", "bench", "cold", "--runs", "1", "--json"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["runs"] == 1
    ours, peer = data["memlane"], data["agents_sqlite_session"]
    for key in ("first_save_ms", "process_ms", "sessions_ms", "history_ms", "rss_mb", "peak_rss_mb"):
        assert ours[key] > 0, key
    # openai-agents is a dev dependency, so its SQLiteSession runs beside memlane here
    assert peer is not None and data["agents_version"]
    for key in ("first_save_ms", "process_ms", "history_ms", "rss_mb", "peak_rss_mb"):
        assert peer[key] > 0, key
    for key in ("first_save_ms", "process_ms", "history_ms", "rss_mb"):
        assert data["ratios"][key] == round(peer[key] / ours[key], 2), key
    assert data["targets"] == {"first_save_ms": 150.0, "cli_read_ms": 400.0, "rss_mb": 80.0}
    assert set(data["meets_targets"]) == {"first_save_ms", "sessions_ms", "history_ms", "rss_mb"}
    assert data["meets_targets"]["rss_mb"] == (ours["rss_mb"] <= 80.0)


def test_derived_work_waits_for_a_reader_then_catches_up_on_every_earlier_write(tmp_path: Path) -> None:
    from memlane.context.summaries import SUMMARY_KIND
    from memlane.state.tracker import STATE_KIND

    with Memory(tmp_path / "d.db", embedder="hashing", summarize_every=4, keep_raw_turns=1) as mem:
        sid = mem.create_session()
        for i in range(8):
            mem.add(sid, f"Can we book the kayak tour in Lagos for day {i}?")
            mem.add(sid, f"Yes, the kayak tour in Lagos on day {i} is booked.", role="assistant")
        # Only writes so far: no state, summary or vector was derived, no model was loaded.
        assert not mem.background_work_started
        assert mem.store.get_derived(sid, STATE_KIND) is None
        assert mem.store.get_derived(sid, SUMMARY_KIND) is None
        assert mem.parts.recall.index.count() == 0
        mem.flush(60)  # a reader starts background work: the earlier writes are caught up
        assert mem.background_work_started
        assert mem.store.get_derived(sid, STATE_KIND) is not None
        assert mem.store.get_derived(sid, SUMMARY_KIND) is not None
        assert mem.parts.recall.index.count() == 16
        mem.add(sid, "And a table for dinner afterwards?")  # from now on, as they come
        mem.flush(60)
        assert mem.parts.recall.index.count() == 17
        state = mem.get_state(sid)
        assert state.message_count == 17 and "kayak" in " ".join(state.active_topics).lower()
