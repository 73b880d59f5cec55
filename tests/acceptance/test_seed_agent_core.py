"""Seed 002 (agent-core, PRD-014): a crash-safe conversation lane with a curated packet.

Written from the PRD: the contracts (ConversationTurn fields, SessionState, the
ConversationContextPacket's fields), autosave after every turn with no reliance on a
shutdown hook (§7), startup hydration (§5) and "summarize every 10 turns; keep last 3 raw
turns always" (§4 Phase 3). The example program examples/agent_core_turn_hook.py is the
telegram adapter's on_turn hook; here it is killed with SIGKILL after its last turn.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memlane import Memory

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_core_turn_hook.py"
PACKET_FIELDS = {
    "conversation_id", "session_status", "recent_turn_summaries", "rolling_session_summary",
    "active_topics", "active_job_refs", "pending_clarifications", "open_loops",
    "resolved_entities_map", "last_response_type", "context_compiled_at",
}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_turn_hook_survives_kill_9_and_hydrates_from_a_fresh_checkpoint(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    crashed = _run(str(db), "turns")
    assert crashed.returncode == -9, crashed.stderr  # SIGKILL: no close, no shutdown hook
    assert crashed.stdout.count("turn ") == 4
    booted = _run(str(db), "hydrate")
    assert booted.returncode == 0, booted.stderr
    head = json.loads(booted.stdout.splitlines()[0])
    # §7: the checkpoint written after the last turn was on disk before the kill.
    assert head["hydration"] == "fresh" and head["status"] == "resuming"
    assert len(head["recent_turn_summaries"]) == 4
    assert "job-101" not in head["active_job_refs"]  # done
    assert not any("job-101" in loop for loop in head["open_loops"])


def test_packet_has_the_prd_fields(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session("You are agent-core.")
        mem.store_interaction("Please change job-101 so it no longer runs on weekends.",
                              "Which days should it skip exactly?", session_id=sid,
                              metadata={"intent": "modify_job", "job_refs": ["job-101"]})
        packet = mem.context(sid, max_tokens=800)
        data = packet.to_dict()
        assert set(data) >= PACKET_FIELDS
        assert data["pending_clarifications"] and data["recent_turn_summaries"]
        assert data["active_job_refs"] == ["job-101"]


def test_a_done_request_closes_its_open_loop(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session("You are agent-core.")
        mem.store_interaction("Please change job-101 so it no longer runs on weekends.",
                              "I'll change job-101 now.", session_id=sid)
        assert len(mem.get_state(sid).open_loops) == 1  # one loop per request
        mem.store_interaction("Thanks, tell me when it's done.",
                              "Done: job-101 now skips Saturday and Sunday.", session_id=sid)
        mem.flush()
        assert mem.get_state(sid).open_loops == []


def test_a_question_asked_twice_is_one_open_loop(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session("You are agent-core.")
        mem.store_interaction("Which backup jobs run tonight?", "Let me check.", session_id=sid)
        mem.store_interaction("Also, which backup jobs run tonight?", "Let me check again.", session_id=sid)
        assert mem.get_state(sid).open_loops == ["Also, which backup jobs run tonight?"]
        mem.store_interaction("Thanks.", "job-204 and job-205 run at 02:00 tonight.", session_id=sid)
        assert mem.get_state(sid).open_loops == []
