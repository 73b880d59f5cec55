"""agent-core (PRD-014): the turn hook that survives kill -9, and startup hydration.

    python examples/agent_core_turn_hook.py DB turns     # store the turns, then kill -9 itself
    python examples/agent_core_turn_hook.py DB hydrate   # boot again: hydrate and print the packet

``on_turn`` is what agent-core's telegram adapter calls after each exchange: one
``store_interaction`` with the turn's intent, action and job refs. memlane writes the
session's checkpoint before that call returns (PRD §7: autosave after every turn, no
shutdown hook), so the process is killed with SIGKILL right after the last turn and the
next start hydrates from a checkpoint that is already fresh.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from memlane import Memory

SESSION = "telegram-chat-4711"

TURNS = [
    ("Please change job-101 so it no longer runs on weekends.", "Done: job-101 now skips Saturday and Sunday.",
     {"intent": "modify_job", "action_name": "update_schedule", "job_refs": ["job-101"]}),
    ("What's the status of job-204, the database vacuum?", "job-204 finished at 03:12 with no errors.",
     {"intent": "job_status", "action_name": "get_job", "job_refs": ["job-204"]}),
    ("Remind me to renew the TLS certificate on Friday.", "I'll remind you on Friday to renew the TLS certificate.",
     {"intent": "reminder", "action_name": "create_reminder"}),
    ("Can you check why job-309 failed last night?", "Should I look at the logs of job-309 or restart it?",
     {"intent": "job_status", "job_refs": ["job-309"]}),
]


def on_turn(mem: Memory, user_text: str, assistant_text: str, fields: dict[str, object]) -> str:
    """agent-core's hook: one call per exchange; returns the turn id."""
    return mem.store_interaction(user_text, assistant_text, metadata=fields, session_id=SESSION)


def run_turns(db: Path) -> None:
    mem = Memory(db, embedder="none")
    mem.ensure_session(SESSION, system_prompt="You are agent-core's concierge.")
    for user_text, reply, fields in TURNS:
        print("turn", on_turn(mem, user_text, reply, fields), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no close(), no shutdown(): a crash


def boot(db: Path) -> None:
    with Memory(db, embedder="none") as mem:
        packet = mem.hydrate(SESSION, max_tokens=600)
        print(json.dumps({"hydration": packet.meta["hydration"]["checkpoint"],
                          "status": packet.session_status,
                          "open_loops": packet.open_loops,
                          "active_job_refs": packet.active_job_refs,
                          "recent_turn_summaries": packet.recent_turn_summaries}, ensure_ascii=False))
        print(packet.to_messages()[0]["content"])


if __name__ == "__main__":
    path, step = Path(sys.argv[1]), sys.argv[2]
    run_turns(path) if step == "turns" else boot(path)
