"""`memlane demo`: write a conversation, restart the process, show it was remembered.

It writes into the store every other command uses (the configured one, or --store), so
the server and inspector started by ``make run`` show the demo conversation right away.
"""

from __future__ import annotations

import subprocess
import sys

import typer
from rich.markup import escape

from memlane.cli.common import STORE_OPTION, console, state

DEMO_SESSION = "demo-session"
_TURNS = (
    ("Hi! I'm Ana. I'm planning a trip to Lisbon in May.", "Nice to meet you, Ana! Lisbon in May is lovely."),
    ("I'm vegetarian, so food tips should keep that in mind.", "Noted: vegetarian food tips only."),
    ("Can you remind me to book the train to Sintra?", "I'll remind you to book the Sintra train."),
)


def demo_cmd(
    ctx: typer.Context,
    store: str | None = STORE_OPTION,
    phase: str = typer.Option("all", "--phase", hidden=True),
) -> None:
    """A short guided demo: store a chat in your database, restart, and recall it from disk.

    It writes one session, demo-session (replacing an earlier demo run), into the configured
    database or --store; nothing else there is touched.
    """
    st = state(ctx, store)
    url = st.url()
    if phase in ("all", "write"):
        console.rule("[bold]1. An agent talks to Ana and memlane stores every turn")
        with st.open(create=True) as mem:
            mem.delete_session(DEMO_SESSION)  # a rerun starts the demo afresh
            sid = mem.create_session(
                system_prompt="You are a helpful travel assistant.",
                session_id=DEMO_SESSION, user_id="ana", title="Trip planning (memlane demo)",
            )
            for query, answer in _TURNS:
                mem.store_interaction(query, answer, session_id=sid, author_name="Ana", metadata={"intent": "chat"})
                console.print(f"[bold]Ana:[/bold] {escape(query)}\n[bold]Assistant:[/bold] {escape(answer)}")
        console.print(f"\nstored in {escape(url)}; now the process exits, as an agent would on restart.\n")
    if phase == "all":
        # the same options, so the new process resolves the same database
        options = [*(["--config", st.config] if st.config else []), *(["--store", st.store] if st.store else [])]
        subprocess.run([sys.executable, "-m", "memlane.cli.main", *options, "demo", "--phase", "recall"], check=True)
        return
    if phase == "recall":
        console.rule("[bold]2. A new process opens the same database")
        with st.open() as mem:
            window = mem.window(DEMO_SESSION, 60)
            console.print(f"newest messages that fit 60 tokens ({window.tokens} used):")
            for m in window.messages:
                console.print(f"  [cyan]{m.role}[/cyan]: {escape(m.content or '')}", highlight=False)
            hits = mem.search("vegetarian food", session_id=DEMO_SESSION, top_k=1)
            found = hits[0].message.content if hits else "nothing"
            console.print(f"\nsearch 'vegetarian food' -> {escape(found or '')}", highlight=False)
            turns = mem.get_conversation_context(DEMO_SESSION, limit=3)
            console.print(f"\n{len(turns)} turns remembered across the restart.")
        where = f" --store {st.store}" if st.store else ""
        console.print(
            "\nSee it in the inspector: `make run` (or `memlane serve`), then open "
            f"http://127.0.0.1:8765/#/session/{DEMO_SESSION}/transcript\n"
            f"or on the command line: memlane{where} history {DEMO_SESSION}",
            highlight=False, markup=False, soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_cmd)
