"""The four example programs in examples/ run as a user would run them, and do what the
README shows. (agent_core_turn_hook.py is run by test_seed_agent_core.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                       timeout=300, check=False, cwd=EXAMPLES)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_harombe_agent_answers_from_past_conversations_over_both_protocols(tmp_path: Path) -> None:
    for protocol in ("openai", "ollama"):
        out = _run("harombe_agent.py", str(tmp_path / f"{protocol}.db"), protocol)
        friday = out.split("friday> ", 1)[1]
        assert "retry decorator with exponential backoff" in friday.split("friday> ")[0]
        # Nothing stored is about the weather in Tokyo: no context, no invented memory.
        assert "Tokyo tomorrow?\n  agent: I don't know." in out
        sent = out.split("== what the model got for the first Friday question ==")[1]
        assert sent.strip().startswith("RELEVANT CONTEXT FROM PAST CONVERSATIONS:")
        assert "JSON lines" not in sent  # below rag.min_similarity: not padded in


def test_matrix_room_bot_keeps_the_anchor_in_charge(tmp_path: Path) -> None:
    out = _run("matrix_room_bot.py", str(tmp_path / "rooms.db"))
    assert "JanHein: remember this\n  -> memory: I'll remember that: The community garden meets every Saturday" in out
    assert "Maria: forget this conversation\n  -> memory: Only JanHein can change what I remember." in out
    assert "Anchor (JanHein): The community garden meets every Saturday at 10." in out
    assert "Maria: The basil on my balcony" in out and "Oma: Ich bringe am Samstag Apfelkuchen mit." in out
    packet = out.split("== packet for: what does JanHein drink? ==")[1]
    assert "JanHein prefers tea." in packet and "loves coffee" not in packet and "flat white" not in packet


def test_german_shell_helper_resolves_and_asks(tmp_path: Path) -> None:
    out = _run("shell_helper_de.py", str(tmp_path / "helper.db"))
    assert "resolved: ja setze deinen vorschlag um! [Context: Previous suggestion was:" in out
    assert "Ich lege den Benutzer anna mit sudo useradd -m anna an." in out
    assert "Ich bin mir nicht sicher, worauf sich 'das' bezieht. Meinten Sie:" in out
    assert '"query": "Wie lege ich einen neuen Benutzer an?"' in out
    assert "model llama3.2:3b · confidence 0.69 · 2.02 s · context used" in out
