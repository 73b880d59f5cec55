"""`memlane demo`: write a conversation, restart the process, show it was remembered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

from memlane.cli.common import console

DEMO_SESSION = "demo-session"
_TURNS = (
    ("Hi! I'm Ana. I'm planning a trip to Lisbon in May.", "Nice to meet you, Ana! Lisbon in May is lovely."),
    ("I'm vegetarian, so food tips should keep that in mind.", "Noted: vegetarian food tips only."),
    ("Can you remind me to book the train to Sintra?", "I'll remind you to book the Sintra train."),
)


def demo_cmd(
    db: Path = typer.Option(Path("~/.memlane/demo.db"), "--db", help="Where the demo database lives."),
    phase: str = typer.Option("all", "--phase", hidden=True),
) -> None:
    """A short guided demo: store a chat, restart, and recall it from disk."""
    from memlane.memory import Memory

    path = db.expanduser()
    if phase in ("all", "write"):
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        console.rule("[bold]1. An agent talks to Ana and memlane stores every turn")
        with Memory(path) as mem:
            sid = mem.create_session(
                system_prompt="You are a helpful travel assistant.",
                session_id=DEMO_SESSION, user_id="ana", title="Trip planning",
            )
            for query, answer in _TURNS:
                mem.store_interaction(query, answer, session_id=sid, metadata={"intent": "chat"})
                console.print(f"[bold]Ana:[/bold] {query}\n[bold]Assistant:[/bold] {answer}")
        console.print(f"\nstored in {path}; now the process exits, as an agent would on restart.\n")
    if phase == "all":
        subprocess.run(
            [sys.executable, "-m", "memlane.cli.main", "demo", "--db", str(path), "--phase", "recall"],
            check=True,
        )
        return
    if phase == "recall":
        console.rule("[bold]2. A new process opens the same file")
        with Memory(path) as mem:
            window = mem.window(DEMO_SESSION, 60)
            console.print(f"newest messages that fit 60 tokens ({window.tokens} used):")
            for m in window.messages:
                console.print(f"  [cyan]{m.role}[/cyan]: {m.content}", highlight=False)
            hits = mem.search("vegetarian food", session_id=DEMO_SESSION, top_k=1)
            console.print("\nsearch 'vegetarian food' ->", hits[0].message.content if hits else "nothing")
            turns = mem.get_conversation_context(DEMO_SESSION, limit=3)
            console.print(f"\n{len(turns)} turns remembered across the restart.")
        console.print("\nTry: memlane --db", str(path), "history", DEMO_SESSION)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cmd)
