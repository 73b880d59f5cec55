"""Crash safety and multi-process concurrency on one SQLite file (real processes)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlane import Memory

WRITER = Path(__file__).with_name("_writer.py")
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def _acked(path: Path) -> list[tuple[int, str]]:
    out = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[0].isdigit():  # the last line may be cut by the kill
            out.append((int(parts[0]), parts[1]))
    return out


ROUNDS = 25


def _vectors(db: Path) -> int:
    """Vectors in ``db`` now, read beside the writer (0 before the indexer made its table)."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM message_vectors").fetchone()[0])
    except sqlite3.OperationalError:  # no table yet
        return 0
    finally:
        conn.close()


def test_sigkill_never_loses_an_acknowledged_message(tmp_path: Path) -> None:
    # Not marked slow: 25 kills take well under a minute and this is the proof of the
    # write path, so it runs by default.
    db, ack = tmp_path / "crash.db", tmp_path / "acks.txt"
    rng = random.Random(7)
    for round_no in range(ROUNDS):
        # Every third round also runs the background indexer (the fast hashing embedder),
        # so the kill can land while derived vectors are being written beside the log.
        embedder = "hashing" if round_no % 3 == 2 else "none"
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(db), str(ack), "crash", "-", embedder], env=ENV,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # wait until it is writing, then kill it at a random moment
        deadline = time.time() + 30
        start = len(_acked(ack)) if ack.exists() else 0
        while time.time() < deadline and (not ack.exists() or len(_acked(ack)) <= start):
            time.sleep(0.02)
        if embedder != "none":  # and, in an indexer round, until vectors are being written
            before = _vectors(db)
            while time.time() < deadline and _vectors(db) <= before:
                time.sleep(0.02)
        time.sleep(rng.uniform(0.01, 0.4))
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    acked = _acked(ack)
    assert len(acked) > 50, "the writer should have acknowledged many messages"
    with Memory(db, embedder="none") as mem:
        assert mem.store.integrity_check() == "ok"  # type: ignore[attr-defined]
        stored = {m.id: m.content for m in mem.load_session("crash")}
        missing = [(i, c) for i, c in acked if stored.get(i) != c]
        assert missing == []
        assert mem.get_session("crash").message_count == len(stored)
        # the indexer rounds really wrote vectors beside the log
        ((vectors,),) = mem.store.read("SELECT COUNT(*) FROM message_vectors")  # type: ignore[attr-defined]
        assert vectors > 0


@pytest.mark.slow
def test_four_processes_append_to_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    Memory(db, embedder="none").close()  # create the schema once
    procs = []
    for n in range(4):
        session = "shared" if n < 2 else f"own-{n}"
        procs.append(subprocess.Popen(
            [sys.executable, str(WRITER), str(db), str(tmp_path / f"ack{n}.txt"), session, "150"],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "done" in out
    with Memory(db, embedder="none") as mem:
        assert mem.store.count_messages() == 600
        assert mem.get_session("shared").message_count == 300
        for n in (2, 3):
            assert len(mem.load_session(f"own-{n}")) == 150
        ids = [m.id for m in mem.store.iter_messages()]
        assert len(ids) == len(set(ids)) == 600
        acked = [a for n in range(4) for a in _acked(tmp_path / f"ack{n}.txt")]
        assert len(acked) == 600
