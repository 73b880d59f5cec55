"""The write-path benchmark behind `memlane bench write`.

memlane's add is measured side by side with a raw ``sqlite3`` insert of the same
row into the same schema with the same durability settings, in one run, so the
ratio is meaningful on a noisy shared machine. That comparison uses ``embedder``
("none" by default: the bare write path). The same run then times add again with
the default embedder attached, as an agent runs it, the vectors being made on a
background thread; raw inserts are interleaved there too, so that ratio is fair.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlane.config import load_settings
from memlane.errors import MemlaneError
from memlane.memory import Memory
from memlane.store.raw_sqlite import memlane_schema_insert, plain_table_insert

_TEXT = (
    "I finally booked the train to Sintra for Saturday morning; can you remind me "
    "to pack the vegetarian picnic and check the weather the night before?"
)


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "p50_ms": round(_percentile(ms, 0.50), 4),
        "p95_ms": round(_percentile(ms, 0.95), 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


def _timed_adds(
    mem: Memory, session_id: str, adds: int, *baselines: Callable[[], None]
) -> list[list[float]]:
    """Seconds per ``save_message`` and per call of each baseline, interleaved one by one
    so both sides see the same machine load: ``[ours, baseline 1, ...]``."""
    times: list[list[float]] = [[] for _ in range(1 + len(baselines))]
    for _ in range(adds):
        t0 = time.perf_counter()
        mem.save_message(session_id, {"role": "user", "content": _TEXT})
        times[0].append(time.perf_counter() - t0)
        for slot, insert in zip(times[1:], baselines, strict=True):
            t0 = time.perf_counter()
            insert()
            slot.append(time.perf_counter() - t0)
    return times


def _ratios(add: dict[str, float], raw: dict[str, float]) -> dict[str, float | None]:
    """p50 and p95 of memlane's add over a baseline's (None when the baseline read 0)."""
    return {
        f"add_{q}_ratio": round(add[f"{q}_ms"] / raw[f"{q}_ms"], 3) if raw[f"{q}_ms"] else None
        for q in ("p50", "p95")
    }


def run_write_bench(
    *,
    adds: int = 2000,
    history: int = 100_000,
    durability: str = "full",
    embedder: str = "none",
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Add latency vs raw sqlite3, and get_recent_messages(4096) on a long session."""
    say = progress or (lambda _msg: None)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        ours = Memory(Path(tmp) / "memlane.db", durability=durability, embedder=embedder)
        raw_insert, close_raw = memlane_schema_insert(Path(tmp) / "raw.db", durability, _TEXT)
        # A second baseline without the keyword-index trigger: the bare cost of the row.
        plain_insert, close_plain = plain_table_insert(Path(tmp) / "plain.db", durability, _TEXT)
        sid = ours.create_session(session_id="bench", system_prompt="You are helpful.")
        say(f"timing {adds} adds, interleaved with raw sqlite3 inserts")
        mine, base, bare = _timed_adds(ours, sid, adds, raw_insert, plain_insert)
        close_plain()
        # The keyword rows those adds left to the backlog (store migration 18), as the
        # background or the next search writes them: reported per message beside the add.
        t0 = time.perf_counter()
        later = ours.store.index_pending_keywords()
        keyword_later_ms = (time.perf_counter() - t0) * 1000 / max(1, later)
        indexed = _indexed_adds(Path(tmp), adds, durability, raw_insert, say)
        peer = _defaults_vs_agents_sdk(Path(tmp), adds, say)
        turns = _checkpoint_turns(Path(tmp), min(adds, 300), durability, embedder, say)
        say(f"filling a session with {history:,} messages")
        long_sid = ours.create_session(session_id="long")
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{_TEXT} #{i}"}
                 for i in range(1000)]
        for _ in range(history // 1000):
            ours.add_messages(long_sid, batch)
        # Let the background work the 100k adds queued (state, summaries, notes) finish:
        # the figure is the read path's, not a read racing a backlog for the cores.
        ours.flush(None)
        say("timing get_recent_messages(4096)")
        recent: list[float] = []
        for _ in range(200):
            t0 = time.perf_counter()
            window = ours.get_recent_messages(long_sid, 4096)
            recent.append(time.perf_counter() - t0)
        ours.close()
        close_raw()
        encryption = _encryption_cost(Path(tmp), adds, min(history, 20_000), durability, say)
    add = _summary(mine)
    raw = _summary(base)
    bare_raw = _summary(bare)
    return {
        "durability": durability,
        "embedder": embedder,
        "adds": adds,
        "memlane_add": add,
        "raw_sqlite3_insert": raw,
        **_ratios(add, raw),
        "raw_sqlite3_insert_without_fts": bare_raw,
        "keyword_row_later_ms_per_message": round(keyword_later_ms, 4),
        "add_p50_ratio_vs_without_fts": _ratios(add, bare_raw)["add_p50_ratio"],
        "history_messages": history,
        "get_recent_messages_4096": _summary(recent),
        "window_messages": len(window),
        "with_default_embedder": indexed,
        "defaults_vs_agents_sdk": peer,
        "store_interaction_checkpoint": turns,
        "encryption": encryption,
    }


def _checkpoint_turns(
    tmp: Path, turns: int, durability: str, embedder: str, say: Callable[[str], None]
) -> dict[str, Any]:
    """What the per-turn checkpoint costs: store_interaction with the checkpoint written
    before it returns (checkpoint_per_turn: sync, the default) and after, on the summary
    thread (background), interleaved one turn each so both see the same load."""
    say(f"timing {turns} store_interaction calls, checkpoint sync vs background")
    mems = {mode: Memory(tmp / f"turns-{mode}.db", durability=durability, embedder=embedder,
                         checkpoint_per_turn=mode) for mode in ("sync", "background")}
    times: dict[str, list[float]] = {mode: [] for mode in mems}
    try:
        sids = {mode: m.create_session(session_id="turns") for mode, m in mems.items()}
        for i in range(turns):
            for mode, m in mems.items():
                t0 = time.perf_counter()
                m.store_interaction(f"{_TEXT} #{i}?", f"Answer {i}: {_TEXT}", session_id=sids[mode])
                times[mode].append(time.perf_counter() - t0)
    finally:
        for m in mems.values():
            m.close()
    sync, background = _summary(times["sync"]), _summary(times["background"])
    return {"turns": turns, "sync": sync, "background": background, **_ratios(sync, background)}


def _interleaved(first: Callable[[int], object], second: Callable[[int], object], n: int) -> list[list[float]]:
    """Seconds per call of ``first(i)`` and ``second(i)``, one after the other, ``n`` times."""
    times: list[list[float]] = [[], []]
    for i in range(n):
        for slot, call in zip(times, (first, second), strict=True):
            t0 = time.perf_counter()
            call(i)
            slot.append(time.perf_counter() - t0)
    return times


def _encryption_cost(
    tmp: Path, adds: int, history: int, durability: str, say: Callable[[str], None]
) -> dict[str, Any]:
    """add, window and search on a SQLCipher store beside the same on a plain one, interleaved."""
    stores: list[Memory] = []
    try:
        for name, key in (("plain.db", None), ("encrypted.db", "bench passphrase")):
            stores.append(Memory(tmp / f"enc-{name}", durability=durability, embedder="none", key=key))
    except MemlaneError as exc:  # the encryption extra is not installed
        for mem in stores:
            mem.close()
        return {"skipped": str(exc)}
    plain, encrypted = stores
    try:
        say(f"timing {adds} adds on an encrypted store, interleaved with a plain one")
        for mem in stores:
            mem.create_session(session_id="bench")
        msg = {"role": "user", "content": _TEXT}
        on_enc, on_plain = _interleaved(lambda _i: encrypted.save_message("bench", msg),
                                        lambda _i: plain.save_message("bench", msg), adds)
        say(f"filling both with {history:,} messages")
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{_TEXT} #{i} topic{i % 97}"}
                 for i in range(1000)]
        for mem in stores:
            for _ in range(history // 1000):
                mem.add_messages("bench", batch)
            mem.flush(None)
        say("timing window(4096) and search on both")
        win_enc, win_plain = _interleaved(lambda _i: encrypted.window("bench", 4096),
                                          lambda _i: plain.window("bench", 4096), 200)
        queries = [f"vegetarian picnic topic{i % 97}" for i in range(200)]
        s_enc, s_plain = _interleaved(lambda i: encrypted.search(queries[i]),
                                      lambda i: plain.search(queries[i]), 200)
    finally:
        for mem in stores:
            mem.close()
    out: dict[str, Any] = {"history_messages": history}
    for what, enc_s, plain_s in (("add", on_enc, on_plain), ("window_4096", win_enc, win_plain),
                                 ("search", s_enc, s_plain)):
        enc_f, plain_f = _summary(enc_s), _summary(plain_s)
        out[what] = {"encrypted": enc_f, "plain": plain_f,
                     **{k.replace("add_", ""): v for k, v in _ratios(enc_f, plain_f).items()}}
    return out


def _indexed_adds(
    tmp: Path, adds: int, durability: str, raw_insert: Callable[[], None], say: Callable[[str], None]
) -> dict[str, Any]:
    """Add latency with the default embedder indexing in the background."""
    name = load_settings().embedder or "minilm"
    say(f"timing {adds} adds with the {name!r} embedder indexing in the background")
    try:
        mem = Memory(tmp / "indexed.db", durability=durability)  # the default embedder
    except MemlaneError as exc:  # e.g. the model package is not installed
        return {"embedder": name, "skipped": str(exc)}
    try:
        sid = mem.create_session(session_id="bench", system_prompt="You are helpful.")
        mine, base = _timed_adds(mem, sid, adds, raw_insert)
        t0 = time.perf_counter()
        mem.flush()  # indexing left to do after the last add returned
        drain = time.perf_counter() - t0
    finally:
        mem.close()
    add, raw = _summary(mine), _summary(base)
    return {
        "embedder": name,
        "memlane_add": add,
        "raw_sqlite3_insert": raw,
        **_ratios(add, raw),
        "index_catch_up_s": round(drain, 3),
    }


def _defaults_vs_agents_sdk(tmp: Path, adds: int, say: Callable[[str], None]) -> dict[str, Any]:
    """add with every default (durability full, the default embedder) and background work
    running, as in an agent that also searches, beside the OpenAI Agents SDK's
    ``SQLiteSession.add_items`` of the same item, interleaved one by one."""
    try:
        from agents import SQLiteSession
    except ImportError:
        return {"skipped": "openai-agents is not installed (pip install 'memlane[agents]')"}
    say(f"timing {adds} adds with the defaults beside SQLiteSession.add_items")
    try:
        mem = Memory(tmp / "defaults.db")
    except MemlaneError as exc:  # e.g. the default embedder's package is not installed
        return {"skipped": str(exc)}
    peer = SQLiteSession("bench", str(tmp / "agents.db"))
    loop = asyncio.new_event_loop()
    item: Any = {"role": "user", "content": _TEXT}
    try:
        sid = mem.create_session(session_id="bench", system_prompt="You are helpful.")
        mem.start_background_work()  # what a search or a context read starts
        mem.flush()  # the model loaded, nothing queued: the adds are timed, not the start
        mine, theirs = _timed_adds(mem, sid, adds, lambda: loop.run_until_complete(peer.add_items([item])))
        t0 = time.perf_counter()
        mem.flush()  # derived work (vectors, state, summaries, notes) left after the last add
        drain = time.perf_counter() - t0
    finally:
        mem.close()
        peer.close()
        loop.close()
    add, sdk = _summary(mine), _summary(theirs)
    return {"memlane_add": add, "agents_sdk_add_items": sdk, **_ratios(add, sdk),
            "derived_catch_up_s": round(drain, 3)}


def format_table(result: dict[str, Any]) -> str:
    """The figures of :func:`run_write_bench` as a plain-text table."""
    rows = [("what", "p50 ms", "p95 ms", "ratio p50 / p95")]

    def row(label: str, fig: dict[str, float], ratio: str = "") -> None:
        rows.append((label, f"{fig['p50_ms']:.3f}", f"{fig['p95_ms']:.3f}", ratio))

    row(f"memlane add (embedder {result['embedder']})", result["memlane_add"],
        f"{result['add_p50_ratio']} / {result['add_p95_ratio']}")
    row("raw sqlite3 insert + FTS5 row", result["raw_sqlite3_insert"])
    row("raw sqlite3 insert, no FTS", result["raw_sqlite3_insert_without_fts"])
    if "keyword_row_later_ms_per_message" in result:
        later = f"{result['keyword_row_later_ms_per_message']:.3f}"
        rows.append(("  its keyword row, written later (mean)", later, "", "background"))
    indexed = result.get("with_default_embedder") or {}
    if "memlane_add" in indexed:
        row(f"memlane add (embedder {indexed['embedder']}, background)", indexed["memlane_add"],
            f"{indexed['add_p50_ratio']} / {indexed['add_p95_ratio']}")
        row("raw sqlite3 insert (same phase)", indexed["raw_sqlite3_insert"])
    elif indexed:
        rows.append((f"memlane add (embedder {indexed['embedder']})", "skipped", "", indexed["skipped"]))
    peer = result.get("defaults_vs_agents_sdk") or {}
    if "memlane_add" in peer:
        row("memlane add (defaults, background work on)", peer["memlane_add"],
            f"{peer['add_p50_ratio']} / {peer['add_p95_ratio']}")
        row("Agents SDK SQLiteSession.add_items", peer["agents_sdk_add_items"])
    elif peer:
        rows.append(("memlane add (defaults) vs SQLiteSession", "skipped", "", peer["skipped"]))
    turns = result.get("store_interaction_checkpoint")
    if turns:
        row("store_interaction, checkpoint before return", turns["sync"],
            f"{turns['add_p50_ratio']} / {turns['add_p95_ratio']}")
        row("store_interaction, checkpoint in background", turns["background"])
    row(f"get_recent_messages(4096), {result['history_messages']:,} msgs",
        result["get_recent_messages_4096"])
    enc = result.get("encryption") or {}
    for what in ("add", "window_4096", "search"):
        if what in enc:
            fig = enc[what]
            row(f"{what}, encrypted (SQLCipher)", fig["encrypted"], f"{fig['p50_ratio']} / {fig['p95_ratio']}")
            row(f"{what}, plain (same phase)", fig["plain"])
    if "skipped" in enc:
        rows.append(("encrypted store", "skipped", "", enc["skipped"]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
