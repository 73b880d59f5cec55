"""A process killed mid-turn (SIGKILL) resumes with the right state on the next start.

A child process plays an agent: each turn writes the user message, then the
tool call with its result, then the reply, and prints a line after each write
returns. The parent kills it with SIGKILL at a different point of a turn in
each round — after the reply, after the user message, after the tool result —
while its background thread may be summarizing or writing the checkpoint.
The next start must find every acknowledged message, hydrate without an
error, and show exactly the state a rebuild from the log gives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlane import Memory
from memlane.context.summaries import split_turns
from memlane.state.checkpoint import CheckpointManager
from memlane.state.tracker import rebuild_state
from tests.context_scripts import tool_groups_intact

CHILD = textwrap.dedent(
    """
    import sys
    from memlane import Memory
    from memlane.errors import ConflictError

    db, start = sys.argv[1], int(sys.argv[2])
    mem = Memory(db, embedder="hashing")
    try:
        mem.create_session(session_id="crash", user_id="ops", system_prompt="You run backups.")
    except ConflictError:
        pass
    print("ready", flush=True)
    i = start
    while True:
        mem.add("crash", f"Turn {i}: please back up host web-{i % 5} as job-{i}.")
        print(f"user {i}", flush=True)
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "start_backup", "arguments": '{"host": "web-%d"}' % (i % 5)}}
        mem.add_messages("crash", [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"job-{i} started"},
        ])
        print(f"tool {i}", flush=True)
        if i % 4 == 3:
            reply = f"I started job-{i}. Do you mean the full backup or only the home folders?"
        else:
            reply = f"I started job-{i} for web-{i % 5}; it will take about {i % 7 + 3} minutes."
        mem.add("crash", reply, role="assistant")
        print(f"ack {i}", flush=True)
        i += 1
    """
)

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}


def _run_until_killed(db: Path, start: int, turns: int, extra_lines: int) -> list[str]:
    """Start the child at turn ``start``; SIGKILL it ``extra_lines`` writes after ``turns`` acks."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(start)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        acks = 0
        while True:
            line = proc.stdout.readline().strip()
            assert line, f"child died: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line)
            if line.startswith("ack"):
                acks += 1
            if acks >= turns:
                for _ in range(extra_lines):
                    lines.append(proc.stdout.readline().strip())
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    return lines


@pytest.mark.parametrize("extra_lines", [0, 1, 2], ids=["after-reply", "after-user", "after-tool"])
def test_sigkill_mid_turn_resumes_with_the_right_state(tmp_path: Path, extra_lines: int) -> None:
    db = tmp_path / "crash.db"
    start = 0
    for rnd in range(2):
        lines = _run_until_killed(db, start, turns=12 + 5 * rnd, extra_lines=extra_lines)
        acked_users = [int(x.split()[1]) for x in lines if x.startswith("user")]
        acked_replies = [int(x.split()[1]) for x in lines if x.startswith("ack")]
        with Memory(db, embedder="hashing") as mem:
            log = mem.load_session("crash")
            contents = [m.content for m in log]
            # Nothing acknowledged was lost.
            for i in acked_users:
                assert any(c.startswith(f"Turn {i}:") for c in contents), i
            for i in acked_replies:
                assert any(c.startswith(f"I started job-{i}") for c in contents), i
            packet = mem.hydrate("crash", max_tokens=1200)
            verdict = packet.meta["hydration"]["checkpoint"]
            assert verdict in ("fresh", "stale", "missing")
            # The state is exactly what a rebuild from the log alone gives.
            truth = rebuild_state(mem, "crash")
            assert packet.turn_count == truth.turn_count >= len(split_turns(log))
            assert packet.active_job_refs == truth.active_job_refs
            assert packet.pending_clarifications == truth.pending_clarifications
            assert packet.open_loops == truth.open_loops
            assert packet.session_status == "resuming"
            # The summary follows the policy over the whole log (10 per block, 3 raw kept).
            expected = 10 * ((len(split_turns(log)) - 3) // 10)
            assert packet.summary_covered_turns == expected
            # The newest acknowledged write is in the packet, and the request is valid.
            msgs = packet.to_messages()
            assert tool_groups_intact(msgs)
            newest = log[-1]
            if newest.role != "assistant" or not newest.tool_calls:
                assert msgs[-1]["content"] == newest.content
            # A fresh checkpoint was written for the next crash.
            checkpoints = mem.parts.checkpoints
            assert isinstance(checkpoints, CheckpointManager)
            assert checkpoints.check("crash")[0] == "fresh"
            start = max(acked_users) + 1
