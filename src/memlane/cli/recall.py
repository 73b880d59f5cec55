"""Recall commands: ``memlane reindex``, ``memlane eval locomo``, ``memlane bench search``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from memlane.cli.common import STORE_OPTION, console, err_console, state
from memlane.cli.progress import progress_bar
from memlane.cli.render import figure_lines


def reindex_cmd(
    ctx: typer.Context,
    embedder: str | None = typer.Option(
        None, "--embedder", help="Embedder spec to use from now on (default: the configured one)."
    ),
    batch: int = typer.Option(64, "--batch", min=1, help="Messages per embedding batch."),
    store: str | None = STORE_OPTION,
) -> None:
    """Rebuild the keyword and vector indexes from the log (backfill, or switch embedders).

    Stop other processes writing to the database first.
    """
    from memlane.search.recall import embedder_from_settings, vector_index_for
    from memlane.search.reindex import reindex
    from memlane.store import open_store

    st = state(ctx, store)
    settings = st.settings()
    spec = embedder if embedder is not None else settings.embedder
    model = embedder_from_settings(spec)
    opened = open_store(st.url(create=False), durability=settings.durability)
    try:
        index = vector_index_for(opened)
        with progress_bar() as progress:
            result = reindex(opened, index, model, batch_size=batch, progress=progress)
    finally:
        opened.close()
    what = f"{result.embedded} vectors with {result.model.describe()}" if result.model else "no vectors"
    console.print(f"reindexed {result.messages} messages: keyword index rebuilt, {what}")
    if embedder is not None and embedder != settings.embedder:
        console.print(
            f"[yellow]note:[/yellow] set embedder: {embedder} in your config (or MEMLANE_EMBEDDER) "
            "so memlane opens this database with the same embedder"
        )


def eval_locomo_cmd(
    files: list[Path] = typer.Argument(..., help="LoCoMo conversation files (.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder spec."),
    max_questions: int | None = typer.Option(
        None, "--max-questions", min=1, help="Stop after this many questions (quick runs)."
    ),
    store: str | None = typer.Option(
        None, "--store",
        help="Where the conversations go: sqlite (temp files, default), embedded (a PostgreSQL "
        "started for the run) or postgresql://... (a scratch schema per conversation).",
    ),
    split: str = typer.Option(
        "a", "--split",
        help="Tuning/held-aside split: a = the first 3 of 5 conversations (by sample id) tune, "
        "the other 2 are held aside; b = the roles swapped.",
    ),
    part: str = typer.Option(
        "all", "--part", help="Which conversations of the split run: all, tune or held."
    ),
) -> None:
    """Retrieval quality on LoCoMo: Recall@1/5/10/20 and Hit@5 of mem.search, with baselines,
    per category and per part of the tuning/held-aside split, and search latency p50/p95."""
    from memlane.eval.locomo import evaluate

    with progress_bar() as progress:
        result = evaluate(
            files, embedder=embedder, max_questions=max_questions, progress=progress, store=store,
            split=split, part=part,
        )
    if as_json:
        print(json.dumps(result))
        return
    from rich.table import Table

    table = Table(title=f"LoCoMo retrieval, {result['questions']} questions")
    cols = ["recall@1", "recall@5", "recall@10", "recall@20", "hit@5"]
    table.add_column("")
    for c in cols:
        table.add_column(c, justify="right")
    table.add_row("hybrid", *(f"{result['overall'][c]:.3f}" for c in cols))
    for name, scores in result["baselines"].items():
        if scores is None:
            table.add_row(f"{name} only", *(["skipped"] * len(cols)))
            continue
        table.add_row(f"{name} only", *(f"{scores[c]:.3f}" for c in cols))
    for name, ratios in result["gain"].items():
        if ratios is not None:  # hybrid / baseline: >1 means the fusion finds more
            table.add_row(f"gain vs {name}", *("n/a" if ratios[c] is None else f"x{ratios[c]:.2f}" for c in cols))
    _category_rows(table, result, cols)
    for name, figures in result["parts"].items():
        ids = ", ".join(result["split"][name])
        table.add_row(f"{name} ({ids})", *(f"{figures['overall'][c]:.3f}" for c in cols))
        _category_rows(table, figures, cols)
    console.print(table)
    console.print(
        f"ingest {result['ingest_msgs_per_s']} msgs/s (with embedding), search p50 "
        f"{result['search_ms_p50']} ms, p95 {result['search_ms_p95']} ms"
    )
    for name, figures in result["parts"].items():
        console.print(f"{name}: search p50 {figures['search_ms_p50']} ms, p95 {figures['search_ms_p95']} ms")


def _category_rows(table: Any, figures: dict[str, Any], cols: list[str]) -> None:
    for cat, scores in figures["by_category"].items():
        table.add_row(
            f"  cat {cat} {scores['name']} ({scores['questions']})", *(f"{scores[c]:.3f}" for c in cols)
        )


def bench_search_cmd(
    messages: int = typer.Option(100_000, "--messages", min=1000, help="Messages in the database."),
    users: int = typer.Option(
        1, "--users", min=1,
        help="Users owning the messages: 1 (one user owns all), or N >= 3: one user owns 1%, one "
        "10%, the other N-2 share the rest; latency is reported for each share (100%: every session).",
    ),
    peers: bool = typer.Option(
        True, "--peers/--no-peers", help="Also load the same vectors into sqlite-vec and ChromaDB."
    ),
    vectors_only: bool = typer.Option(
        False, "--vectors-only",
        help="Time the vector index alone, on synthetic vectors and one-word messages (for a "
        "scale such as 1,000,000 where writing and embedding real messages takes hours on 2 cores).",
    ),
    ingest: int = typer.Option(1000, "--ingest", min=10, help="Messages for the ingest figure."),
    queries: int = typer.Option(200, "--queries", min=10, help="Queries to time."),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder spec."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Search p50/p95 per user share, first search in a fresh process and its memory, ingest
    msgs/s, and sqlite-vec and ChromaDB on the same vectors."""
    from memlane.bench_search import chroma_available, run_index_scale, run_search_bench

    if vectors_only:
        with progress_bar() as progress:
            scale = run_index_scale(messages=messages, users=users, queries=queries, progress=progress)
        print(json.dumps(scale, indent=2) if as_json else "\n".join(figure_lines(scale)))
        return
    if peers and not chroma_available():
        err_console.print(
            "chromadb is not installed, so the ChromaDB comparison is skipped; "
            "install it with: pip install 'memlane[bench]'",
            markup=False,  # else rich reads "[bench]" as a style tag and drops it
        )
    with progress_bar() as progress:
        result = run_search_bench(
            messages=messages, ingest=ingest, queries=queries, embedder_spec=embedder,
            users=users, peers=peers, progress=progress,
        )
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print("\n".join(figure_lines(result)))


def register(app: typer.Typer, eval_app: typer.Typer, bench_app: typer.Typer) -> None:
    app.command("reindex")(reindex_cmd)
    eval_app.command("locomo")(eval_locomo_cmd)
    bench_app.command("search")(bench_search_cmd)
