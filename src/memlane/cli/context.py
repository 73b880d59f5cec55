"""`memlane context SESSION`: the context packet an agent would get, and how its budget was spent."""

from __future__ import annotations

import json

import typer
from rich.markup import escape

from memlane.cli.common import STORE_OPTION, console, state
from memlane.cli.render import tool_call_text

# One colour per budget section, shared by the bar and its legend.
_COLOURS = {
    "overhead": "grey50", "system": "magenta", "latest": "bright_green", "pinned": "yellow",
    "state": "cyan", "summary": "blue", "notes": "bright_magenta", "recalled": "bright_cyan",
    "recent": "green",
}


def _bar(sections: dict[str, int], max_tokens: int, width: int = 60) -> str:
    cells: list[str] = []
    for name, tokens in sections.items():
        n = round(width * tokens / max_tokens) if max_tokens else 0
        if n:
            cells.append(f"[{_COLOURS.get(name, 'white')}]{'█' * n}[/]")
    used = sum(sections.values())
    free = max(0, width - round(width * used / max_tokens)) if max_tokens else 0
    return "".join(cells) + f"[grey23]{'░' * free}[/]"


def context_cmd(
    ctx: typer.Context,
    session_id: str = typer.Argument(..., help="The session (conversation) id."),
    query: str | None = typer.Option(None, "--query", "-q", help="Recall past messages relevant to this."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", "-t", min=1, help="Token budget (default: max_history_tokens)."
    ),
    strategy: str | None = typer.Option(
        None, "--strategy", "-s", help="simple, summary, hybrid or tiered (default: config)."
    ),
    model: str | None = typer.Option(None, "--model", help="Count tokens for this model's encoding."),
    priorities: str | None = typer.Option(
        None, "--priorities", help="Comma-separated section order, e.g. system,latest,state,recent."
    ),
    archived: bool = typer.Option(False, "--archived", help="Show the archived tier instead."),
    as_json: bool = typer.Option(False, "--json", help="Print the packet as JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Build the context packet for a session and show its messages and budget."""
    st = state(ctx, store)
    session_id = st.sid(session_id)
    with st.open() as mem:
        if archived:
            from memlane.context.strategies import archived_blocks

            blocks = archived_blocks(mem.parts.summaries or mem, session_id)
            if as_json:
                print(json.dumps([b.to_dict() for b in blocks], ensure_ascii=False, indent=2))
                return
            if not blocks:
                console.print("nothing archived: the whole session is in the active or summarized tier")
            for b in blocks:
                topics = ", ".join(b.topics)
                console.print(
                    f"[bold]turns {b.first_turn + 1}-{b.last_turn + 1}[/bold] "
                    f"[dim]{escape(b.started_at[:10])} · messages {b.first_message_id}-{b.last_message_id}"
                    f" · {escape(topics)}[/dim]",
                    highlight=False,
                )
                console.print(b.text, highlight=False, markup=False)
            return
        packet = mem.context(
            session_id, query=query, max_tokens=max_tokens, strategy=strategy, model=model,
            priorities=priorities,
        )
        if as_json:
            print(packet.to_json(indent=2))
            return
        messages = packet.to_messages()
    budget = packet.budget
    assert budget is not None  # render() always records it
    console.print(
        f"[bold]{escape(packet.conversation_id)}[/bold]  status={packet.session_status}  "
        f"strategy={packet.strategy}  turns={packet.turn_count}  "
        f"tokens {budget.used}/{budget.max_tokens} ({budget.encoding})",
        highlight=False,
    )
    console.print(_bar(budget.sections, budget.max_tokens), highlight=False)
    legend = "  ".join(
        f"[{_COLOURS.get(k, 'white')}]■[/] {k} {v}" for k, v in budget.sections.items()
    )
    console.print(legend, highlight=False)
    if budget.dropped:
        dropped = ", ".join(f"{k} {v}" for k, v in budget.dropped.items())
        console.print(f"[dim]left out for the budget: {dropped}[/dim]", highlight=False)
    if packet.archived:
        console.print(
            f"[dim]{len(packet.archived)} archived block(s) not in context; "
            "see --archived[/dim]",
            highlight=False,
        )
    for msg in messages:
        console.rule(f"{msg['role']}", style="dim")
        if msg.get("content"):
            console.print(msg["content"], highlight=False, markup=False)
        for call in msg.get("tool_calls") or []:
            console.print(f"[cyan]→ calls[/cyan] {escape(tool_call_text(call))}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("context")(context_cmd)
