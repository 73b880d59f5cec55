"""The context engine on PostgreSQL: same packet rules, summaries, hydration (checkpoints in a dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import Memory
from memlane.tokens import get_counter
from tests.context_scripts import DE, EN, tool_groups_intact, write_script

pytestmark = pytest.mark.postgres


def test_packets_summaries_and_hydration_on_postgres(pg_url: str, tmp_path: Path) -> None:
    counter = get_counter(None)
    with Memory(pg_url, embedder="hashing", checkpoint_dir=str(tmp_path / "cp")) as mem:
        sid = mem.create_session(system_prompt="You are an admin assistant.", session_id="pg-ops")
        write_script(mem, sid, EN)
        first = mem.load_session(sid)[0]
        mem.mark_important(first.id or 0)
        mem.flush()
        for strategy in ("simple", "summary", "hybrid", "tiered"):
            for budget in (40, 300, 1200, 5000):
                packet = mem.context(sid, query="rsync compression", max_tokens=budget, strategy=strategy)
                msgs = packet.render().messages
                assert (counter.count_messages(msgs) if msgs else 0) <= budget
                assert tool_groups_intact(packet.to_messages())
        hybrid = mem.context(sid, max_tokens=2000)
        assert first.id in {m.id for m in hybrid.pinned_messages}  # no SQL fast path needed
        assert hybrid.summary_covered_turns == 10 and hybrid.rolling_session_summary
        other = mem.create_session(session_id="pg-de")
        write_script(mem, other, DE)
        mem.shutdown(other)
    with Memory(pg_url, embedder="hashing", checkpoint_dir=str(tmp_path / "cp")) as mem:
        packet = mem.hydrate("pg-de")
        assert packet.meta["hydration"]["checkpoint"] == "fresh"
        assert packet.session_status == "resuming" and packet.summary_covered_turns == 9
