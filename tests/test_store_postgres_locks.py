"""Session locks on PostgreSQL: read-modify-write of derived records loses nothing
when several OS processes work on the same session at once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from memlane.models import Session
from memlane.state.tracker import get_state
from memlane.store.base import LockTimeout
from memlane.store.postgres import PostgresStore
from tests.pg_fixture import truncate_all
from tests.rendezvous import WORKER_RENDEZVOUS

pytestmark = pytest.mark.postgres

ANCHOR = "@jan:matrix.org"

_WORKER = WORKER_RENDEZVOUS + r"""
import sys, time
from pathlib import Path
from memlane import Memory
from memlane.store.postgres import PostgresStore

mode, url, name, n, barrier = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
other = "p2" if name == "p1" else "p1"


def wait_for_barrier():
    (barrier.parent / f"ready-{name}").touch()
    wait_for(barrier)
    return time.time()


def meet_after_first(i):
    if i == 0:
        meet(barrier.parent, f"{mode}-wrote", name, other)  # overlapping windows, for sure


if mode == "counter":
    store = PostgresStore(url)
    started = wait_for_barrier()
    for i in range(n):
        with store.session_lock("shared", "counter"):
            value = store.get_derived("shared", "counter") or {"n": 0}
            time.sleep(0.001)  # widen the window a blind read-then-write would lose in
            store.put_derived("shared", "counter", {"n": value["n"] + 1})
        meet_after_first(i)
    store.close()
else:
    with Memory.from_url(url, embedder="none", anchor_id="@jan:matrix.org", anchor_name="JanHein",
                         promote_every=1, summarize_every=2, keep_raw_turns=0) as mem:
        started = wait_for_barrier()
        cities = ["Hamburg", "Berlin", "Munich", "Cologne", "Bremen", "Dresden"]
        for i in range(n):
            mem.add("shared", f"I moved to {cities[i % len(cities)]}.", author_id="@jan:matrix.org")
            mem.add("shared", f"{name} noted move {i}.", role="assistant")
            meet_after_first(i)
        mem.flush()
print(f"ok {started} {time.time()}")
"""


def _run_two(mode: str, url: str, n: int, tmp_path: Path) -> list[tuple[float, float]]:
    barrier = tmp_path / f"go-{mode}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, mode, url, name, str(n), str(barrier)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name in ("p1", "p2")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{name}").exists() for name in ("p1", "p2")):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            pytest.fail("a worker died or never got ready: " + " ".join(p.communicate()[1] for p in procs))
        time.sleep(0.01)
    barrier.touch()
    windows = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        word, started, ended = out.split()
        assert word == "ok"
        windows.append((float(started), float(ended)))
    assert max(w[0] for w in windows) < min(w[1] for w in windows), f"no overlap: {windows}"
    return windows


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url)
    truncate_all(s)
    s.create_session(Session(id="shared"))
    yield s
    s.close()


def test_session_lock_serialises_two_processes(store: PostgresStore, pg_url: str, tmp_path: Path) -> None:
    _run_two("counter", pg_url, 40, tmp_path)
    assert store.get_derived("shared", "counter") == {"n": 80}  # not one increment lost


def test_summary_state_and_notes_of_one_session_from_two_processes(
    store: PostgresStore, pg_url: str, tmp_path: Path
) -> None:
    n = 12
    _run_two("memory", pg_url, n, tmp_path)
    rows = store.read(
        "SELECT tenant_id, user_id, slot, count(*) FROM notes WHERE valid_to IS NULL "
        "AND slot IS NOT NULL GROUP BY 1, 2, 3"
    )
    assert rows, "no slot notes were promoted"
    assert all(r[3] == 1 for r in rows), f"several current notes in one slot: {rows}"
    last_id = max(m.id or 0 for m in store.iter_messages("shared"))
    progress = store.read("SELECT last_message_id FROM promotion_progress WHERE session_id = 'shared'")
    assert progress == [(last_id,)]
    with Memory(pg_url, embedder="none") as mem:
        state = get_state(mem, "shared")
        assert state.message_count == 4 * n and state.last_message_id == last_id
        assert state.turn_count == 2 * n
    summary = store.get_derived("shared", "summary")
    assert summary is not None
    blocks = summary["blocks"]
    assert isinstance(blocks, list) and blocks
    # Each block folded exactly once, in order: no block of one process overwrote the other's.
    assert [b["index"] for b in blocks] == list(range(len(blocks)))
    assert summary["covered_turns"] == sum(b["turns"] for b in blocks)
    firsts = [b["first_message_id"] for b in blocks]
    assert firsts == sorted(set(firsts))


def test_session_lock_is_reentrant_and_times_out(store: PostgresStore, pg_url: str) -> None:
    other = PostgresStore(pg_url)  # another pool: stands in for another process
    try:
        with store.session_lock("shared", "x"), store.session_lock("shared", "x"):
            with pytest.raises(LockTimeout), other.session_lock("shared", "x", timeout=0.2):
                pass
            with other.session_lock("shared", "y", timeout=0.2):  # another scope is free
                pass
            # and a waiter in this process gives up too, without touching the server
            failed: list[BaseException] = []

            def wait() -> None:
                try:
                    with store.session_lock("shared", "x", timeout=0.1):
                        pass
                except LockTimeout as exc:
                    failed.append(exc)

            t = threading.Thread(target=wait)
            t.start()
            t.join(5)
            assert len(failed) == 1
        with other.session_lock("shared", "x", timeout=2):  # released on exit
            pass
    finally:
        other.close()


def test_a_key_with_nul_and_separators_is_a_lock_like_any_other(store: PostgresStore, pg_url: str) -> None:
    other = PostgresStore(pg_url)
    try:
        key = "odd\x00id\x1fx"
        with store.session_lock(key, "notes"), pytest.raises(LockTimeout), other.session_lock(
            key, "notes", timeout=0.2
        ):
            pass
    finally:
        other.close()
