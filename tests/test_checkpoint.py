"""Checkpoints (PRD §7), startup hydration (§5) and clean shutdown (§6).

Real SQLite files and real checkpoint files under tmp_path. Damaged, stale and
missing checkpoints are made the way they happen: a torn or edited file, a
process that wrote to the log without the checkpointer, a deleted folder.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from memlane import Memory
from memlane.context.summaries import SummaryManager
from memlane.state.checkpoint import (
    CheckpointError,
    CheckpointManager,
    ConversationCheckpointSnapshot,
    atomic_write,
)
from memlane.state.tracker import rebuild_state
from tests.context_scripts import DE, EN, tool_groups_intact, write_script


def _checkpoints(mem: Memory) -> CheckpointManager:
    manager = mem.parts.checkpoints
    assert isinstance(manager, CheckpointManager)
    return manager


def _path(mem: Memory, sid: str) -> Path:
    path = _checkpoints(mem).path_for(sid)
    assert path is not None
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def _session(db: Path, script: list, sid: str = "ops") -> None:  # type: ignore[type-arg]
    with Memory(db, embedder="hashing") as mem:
        mem.create_session(system_prompt="You are an admin assistant.", session_id=sid, user_id="ops")
        write_script(mem, sid, script)
        mem.flush()


def test_written_after_every_turn_beside_the_db(db: Path) -> None:
    with Memory(db, embedder="hashing") as mem:
        sid = mem.create_session(session_id="room:!abc/def", user_id="ops")
        path = _path(mem, sid)
        assert path.parent == db.parent / "memory.checkpoints"
        assert path.name.startswith("room__abc_def-")  # a safe file name for any session id
        for i, turn in enumerate(EN[:12], start=1):
            write_script(mem, sid, [turn])
            mem.flush()
            snap = _checkpoints(mem).read(sid)
            assert snap is not None and snap.turn_count == i
            assert snap.last_message_id == mem.store.recent_messages(sid, 1)[0].id
        assert not list(path.parent.glob("*.tmp"))
        raw = json.loads(path.read_text())
        assert raw["format"] == "memlane.checkpoint" and len(raw["checksum"]) == 64
        snap = ConversationCheckpointSnapshot.from_json(raw)
        # State + last K (= keep_raw_turns = 3) turns + summary with its newest delta.
        assert len(snap.recent_turns) == 3
        assert snap.recent_turns[-1][-1]["content"] == EN[11][2]
        assert [m.content for m in snap.messages()][-1] == EN[11][2]
        assert snap.state["active_job_refs"] == ["job-4712"]
        assert snap.state["turn_count"] == 12
        assert snap.summary == {} or snap.summary["covered_turns"] in (0, 10)
        write_script(mem, sid, EN[12:])
        mem.flush()
        snap = _checkpoints(mem).read(sid)
        assert snap is not None and snap.summary["covered_turns"] == 10
        assert snap.summary["delta"]["first_turn"] == 0 and snap.summary["delta"]["text"]
        assert snap.reason == "turn"


def test_a_turn_checkpoint_is_written_once(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """checkpoint_per_turn: sync writes a turn's checkpoint before store_interaction returns;
    the summary thread then builds the same snapshot and must not write (fsync) it again."""
    import memlane.state.checkpoint as checkpoint

    written: list[Path] = []
    real_write = checkpoint.atomic_write

    def counting(path: Path, data: bytes) -> None:
        written.append(path)
        real_write(path, data)

    monkeypatch.setattr(checkpoint, "atomic_write", counting)
    with Memory(db, embedder="hashing", checkpoint_per_turn="sync") as mem:
        sid = mem.create_session(session_id="ops", user_id="ops")
        mem.start_background_work()  # an agent that reads context: the summary thread runs too
        for i in range(4):
            mem.store_interaction(f"How do I restart nginx on web-{i}?",
                                  f"Run systemctl restart nginx on web-{i}.", session_id=sid)
            assert len(written) == i + 1  # on disk before the call returned
            mem.flush()
            assert len(written) == i + 1  # nothing changed: not written again
        path = _path(mem, sid)
        path.unlink()  # removed behind the manager's back: the next turn's is written again
        mem.store_interaction("And on web-9?", "The same command.", session_id=sid)
        mem.flush()
        assert path.exists() and len(written) == 5
        snap = _checkpoints(mem).read(sid)
        assert snap is not None and snap.turn_count == 5
        assert snap.last_message_id == mem.store.recent_messages(sid, 1)[0].id


def test_hydrate_fresh_marks_resuming_and_next_turn_reactivates(db: Path) -> None:
    _session(db, EN)
    with Memory(db, embedder="hashing") as mem:
        packet = mem.hydrate("ops", max_tokens=1500)
        assert packet.meta["hydration"]["checkpoint"] == "fresh"
        assert packet.session_status == "resuming"
        assert mem.get_session("ops").status == "resuming"
        assert mem.get_state("ops").status == "resuming"
        # §5.3-5.5: the last raw turns, the rolling summary and the job refs are there.
        assert packet.recent_turns[-1].content == EN[-1][2]
        assert packet.rolling_session_summary and packet.summary_covered_turns == 10
        assert packet.active_job_refs == ["job-4712"]
        assert "Session status: resuming" in packet.to_messages()[0]["content"]
        snap = _checkpoints(mem).read("ops")
        assert snap is not None and snap.reason == "hydrate" and snap.status == "resuming"
        # The conversation goes on: the session is active again.
        mem.store_interaction("Is job-4712 done?", "Yes, it finished.", session_id="ops")
        mem.flush()
        assert mem.get_session("ops").status == "active"
        assert mem.get_state("ops").status == "active"


def test_shutdown_then_hydrate(db: Path) -> None:
    _session(db, DE)
    with Memory(db, embedder="hashing") as mem:
        summaries: SummaryManager = mem.parts.summaries
        before = summaries.load("ops")
        assert before is None  # 12 turns: no full block is due yet (10 + 3 raw)
        promoted: list[str] = []
        mem.parts.promote = promoted.append
        written = mem.shutdown("ops")
        assert list(written) == ["ops"] and written["ops"] == str(_path(mem, "ops"))
        # §6.2: the final delta folds every turn but the 3 raw ones, even a partial block.
        after = summaries.load("ops")
        assert after is not None and after.covered_turns == len(DE) - 3 == 9
        assert promoted == ["ops"]  # §6.5 gated long-term candidates, via the notes component
        assert mem.get_session("ops").status == "shutdown_clean"
        assert mem.get_state("ops").status == "shutdown_clean"
        snap = _checkpoints(mem).read("ops")
        assert snap is not None and snap.reason == "shutdown" and snap.status == "shutdown_clean"
        assert snap.state["status"] == "shutdown_clean"
        assert snap.summary["covered_turns"] == 9
    with Memory(db, embedder="hashing") as mem:
        packet = mem.hydrate("ops")
        assert packet.meta["hydration"]["checkpoint"] == "fresh"
        assert packet.session_status == "resuming"
        assert packet.summary_covered_turns == 9
        # New turns continue the blocks where the shutdown left them.
        write_script(mem, "ops", EN[:11])
        mem.flush()
        rec = mem.parts.summaries.load("ops")
        assert [b.first_turn for b in rec.blocks] == [0, 9] and rec.covered_turns == 19


def test_shutdown_all_sessions_and_close(db: Path) -> None:
    with Memory(db, embedder="hashing") as mem:
        for sid in ("a", "b"):
            mem.create_session(session_id=sid)
            write_script(mem, sid, EN[:4])
        written = mem.shutdown(close=True)
        assert sorted(written) == ["a", "b"]
        assert mem._closed
    with Memory(db, embedder="hashing") as mem:
        assert {s.status for s in mem.list_sessions()} == {"shutdown_clean"}


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "edited", "other_version", "other_session", "empty"],
)
def test_corrupt_checkpoint_is_rebuilt_with_a_warning(
    db: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    _session(db, EN)
    with Memory(db, embedder="hashing") as mem:
        path = _path(mem, "ops")
        text = path.read_text()
        if damage == "garbage":
            path.write_bytes(os.urandom(300))
        elif damage == "truncated":  # a torn write on a filesystem without atomic rename
            path.write_text(text[: len(text) // 2])
        elif damage == "edited":
            path.write_text(text.replace('"turn_count":14', '"turn_count":99'))
        elif damage == "other_version":
            raw = json.loads(text)
            raw["version"] = 999
            path.write_text(json.dumps(raw))
        elif damage == "other_session":
            other = _checkpoints(mem).snapshot("ops", "turn")
            other.session_id = "someone-else"
            path.write_text(json.dumps(other.to_json()))
        else:
            path.write_text("")
        with pytest.raises(CheckpointError):
            _checkpoints(mem).read("ops")
        truth = rebuild_state(mem, "ops")
        with caplog.at_level(logging.WARNING, logger="memlane.state.checkpoint"):
            packet = mem.hydrate("ops", max_tokens=1500)
        assert packet.meta["hydration"]["checkpoint"] == "corrupt"
        assert any("rebuilding" in r.getMessage() for r in caplog.records)
        assert packet.turn_count == truth.turn_count == 14
        assert packet.active_job_refs == truth.active_job_refs
        assert packet.open_loops == truth.open_loops
        assert packet.summary_covered_turns == 10
        assert tool_groups_intact(packet.to_messages())
        snap = _checkpoints(mem).read("ops")  # a good one was written again
        assert snap is not None and snap.reason == "rebuild" and snap.turn_count == 14


def test_stale_and_missing_checkpoints(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    _session(db, EN[:5])
    # Another process wrote to the log without the checkpointer (the store directly).
    with Memory(db, embedder="hashing") as mem:
        mem.parts.checkpoints.directory = None  # this process keeps no checkpoints
        write_script(mem, "ops", EN[5:])
        mem.flush()
    with Memory(db, embedder="hashing") as mem:
        verdict, snap = _checkpoints(mem).check("ops")
        assert verdict == "stale" and snap is not None and snap.turn_count == 5
        with caplog.at_level(logging.WARNING):
            packet = mem.hydrate("ops")
        assert packet.meta["hydration"]["checkpoint"] == "stale"
        assert "checkpoint of session ops is stale" in caplog.text
        assert packet.turn_count == 14 and packet.summary_covered_turns == 10
        assert _checkpoints(mem).check("ops")[0] == "fresh"
        _path(mem, "ops").unlink()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            packet = mem.hydrate("ops")
        assert packet.meta["hydration"]["checkpoint"] == "missing"
        assert "is missing" in caplog.text and packet.turn_count == 14


def test_fresh_checkpoint_restores_lost_derived_summary(db: Path) -> None:
    _session(db, EN)
    with Memory(db, embedder="hashing") as mem:
        text = mem.parts.summaries.load("ops").text
        mem.store.delete_derived("ops", "summary")  # derived work lost in a crash
        packet = mem.hydrate("ops")
        assert packet.meta["hydration"] == {**packet.meta["hydration"], "checkpoint": "fresh"}
        assert "summary" in packet.meta["hydration"]["restored"]
        assert packet.rolling_session_summary == text


def test_checkpoint_dir_setting_and_in_memory_store(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    with Memory(tmp_path / "m.db", embedder="hashing", checkpoint_dir=str(target)) as mem:
        mem.create_session(session_id="s")
        write_script(mem, "s", EN[:2])
        mem.flush()
        assert len(list(target.glob("s-*.json"))) == 1
    with Memory.in_memory(embedder="hashing") as mem:
        assert _checkpoints(mem).directory is None
        mem.create_session(session_id="s")
        write_script(mem, "s", EN[:2])
        packet = mem.hydrate("s")
        assert packet.meta["hydration"]["checkpoint"] == "disabled"
        assert packet.session_status == "resuming" and packet.turn_count == 2


def test_forget_removes_the_checkpoint_text(db: Path) -> None:
    _session(db, EN)
    with Memory(db, embedder="hashing") as mem:
        path = _path(mem, "ops")
        assert "zstd" in path.read_text()
        victims = [m.id for m in mem.load_session("ops") if "zstd" in m.content and m.id]
        mem.forget_messages(victims)
        mem.flush()
        assert not path.exists() or "zstd" not in path.read_text()
        mem.delete_session("ops")
        assert not path.exists()


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cp" / "x.json"
    atomic_write(path, b'{"old": true}')

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, b'{"new": true}')
    assert path.read_bytes() == b'{"old": true}'
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind


def test_deleted_session_leaves_no_checkpoint_behind(db: Path) -> None:
    """Work queued before a delete must not write the deleted conversation back to disk."""
    with Memory(db, embedder="hashing") as mem:
        directory = _checkpoints(mem).directory
        assert directory is not None
        for i in range(6):
            sid = mem.create_session(session_id=f"d{i}")
            write_script(mem, sid, EN[:3])  # queues background work
            mem.delete_session(sid)  # at once, while that work may be running
        mem.flush()
        assert not list(directory.glob("*.json"))
        # The same id used again is a new conversation, checkpointed as usual.
        mem.create_session(session_id="d0")
        write_script(mem, "d0", DE[:2])
        mem.flush()
        snap = _checkpoints(mem).read("d0")
        assert snap is not None and snap.turn_count == 2


def test_hydrating_an_ended_conversation_does_not_reopen_it(db: Path) -> None:
    _session(db, EN[:3])
    with Memory(db, embedder="hashing") as mem:
        mem.end_session("ops")
        packet = mem.hydrate("ops")
        assert packet.session_status == "ended" and mem.get_session("ops").status == "ended"
        assert packet.turn_count == 3
