"""Bulk import: a kill midway leaves whole sessions only, and the rest imports after it;
the derived work it leaves is counted and caught up (real processes, a real file)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from memlane import Memory
from memlane.bench_import import _export_file

# The fast hashing embedder: the test is about the log, not the model.
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "MEMLANE_EMBEDDER": "hashing"}
SESSIONS, PER_SESSION = 60, 200


def _import(db: Path, export: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "memlane.cli.main", "import", str(export), "--store", f"sqlite:///{db}", *extra],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _sessions_written(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    except sqlite3.Error:  # not created yet, or its schema not yet
        return 0


def test_a_kill_during_import_leaves_whole_sessions_and_the_rest_imports(tmp_path: Path) -> None:
    db, export = tmp_path / "m.db", tmp_path / "export.jsonl"
    _export_file(export, SESSIONS * PER_SESSION, PER_SESSION)
    proc = _import(db, export)
    deadline = time.monotonic() + 120
    while _sessions_written(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the import ended before it could be killed: make the export larger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Memory(db, embedder="none") as mem:
        assert mem.store.integrity_check() == "ok"  # type: ignore[attr-defined]
        written = mem.list_sessions(limit=1000)
        assert 0 < len(written) < SESSIONS
        for session in written:  # each session whole: its count and its rows agree
            assert session.message_count == PER_SESSION == len(mem.load_session(session.id))
    again = _import(db, export, "--on-conflict", "skip")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err.decode()
    assert f"imported {SESSIONS - len(written)} session(s)" in out.decode()
    with Memory(db, embedder="hashing") as mem:
        contents = [m.content for s in range(SESSIONS) for m in mem.load_session(f"s{s}")]
        expected = [json.loads(line)["content"] for line in export.read_text().splitlines()
                    if json.loads(line)["type"] == "message"]
        assert contents == expected  # nothing lost, nothing twice, in order
        n = SESSIONS * PER_SESSION
        assert mem.backlog() == {"keywords": n, "vectors": n}  # left to background work
        mem.flush()
        assert mem.backlog() == {"keywords": 0, "vectors": 0}
        assert mem.search("Sintra Lisbon", top_k=3)
