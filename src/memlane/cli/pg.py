"""PostgreSQL commands: ``memlane migrate`` and ``memlane bench store``."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape

from memlane.cli.common import console
from memlane.cli.progress import progress_bar
from memlane.cli.render import figure_lines
from memlane.errors import InvalidInputError


def _open_source(url: str) -> Any:
    from memlane.store import local_file, open_store

    path = local_file(url)
    if path is not None and not path.exists():
        raise InvalidInputError(f"the source database {str(path)!r} does not exist")
    return open_store(url)


def migrate_cmd(
    source: str = typer.Option(..., "--from", help="Source store: sqlite:///path.db (or a path)."),
    target: str = typer.Option(..., "--to", help="Target store: postgresql://user@host/db."),
    new_ids: bool = typer.Option(
        False, "--new-ids",
        help="Let the target number the messages anew (vectors are then rebuilt with `memlane reindex`).",
    ),
    vectors: bool = typer.Option(True, "--vectors/--no-vectors", help="Copy the stored vectors too."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Copy every session, message, turn, derived state and vector to another store.

    One transaction per session; run it again after an interruption and it carries on
    where it stopped. Every table is counted on both sides at the end.
    """
    from memlane.migrate import migrate
    from memlane.store import open_store

    src = _open_source(source)
    try:
        dst = open_store(target)
        try:
            with progress_bar(keep=True) as progress:
                report = migrate(src, dst, keep_ids=False if new_ids else None, vectors=vectors, progress=progress)
        finally:
            dst.close()
    finally:
        src.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        console.print(
            f"{report.sessions} sessions: {report.copied} copied ({report.messages} messages, "
            f"{report.turns} turns, {report.derived} derived records), {report.skipped} already there"
        )
        if report.vectors or report.vectors_note:
            console.print(f"vectors: {report.vectors} copied. {report.vectors_note}".strip())
        for table, (a, b) in report.counts.items():
            mark = "[green]ok[/green]" if a == b else "[red]DIFFERENT[/red]"
            console.print(f"  {table:<10} source {a:>10,}  target {b:>10,}  {mark}")
        for name, n in report.not_copied.items():
            console.print(f"[yellow]not copied:[/yellow] {name} ({n:,} rows); no PostgreSQL support for it yet")
        for problem in report.problems:
            console.print(f"[red]problem:[/red] {escape(problem)}", highlight=False)
    if not report.ok:
        raise typer.Exit(code=5)


def bench_store_cmd(
    store: str = typer.Option(
        "embedded", "--store",
        help="PostgreSQL to compare with SQLite: embedded (started for the run) or postgresql://...",
    ),
    messages: int = typer.Option(100_000, "--messages", min=1000, help="Messages in the log."),
    adds: int = typer.Option(1000, "--adds", min=10, help="Adds to time."),
    searches: int = typer.Option(200, "--searches", min=10, help="Searches to time."),
    embedder: str = typer.Option(
        "none", "--embedder", help="none: keyword search of the store; hashing/minilm add vectors."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Add and search p50/p95 on PostgreSQL beside SQLite, same log, same run."""
    from memlane.bench_store import run_store_bench

    with progress_bar() as progress:
        result = run_store_bench(
            postgres=store, messages=messages, adds=adds, searches=searches, embedder=embedder,
            progress=progress,
        )
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print("\n".join(figure_lines(result)))


def bench_root(
    ctx: typer.Context,
    store: str | None = typer.Option(
        None, "--store",
        help="Shorthand for `memlane bench store --store URL`: PostgreSQL beside SQLite at 100,000 messages.",
    ),
    as_json: bool = typer.Option(False, "--json", help="With --store: print JSON."),
) -> None:
    """Benchmarks: write path, search, store, server load."""
    if ctx.invoked_subcommand is not None:
        if store is not None:
            raise typer.BadParameter("give --store after the sub-command (memlane bench store --store URL)")
        return
    if store is None:
        console.print(ctx.get_help())
        raise typer.Exit(0)
    bench_store_cmd(store=store, messages=100_000, adds=1000, searches=200, embedder="none", as_json=as_json)


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("migrate")(migrate_cmd)
    bench_app.command("store")(bench_store_cmd)
    # `memlane bench --store postgresql://...` (the spelling users are told) runs the store bench
    bench_app.callback(invoke_without_command=True)(bench_root)
