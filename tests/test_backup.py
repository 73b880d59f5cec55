"""`memlane backup` / `memlane restore`: consistent copies while writers run."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlane import Memory, StorageError
from memlane.errors import InvalidInputError
from memlane.rooms.backup import backup_database, check_database, restore_database

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def _acked(path: Path) -> list[tuple[int, str]]:
    """Lines the writer finished (a last line without newline is still being written)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n"):
            mid, content = line.rstrip("\n").split("\t", 1)
            out.append((int(mid), content))
    return out


def _wait_for(path: Path, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(_acked(path)) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"the writer acknowledged only {len(_acked(path))} of {n} messages")
        time.sleep(0.05)


def test_backup_under_concurrent_writes_restores_every_acknowledged_message(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with Memory(db, embedder="none") as mem:  # schema in place before the writer starts
        mem.add("seed", "before the writer")
    ack = tmp_path / "ack.txt"
    writer = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "_writer.py"), str(db), str(ack), "writer"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    backups: list[tuple[Path, list[tuple[int, str]]]] = []
    try:
        _wait_for(ack, 30)
        for i in range(3):
            acknowledged = _acked(ack)  # everything acknowledged before this backup starts
            dest = tmp_path / f"backup-{i}.db"
            report = backup_database(db, dest)
            assert report.integrity == "ok" and report.messages >= len(acknowledged) + 1
            backups.append((dest, acknowledged))
            _wait_for(ack, len(acknowledged) + 20)  # the writer kept going meanwhile
    finally:
        writer.terminate()
        _, err = writer.communicate(timeout=30)
    assert writer.returncode is not None
    assert b"Traceback" not in err, err.decode(errors="replace")

    for i, (backup, acknowledged) in enumerate(backups):
        assert not Path(str(backup) + "-wal").exists()  # a self-contained file
        restored = tmp_path / f"restored-{i}.db"
        report = restore_database(backup, restored)
        assert report.integrity == "ok"
        conn = sqlite3.connect(restored)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            stored = dict(conn.execute("SELECT id, content FROM messages").fetchall())
            fts = conn.execute(
                "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'writer'"
            ).fetchone()[0]
            # rows the writer had not indexed yet come along pending (SQLite migration 18)
            pending = conn.execute("SELECT COUNT(*) FROM messages WHERE lang IS NULL").fetchone()[0]
        finally:
            conn.close()
        missing = [(mid, c) for mid, c in acknowledged if stored.get(mid) != c]
        assert missing == [], f"backup {i} lost acknowledged messages: {missing[:5]}"
        assert fts + pending >= len(acknowledged)  # the keyword index came along, consistent
        with Memory(restored, embedder="none") as mem:
            assert [m.content for m in mem.load_session("writer")][: len(acknowledged)] == [
                c for _, c in acknowledged
            ]
            mem.flush()  # and the pending ones are indexed from the restored file
            assert len(mem.search("writer", top_k=len(stored) + 10, min_score=None)) == len(stored)


def test_restore_replaces_a_live_database_and_checks_the_backup(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="none", anchor_id="@jan:x") as mem:
        mem.add("room", "I work at CERN.", author_id="@jan:x")
        mem.add_note("The launch is on May 3rd.", kind="important")
        mem.flush()
    backup = tmp_path / "b.db"
    assert backup_database(db, backup).messages == 1
    with pytest.raises(InvalidInputError, match="exists"):
        backup_database(db, backup)
    with Memory(db, embedder="none") as mem:
        mem.add("room", "written after the backup")
        assert mem.store.count_messages() == 2
    # (what was erased after the backup stays erased: tests/test_erase.py)
    report = restore_database(backup, db)
    assert (report.messages, report.integrity) == (1, "ok")
    with Memory(db, embedder="none", anchor_id="@jan:x") as mem:
        assert [m.content for m in mem.load_session("room")] == ["I work at CERN."]
        texts = {n.text for n in mem.notes()}
        assert {"jan works at CERN.", "The launch is on May 3rd."} <= texts
    # A damaged backup is refused before anything is touched.
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(StorageError):
        restore_database(bad, db)
    assert check_database(db).messages == 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlane.cli.main", *args],
        capture_output=True, text=True, env={**ENV, "MEMLANE_EMBEDDER": "none"}, timeout=300,
    )


def test_backup_and_restore_commands(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Memory(db, embedder="none") as mem:
        mem.add("s", "hello backup")
    out = _cli("--store", str(db), "backup", str(tmp_path / "copy.db"))
    assert out.returncode == 0, out.stderr
    assert "1 message(s)" in out.stdout and "integrity ok" in out.stdout
    again = _cli("--store", str(db), "backup", str(tmp_path / "copy.db"))
    assert again.returncode == 2 and "exists" in again.stderr
    target = tmp_path / "fresh.db"
    out = _cli("--store", str(target), "restore", str(tmp_path / "copy.db"), "--yes")
    assert out.returncode == 0, out.stderr
    with Memory(target, embedder="none") as mem:
        assert [m.content for m in mem.load_session("s")] == ["hello backup"]
    mem_only = _cli("--store", "memory://", "backup", str(tmp_path / "x.db"))
    assert mem_only.returncode == 2 and "SQLite file" in mem_only.stderr
