"""`memlane notes list` and `notes history` say whom a note learned from messages is about:
the session's person, the Anchor, or the speaker's name, never the placeholder "The user"."""

from __future__ import annotations

from pathlib import Path

from memlane import Memory
from tests.test_cli import run

WIDE = {"COLUMNS": "250"}


def _about_column(out: str) -> dict[str, str]:
    """note id -> the "about" cell of each table row."""
    rows: dict[str, str] = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and cells[1].isdigit():
            rows[cells[1]] = cells[3]
    return rows


def test_notes_say_whom_they_are_about(tmp_path: Path) -> None:
    db = tmp_path / "about.db"
    with Memory(db, embedder="none") as mem:
        ana = mem.create_session(session_id="ana-chat", user_id="ana")
        mem.store_interaction("Remind me to book the Sintra train tomorrow.", "I'll remind you.", session_id=ana)
        mine = mem.create_session(session_id="my-chat")  # no user: the person typing is the Anchor
        mem.store_interaction("Remind me to call the dentist on Friday.", "Will do.", session_id=mine)
        room = mem.create_session(session_id="room", user_id="ana")
        mem.add(room, "Remind me to water the plants tonight.", author_name="Maria", author_id="@maria:matrix.org")
        mem.flush()
        learned = {n.id: n for n in mem.notes(None, session_id=None, limit=50)}
    by_text = {n.text: str(i) for i, n in learned.items()}
    assert any(n.author_name == "The user" for n in learned.values())  # what the column used to show

    out = run("--store", str(db), "notes", "list", env=WIDE)
    assert out.returncode == 0, out.stderr
    about = _about_column(out.stdout)
    assert "The user" not in about.values()
    sintra = next(i for t, i in by_text.items() if "Sintra" in t)
    dentist = next(i for t, i in by_text.items() if "dentist" in t)
    plants = next(i for t, i in by_text.items() if "plants" in t)
    assert about[sintra] == "ana" and about[dentist] == "Anchor" and about[plants] == "Maria"

    named = run("--store", str(db), "notes", "list", env={**WIDE, "MEMLANE_ANCHOR_NAME": "JanHein"})
    assert _about_column(named.stdout)[dentist] == "Anchor (JanHein)"

    history = run("--store", str(db), "notes", "history", sintra, env=WIDE)
    assert history.returncode == 0 and _about_column(history.stdout) == {sintra: "ana"}
