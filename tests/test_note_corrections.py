"""Simultaneous corrections of one note: exactly one wins, the others get NoteSupersededError.

The store closes the old version only while it is still current, in the transaction that
writes the new one (a compare-and-set), so the invariant "one current version per lineage"
holds in every interleaving. The writers here are separate Memory instances (separate
connections) on the same SQLite file or PostgreSQL database, started together by a barrier.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.client import MemoryClient
from memlane.errors import ConflictError, NoteSupersededError
from memlane.notes.store import note_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.server_support import client_for, running_server
from tests.test_cli import run

WRITERS = 4


def _target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "race.db") if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _target(request, tmp_path)


def _current_versions(mem: Memory, note_id: int) -> list[Any]:
    return [n for n in mem.note_history(note_id) if n.current]


def test_simultaneous_corrections_leave_one_current_version(target: str, tmp_path: Path) -> None:
    owner = Memory(target, embedder="none")
    writers = [Memory(target, embedder="none") for _ in range(WRITERS)]
    try:
        sid = f"race-{tmp_path.name}"
        owner.create_session(session_id=sid, user_id="ana")
        note = owner.add_note("Ana is vegetarian", session_id=sid, user_id="ana", slot="diet", value="vegetarian")
        assert note.id is not None
        start = threading.Barrier(WRITERS)
        won: list[int] = []
        lost: list[NoteSupersededError] = []
        other: list[BaseException] = []

        def correct(i: int) -> None:
            start.wait()
            try:
                fixed = writers[i].correct_note(note.id or 0, f"Ana is vegan ({i})", reason=f"writer {i}")
                won.append(fixed.id or 0)
            except NoteSupersededError as exc:
                lost.append(exc)
            except BaseException as exc:  # reported by the assertion below
                other.append(exc)

        threads = [threading.Thread(target=correct, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert other == [] and len(won) == 1 and len(lost) == WRITERS - 1
        assert all(e.note_id == note.id and e.successor == won[0] for e in lost)
        assert "correct the current version" in str(lost[0])
        current = _current_versions(owner, note.id)
        assert [n.id for n in current] == won
        # the losers wrote nothing: the lineage is the original and the one winner
        assert [n.id for n in owner.note_history(note.id)] == [note.id, won[0]]
    finally:
        for m in [owner, *writers]:
            m.close()


@pytest.mark.parametrize("target", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
                         indirect=True)
def test_a_writer_that_read_the_note_before_it_was_replaced_is_refused(target: str, tmp_path: Path) -> None:
    """The losing racer's path, step by step: it saw the note current, another writer replaced
    it, then it writes. The store refuses inside its transaction and leaves nothing behind."""
    mem = Memory(target, embedder="none")
    try:
        sid = f"stale-{tmp_path.name}"
        mem.create_session(session_id=sid, user_id="ana")
        note = mem.add_note("Ana lives in Porto", session_id=sid, user_id="ana", slot="home", value="Porto")
        assert note.id is not None
        repo = note_store_for(mem.store)
        assert repo is not None
        seen = repo.get_note(note.id)
        assert seen is not None and seen.current
        winner = mem.correct_note(note.id, "Ana lives in Lisbon", value="Lisbon")
        late = replace(seen, id=None, text="Ana lives in Faro", value="Faro")
        with pytest.raises(NoteSupersededError) as refused:
            repo.add_note(late, supersede=[note.id], only_current=True)
        assert refused.value.successor == winner.id and isinstance(refused.value, ConflictError)
        assert [n.text for n in mem.note_history(note.id)] == ["Ana lives in Porto", "Ana lives in Lisbon"]
        assert [n.id for n in _current_versions(mem, note.id)] == [winner.id]
    finally:
        mem.close()


def test_conflict_over_rest_and_cli(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    mem = Memory(db, embedder="none")
    TenantView(mem, Caller(None)).create_session(session_id="s1", user_id="ana")
    first = mem.add_note("Ana is vegetarian", session_id="s1", user_id="ana", slot="diet", value="vegetarian")
    newer = mem.correct_note(first.id or 0, "Ana is vegan")
    with client_for(mem) as c:
        r = c.patch(f"/v1/notes/{first.id}", json={"text": "Ana eats fish"})
        assert r.status_code == 409
        err = r.json()["error"]
        assert err["type"] == "note_superseded" and err["note_id"] == first.id and err["superseded_by"] == newer.id
    with running_server(mem) as url, MemoryClient(url) as remote, pytest.raises(NoteSupersededError) as refused:
        remote.correct_note(first.id or 0, "Ana eats fish")
    assert refused.value.note_id == first.id and refused.value.successor == newer.id
    mem.close()
    out = run("--store", str(db), "notes", "correct", str(first.id), "Ana eats fish")
    assert out.returncode == 5, out.stderr
    assert f"note {first.id} was already superseded by note {newer.id}: correct the current version" in out.stderr
