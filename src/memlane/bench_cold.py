"""`memlane bench cold`: what every CLI call, worker and agent script pays to start.

Each figure is the median over ``runs`` fresh Python processes, and the OpenAI Agents SDK's
``SQLiteSession`` (package ``openai-agents``) does the same work in the same run, process
for process, interleaved with memlane's, so both see the same machine load:

* **first save**: interpreter start, import, open a new database, create a session and
  durably store one message (time until the child says "saved"; its exit is reported apart,
  as ``process_ms``: memlane finishes its background work then);
* **CLI reads**: wall time of ``memlane sessions`` and ``memlane history SESSION`` on a store
  of 20 sessions x 20 messages; the SDK's peer for ``history`` is a script that prints a
  session's items (it has no command line, and no way to list sessions);
* **CPU**: user + system time of each of those processes (their whole life, exit included):
  what the start costs on the machine, which wall times under load do not show;
* **RSS**: resident memory at the end of a process that writes 20 messages and reads a
  window (``get_items(limit=20)`` for the SDK) after each one; the peak is reported too.

Children run with ``HOME`` and ``MEMLANE_CONFIG`` pointing into a scratch directory, so a
user's config file does not change what is measured. They keep compiled bytecode (in a
``PYTHONPYCACHEPREFIX`` inside that directory, even when ``PYTHONDONTWRITEBYTECODE`` is set
around the bench) and one untimed warm-up round of every probe fills it first: an installed
package has its bytecode, so recompiling every module in each process would measure the
machine's compiler, not a start. Both memlane and the SDK are measured that way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The issue's targets (docs/performance figures are checked against them).
TARGETS = {"first_save_ms": 150.0, "cli_read_ms": 400.0, "rss_mb": 80.0}
#: Messages written (and windows read) by the RSS probe; sessions x messages for CLI reads.
RSS_MESSAGES = 20
CLI_SESSIONS, CLI_MESSAGES = 20, 20

_RSS = """
def _rss():
    try:
        fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError):  # not Linux: the peak is all there is
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
        return peak, peak
"""

MEMLANE_FIRST_SAVE = """
import sys
from memlane import Memory
mem = Memory(sys.argv[1])
sid = mem.create_session()
mem.save_message(sid, {"role": "user", "content": "When does the train to Sintra leave?"})
print("saved", flush=True)
"""

AGENTS_FIRST_SAVE = """
import asyncio, sys
from agents import SQLiteSession
session = SQLiteSession("s1", sys.argv[1])
asyncio.run(session.add_items([{"role": "user", "content": "When does the train to Sintra leave?"}]))
print("saved", flush=True)
"""

MEMLANE_RSS = f"""
import json, sys
from memlane import Memory
{_RSS}
mem = Memory(sys.argv[1])
sid = mem.create_session(system_prompt="You are a travel agent.")
for i in range({RSS_MESSAGES}):
    mem.add(sid, f"message {{i}}: the train to Sintra leaves Rossio every 20 minutes", role="user" if i % 2 == 0 else "assistant")
    mem.window(sid, 2000)
mem.close()
print(json.dumps(_rss()), flush=True)
"""

AGENTS_RSS = f"""
import asyncio, json, sys
from agents import SQLiteSession
{_RSS}
session = SQLiteSession("s1", sys.argv[1])
async def main():
    for i in range({RSS_MESSAGES}):
        role = "user" if i % 2 == 0 else "assistant"
        await session.add_items([{{"role": role, "content": f"message {{i}}: the train to Sintra leaves Rossio every 20 minutes"}}])
        await session.get_items(limit=20)
asyncio.run(main())
session.close()
print(json.dumps(_rss()), flush=True)
"""

AGENTS_HISTORY = """
import asyncio, json, sys
from agents import SQLiteSession
session = SQLiteSession(sys.argv[2], sys.argv[1])
for item in asyncio.run(session.get_items()):
    print(json.dumps(item))
"""

AGENTS_FILL = f"""
import asyncio, sys
from agents import SQLiteSession
async def main():
    for s in range({CLI_SESSIONS}):
        session = SQLiteSession(f"s{{s}}", sys.argv[1])
        await session.add_items([
            {{"role": "user" if i % 2 == 0 else "assistant", "content": f"session {{s}} message {{i}} about the train"}}
            for i in range({CLI_MESSAGES})
        ])
        session.close()
asyncio.run(main())
"""


def agents_available() -> bool:
    return importlib.util.find_spec("agents") is not None


def _env(scratch: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["HOME"] = str(scratch)
    env["MEMLANE_CONFIG"] = str(scratch / "no-config.yaml")
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return env


def _memlane_cli() -> list[str]:
    script = Path(sys.executable).with_name("memlane")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memlane.cli.main"]


def _timed(argv: list[str], env: dict[str, str], *, marker: str | None = None) -> tuple[float, float, str]:
    """(ms until ``marker`` was printed (or exit), ms until exit, the rest of stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = None
    if marker is not None:
        line = proc.stdout.readline()
        seen = time.perf_counter()
        if line.strip() != marker:
            proc.kill()
            _, err = proc.communicate()
            raise RuntimeError(f"{argv[:3]} printed {line!r} instead of {marker!r}: {err.strip()[-800:]}")
    out, err = proc.communicate()
    ended = time.perf_counter()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({proc.returncode}): {err.strip()[-800:]}")
    return 1000 * ((seen or ended) - start), 1000 * (ended - start), out


def _children_cpu_ms() -> float:
    """User + system CPU of every child process waited for so far (children run one at a time)."""
    try:
        import resource
    except ImportError:  # not Unix: no CPU figures
        return 0.0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000.0 * (used.ru_utime + used.ru_stime)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def _ratio(peer: float | None, ours: float) -> float | None:
    return round(peer / ours, 2) if peer is not None and ours > 0 else None


def run_cold_bench(runs: int = 10, *, peer: bool = True, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Measure cold start; ``peer=False`` (or no openai-agents installed) leaves the SDK out."""
    say = progress or (lambda _msg: None)
    with_peer = peer and agents_available()
    py = sys.executable
    ours: dict[str, list[float]] = {k: [] for k in (
        "first_save", "process", "sessions", "history", "rss", "peak", "process_cpu", "sessions_cpu", "history_cpu",
    )}
    theirs: dict[str, list[float]] = {k: [] for k in ("first_save", "process", "history", "rss", "peak", "process_cpu", "history_cpu")}
    with tempfile.TemporaryDirectory(prefix="memlane-bench-cold-") as tmp:
        scratch = Path(tmp)
        env = _env(scratch)
        say("filling the stores the read commands use")
        store = scratch / "read.db"
        _fill_memlane(store, env)
        agents_store = scratch / "agents-read.db"
        if with_peer:
            _timed([py, "-c", AGENTS_FILL, str(agents_store)], env)
        cli = [*_memlane_cli(), "--store", str(store)]
        say("warm-up round (compiles bytecode; not timed)")
        _timed([py, "-c", MEMLANE_FIRST_SAVE, str(scratch / "warm.db")], env, marker="saved")
        _timed([*cli, "sessions"], env)
        _timed([*cli, "history", "s0"], env)
        if with_peer:
            _timed([py, "-c", AGENTS_FIRST_SAVE, str(scratch / "warm-a.db")], env, marker="saved")
            _timed([py, "-c", AGENTS_HISTORY, str(agents_store), "s0"], env)
        for n in range(runs):
            say(f"fresh processes: round {n + 1} of {runs}")
            cpu = _children_cpu_ms()
            saved, ended, _ = _timed([py, "-c", MEMLANE_FIRST_SAVE, str(scratch / f"m{n}.db")], env, marker="saved")
            ours["first_save"].append(saved)
            ours["process"].append(ended)
            ours["process_cpu"].append(-cpu + (cpu := _children_cpu_ms()))
            ours["sessions"].append(_timed([*cli, "sessions"], env)[1])
            ours["sessions_cpu"].append(-cpu + (cpu := _children_cpu_ms()))
            ours["history"].append(_timed([*cli, "history", "s0"], env)[1])
            ours["history_cpu"].append(-cpu + (cpu := _children_cpu_ms()))
            rss, peak = json.loads(_timed([py, "-c", MEMLANE_RSS, str(scratch / f"r{n}.db")], env)[2])
            ours["rss"].append(rss)
            ours["peak"].append(peak)
            if not with_peer:
                continue
            cpu = _children_cpu_ms()
            saved, ended, _ = _timed([py, "-c", AGENTS_FIRST_SAVE, str(scratch / f"a{n}.db")], env, marker="saved")
            theirs["first_save"].append(saved)
            theirs["process"].append(ended)
            theirs["process_cpu"].append(-cpu + (cpu := _children_cpu_ms()))
            theirs["history"].append(_timed([py, "-c", AGENTS_HISTORY, str(agents_store), "s0"], env)[1])
            theirs["history_cpu"].append(-cpu + (cpu := _children_cpu_ms()))
            rss, peak = json.loads(_timed([py, "-c", AGENTS_RSS, str(scratch / f"ar{n}.db")], env)[2])
            theirs["rss"].append(rss)
            theirs["peak"].append(peak)
    memlane = {
        "first_save_ms": _median(ours["first_save"]),
        "process_ms": _median(ours["process"]),
        "sessions_ms": _median(ours["sessions"]),
        "history_ms": _median(ours["history"]),
        "rss_mb": _median(ours["rss"]),
        "peak_rss_mb": _median(ours["peak"]),
        "process_cpu_ms": _median(ours["process_cpu"]),
        "sessions_cpu_ms": _median(ours["sessions_cpu"]),
        "history_cpu_ms": _median(ours["history_cpu"]),
    }
    sdk: dict[str, float] | None = None
    if with_peer:
        sdk = {
            "first_save_ms": _median(theirs["first_save"]),
            "process_ms": _median(theirs["process"]),
            "history_ms": _median(theirs["history"]),
            "rss_mb": _median(theirs["rss"]),
            "peak_rss_mb": _median(theirs["peak"]),
            "process_cpu_ms": _median(theirs["process_cpu"]),
            "history_cpu_ms": _median(theirs["history_cpu"]),
        }
    return {
        "runs": runs,
        "python": sys.version.split()[0],
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "memlane": memlane,
        "agents_sqlite_session": sdk,
        "agents_version": _agents_version() if with_peer else None,
        # The SDK's figure over memlane's: above 1 means memlane is faster / smaller.
        "ratios": {
            key: _ratio(sdk.get(key) if sdk else None, memlane[key])
            for key in ("first_save_ms", "process_ms", "history_ms", "rss_mb", "process_cpu_ms", "history_cpu_ms")
        },
        "targets": TARGETS,
        "meets_targets": {
            "first_save_ms": memlane["first_save_ms"] <= TARGETS["first_save_ms"],
            "sessions_ms": memlane["sessions_ms"] <= TARGETS["cli_read_ms"],
            "history_ms": memlane["history_ms"] <= TARGETS["cli_read_ms"],
            "rss_mb": memlane["rss_mb"] <= TARGETS["rss_mb"],
        },
    }


def _fill_memlane(store: Path, env: dict[str, str]) -> None:
    code = f"""
import sys
from memlane import Memory
with Memory(sys.argv[1]) as mem:
    for s in range({CLI_SESSIONS}):
        sid = mem.create_session(session_id=f"s{{s}}", title=f"trip {{s}}")
        mem.add_messages(sid, [
            {{"role": "user" if i % 2 == 0 else "assistant", "content": f"session {{s}} message {{i}} about the train"}}
            for i in range({CLI_MESSAGES})
        ])
"""
    _timed([sys.executable, "-c", code, str(store)], env)


def _agents_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openai-agents")
    except PackageNotFoundError:
        return None


def format_table(result: dict[str, Any]) -> str:
    ours, theirs, ratios, targets = result["memlane"], result["agents_sqlite_session"], result["ratios"], result["targets"]

    def cell(value: float | None, unit: str) -> str:
        return "-" if value is None else f"{value:,.1f} {unit}"

    rows = [
        ("import + open + first durable save", "first_save_ms", "ms", targets["first_save_ms"]),
        ("  whole process (incl. exit)", "process_ms", "ms", None),
        ("  its CPU (user + system)", "process_cpu_ms", "ms", None),
        ("memlane sessions (wall)", "sessions_ms", "ms", targets["cli_read_ms"]),
        ("  its CPU (user + system)", "sessions_cpu_ms", "ms", None),
        ("memlane history (wall)", "history_ms", "ms", targets["cli_read_ms"]),
        ("  its CPU (user + system)", "history_cpu_ms", "ms", None),
        ("RSS, write-and-window process", "rss_mb", "MB", targets["rss_mb"]),
        ("  peak RSS", "peak_rss_mb", "MB", None),
    ]
    load = f"{result['load_average'][0]:.1f}" if result["load_average"] else "-"
    lines = [
        f"cold start, median of {result['runs']} fresh processes each (Python {result['python']}, "
        f"load average {load})",
        f"{'':38} {'memlane':>12} {'SQLiteSession':>14} {'ratio':>7} {'target':>9}",
    ]
    for label, key, unit, target in rows:
        peer = theirs.get(key) if theirs else None
        ratio = ratios.get(key)
        lines.append(
            f"{label:38} {cell(ours[key], unit):>12} {cell(peer, unit):>14} "
            f"{'-' if ratio is None else f'{ratio:.2f}x':>7} {'-' if target is None else f'<= {target:g}':>9}"
        )
    if theirs is None:
        lines.append("SQLiteSession: openai-agents is not installed (pip install 'memlane[dev]')")
    lines.append("ratio: SQLiteSession's figure over memlane's (above 1: memlane is faster or smaller)")
    return "\n".join(lines)
