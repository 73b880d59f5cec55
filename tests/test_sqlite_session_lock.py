"""Session locks on SQLite: several OS processes doing read-modify-write of one derived
record through ``session_lock`` lose no update, and a held lock times out cleanly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlane.store.base import LockTimeout
from memlane.store.sqlite import SQLiteStore

_WORKER = r"""
import sys, time
from pathlib import Path
from memlane.store.sqlite import SQLiteStore

path, n, barrier = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
store = SQLiteStore(path)
(barrier.parent / f"ready-{sys.argv[4]}").touch()
while not barrier.exists():
    time.sleep(0.005)
for _ in range(n):
    with store.session_lock("shared", "counter"):
        value = store.get_derived("shared", "counter") or {"n": 0}
        time.sleep(0.001)  # widen the window a blind read-then-write would lose in
        store.put_derived("shared", "counter", {"n": value["n"] + 1})
store.close()
"""


def _store_with_session(path: Path) -> SQLiteStore:
    from memlane.models import Session

    store = SQLiteStore(path)
    store.create_session(Session(id="shared"))
    return store


def _run_behind_barrier(tmp_path: Path, argv_by_name: dict[str, list[str]], timeout: float) -> None:
    """Start one worker per name, release them together once all are ready (so they
    really overlap), and require every one to exit 0. Each worker touches
    ``ready-<name>`` and then waits for the file ``go``."""
    procs = [
        subprocess.Popen([sys.executable, "-c", *argv], stderr=subprocess.PIPE, text=True)
        for argv in argv_by_name.values()
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{n}").exists() for n in argv_by_name):
        assert time.monotonic() < deadline, "workers never got ready"
        assert all(p.poll() is None for p in procs), [p.communicate()[1] for p in procs]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err


def test_processes_sharing_a_file_lose_no_update(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _store_with_session(db).close()
    barrier = tmp_path / "go"
    _run_behind_barrier(
        tmp_path, {n: [_WORKER, str(db), "40", str(barrier), n] for n in ("p1", "p2", "p3")}, timeout=120
    )
    store = SQLiteStore(db)
    try:
        assert store.get_derived("shared", "counter") == {"n": 120}
    finally:
        store.close()


def test_a_lock_held_by_another_process_times_out(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _store_with_session(db).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from memlane.store.sqlite import SQLiteStore\n"
         "s = SQLiteStore(sys.argv[1])\n"
         "with s.session_lock('shared', 'summary'):\n"
         "    print('held', flush=True)\n"
         "    sys.stdin.readline()\n",
         str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = SQLiteStore(db)
        try:
            started = time.monotonic()
            with pytest.raises(LockTimeout, match="another process"), store.session_lock(
                "shared", "summary", timeout=0.2
            ):
                pass
            assert time.monotonic() - started < 5
            # another scope of the same session is free, and nesting in one thread works
            with store.session_lock("shared", "state"), store.session_lock("shared", "state"):
                pass
        finally:
            store.close()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    # released when the holder let go
    store = SQLiteStore(db)
    try:
        with store.session_lock("shared", "summary", timeout=5):
            pass
    finally:
        store.close()


_PERSON_WORKER = r"""
import sys, time
from pathlib import Path
from memlane import Memory

path, name, n, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
with Memory(path, embedder="none", anchor_id="@jan:matrix.org", anchor_name="JanHein", promote_every=1) as mem:
    (barrier.parent / f"ready-{name}").touch()
    while not barrier.exists():
        time.sleep(0.005)
    cities = ["Hamburg", "Berlin", "Munich", "Cologne", "Bremen", "Dresden"]
    for i in range(n):
        mem.add(f"room-{name}", f"I moved to {cities[i % len(cities)]}.", author_id="@jan:matrix.org")
        mem.flush()
"""


def test_one_person_in_two_rooms_from_two_processes_keeps_one_current_note_per_slot(tmp_path: Path) -> None:
    """Notes belong to the person, not the room: two processes promoting two rooms of the
    same Anchor must not both find the slot empty and both write a current note."""
    db = tmp_path / "m.db"
    barrier = tmp_path / "go"
    _run_behind_barrier(
        tmp_path, {n: [_PERSON_WORKER, str(db), n, "12", str(barrier)] for n in ("p1", "p2")}, timeout=180
    )
    store = SQLiteStore(db)
    try:
        rows = store.read(
            "SELECT user_id, slot, count(*) FROM notes WHERE valid_to IS NULL AND slot IS NOT NULL GROUP BY 1, 2"
        )
        assert rows, "no slot notes were promoted"
        assert all(r[2] == 1 for r in rows), f"several current notes in one slot: {rows}"
        history = store.read("SELECT count(*) FROM notes WHERE slot IS NOT NULL")[0][0]
        assert history > 1  # the moves superseded each other
    finally:
        store.close()
