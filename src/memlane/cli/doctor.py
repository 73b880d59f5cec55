"""`memlane doctor`: check a store's health and say what to do about each finding."""

from __future__ import annotations

import json

import typer
from rich.markup import escape

from memlane.cli.common import STORE_OPTION, console, state
from memlane.cli.exit_codes import exit_code_for

_MARK = {"ok": "[green]ok[/green]", "info": "[blue]info[/blue]", "warn": "[yellow]warn[/yellow]",
         "error": "[red]error[/red]"}


def doctor_cmd(
    ctx: typer.Context,
    store: str | None = STORE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON."),
    fix_orphans: bool = typer.Option(
        False, "--fix-orphans", help="Delete derived rows whose source is gone, then check again."
    ),
    fix_erasures: bool = typer.Option(
        False, "--fix-erasures",
        help="Erase again what the erasure log names, drop change events naming forgotten sessions, then check again.",
    ),
) -> None:
    """Check integrity, keyword index, orphans, vector lag, embedder, disk, erasures and the event outbox; exit non-zero when something needs action."""
    from memlane.doctor import diagnose
    from memlane.doctor import fix_erasures as repair_erasures
    from memlane.doctor import fix_orphans as delete_orphans
    from memlane.store import open_store

    cli = state(ctx, store)
    opened = open_store(cli.url(create=False))
    try:
        if fix_orphans:
            removed = delete_orphans(opened)
            if not as_json:
                done = ", ".join(f"{n} from {where}" for where, n in sorted(removed.items()))
                console.print(f"deleted orphaned rows: {done or 'none'}", highlight=False)
        if fix_erasures:
            erased = repair_erasures(opened)
            if not as_json:
                done = ", ".join(f"{n} {kind}" for kind, n in erased.items() if n)
                console.print(f"erased again: {done or 'nothing'}", highlight=False)
        report = diagnose(opened, cli.settings().embedder)
    finally:
        opened.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        console.print(f"memlane doctor: {escape(report.store)} ({report.backend})", highlight=False)
        for f in report.findings:
            console.print(f"  {_MARK[f.status]} {f.check}: {escape(f.message)}", highlight=False)
            if f.action:
                console.print(f"      -> {escape(f.action)}", highlight=False)
        console.print("healthy" if report.healthy else "[red]needs action[/red]")
    problem = report.as_error()
    if problem is not None:
        raise typer.Exit(exit_code_for(problem))


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)
