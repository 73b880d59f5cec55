"""The `memlane` command, run as a real subprocess like a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memlane import Memory

ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlane.cli.main", *args],
        capture_output=True, text=True, input=input, env={**ENV, **(env or {})}, timeout=300,
    )


def _seed(db: Path) -> str:
    with Memory(db, embedder="none") as mem:
        sid = mem.create_session(session_id="s1", user_id="ana", title="Trip")
        mem.store_interaction("I love vegetarian food in Lisbon", "Noted!", session_id=sid)
        return sid


def test_help_on_every_command() -> None:
    top = run("--help")
    assert top.returncode == 0
    for cmd in ("sessions", "history", "search", "export", "import", "prune", "delete", "stats", "demo"):
        assert cmd in top.stdout
        sub = run(cmd, "--help")
        assert sub.returncode == 0 and "Usage" in sub.stdout, cmd


def test_sessions_history_search_stats(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    out = run("--store", str(db), "sessions", "--json")
    assert out.returncode == 0, out.stderr
    assert [s["id"] for s in json.loads(out.stdout)] == ["s1"]
    hist = run("--store", str(db), "history", "s1", "--json")
    assert [m["content"] for m in json.loads(hist.stdout)] == ["I love vegetarian food in Lisbon", "Noted!"]
    found = run("--store", str(db), "search", "vegetarian", "--json")
    assert json.loads(found.stdout)[0]["message"]["content"].startswith("I love vegetarian")
    stats = run("--store", str(db), "stats", "--json")
    assert json.loads(stats.stdout)["messages"] == 2


def test_export_import_delete_prune(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    exported = tmp_path / "s1.jsonl"
    assert run("--store", str(db), "export", "s1", "-f", "jsonl", "-o", str(exported)).returncode == 0
    other = tmp_path / "other.db"
    imp = run("--store", str(other), "import", str(exported))
    assert imp.returncode == 0, imp.stderr
    again = run("--store", str(other), "import", str(exported))
    assert again.returncode == 5 and "already exists" in again.stderr
    assert run("--store", str(other), "delete", "s1", "--yes").returncode == 0
    missing = run("--store", str(other), "delete", "s1", "--yes")
    assert missing.returncode == 4 and "does not exist" in missing.stderr
    pruned = run("--store", str(db), "prune", "--days", "0", "--yes")
    assert pruned.returncode == 0 and "deleted 1" in pruned.stdout


def test_errors_are_one_line_with_distinct_exit_codes(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    bad_fmt = run("--store", str(db), "export", "s1", "-f", "xml")
    assert bad_fmt.returncode == 2 and "format must be one of" in bad_fmt.stderr
    assert len(bad_fmt.stderr.strip().splitlines()) == 1
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("memory:\n  max_history_tokens: -5\n")
    bad_cfg = run("--config", str(cfg), "--store", str(db), "sessions")
    assert bad_cfg.returncode == 7 and "max_history_tokens" in bad_cfg.stderr
    bad_url = run("--store", "redis://x", "sessions")
    assert bad_url.returncode == 2 and "unsupported store URL" in bad_url.stderr


def test_config_file_and_env(tmp_path: Path) -> None:
    db = tmp_path / "from-config.db"
    _seed(db)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"memory:\n  storage_path: {db}\n  strategy: simple\n")
    out = run("--config", str(cfg), "sessions", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)[0]["id"] == "s1"
    env_out = run("sessions", "--json", env={"MEMLANE_STORAGE_PATH": str(db)})
    assert json.loads(env_out.stdout)[0]["id"] == "s1"


def test_demo_remembers_across_a_restart(tmp_path: Path) -> None:
    out = run("demo", "--store", str(tmp_path / "demo.db"))
    assert out.returncode == 0, out.stderr
    assert "3 turns remembered across the restart" in out.stdout
    assert "vegetarian" in out.stdout


def test_usage_errors_are_short_not_tracebacks(tmp_path: Path) -> None:
    out = run("--store", str(tmp_path / "x.db"), "history")
    assert out.returncode == 2
    assert "Missing argument" in out.stderr and "Traceback" not in out.stderr
    bad = run("--store", str(tmp_path / "x.db"), "sessions", "--limit", "0")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_bench_write_reports_ratios() -> None:
    out = run("bench", "write", "--adds", "30", "--history", "1000", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["adds"] == 30 and data["history_messages"] == 1000
    assert data["add_p50_ratio"] > 0 and data["get_recent_messages_4096"]["p50_ms"] > 0
    assert data["window_messages"] > 10


def test_bench_group_lists_its_benchmarks_and_takes_store_as_shorthand() -> None:
    bare = run("bench")
    assert bare.returncode == 0
    for cmd in ("write", "search", "store", "serve", "--store"):
        assert cmd in bare.stdout, cmd
    misplaced = run("bench", "--store", "postgresql://x", "write")
    assert misplaced.returncode == 2
    assert "after the sub-command" in misplaced.stderr + misplaced.stdout


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(command, "commands", {})
    out = [path]
    for name, sub in subs.items():
        if not getattr(sub, "hidden", False):
            out += _commands(sub, (*path, name))
    return out


def test_no_flag_shows_a_type_in_help() -> None:
    import typer

    from memlane.cli.main import app

    paths = _commands(typer.main.get_command(app))
    assert len(paths) > 30
    for path in paths:
        out = run(*path, "--help", env={"COLUMNS": "200"})
        assert out.returncode == 0, (path, out.stderr)
        assert "<bool>" not in out.stdout, path
    assert "<int range>" in run("sessions", "--help").stdout  # options that take a value keep their type


def test_store_is_accepted_after_the_command(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    for args in (("sessions", "--store", str(db)), ("sessions", "--db", str(db)),
                 ("--store", str(tmp_path / "other.db"), "sessions", "--store", str(db))):
        out = run(*args, "--json")
        assert out.returncode == 0, out.stderr
        assert [s["id"] for s in json.loads(out.stdout)] == ["s1"], args
    hist = run("history", "s1", "--json", "--store", str(db))
    assert len(json.loads(hist.stdout)) == 2


def test_reading_a_store_that_does_not_exist_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    for args in (("sessions",), ("history", "s1"), ("search", "x"), ("stats",), ("context", "s1"),
                 ("notes", "list"), ("reindex",), ("prune", "--days", "0", "--yes")):
        out = run("--store", str(missing), *args)
        assert out.returncode == 4, (args, out.stdout, out.stderr)
        assert f"no database at {missing}" in out.stderr and "--store" in out.stderr, args
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert not (tmp_path / "nonexistent").exists(), args
    # writes create it, directories included
    added = run("notes", "add", "I like tea", "--store", str(missing))
    assert added.returncode == 0, added.stderr
    assert missing.exists()
    assert run("--store", str(missing), "sessions").returncode == 0
    # the default path is created by a read, so a first `memlane sessions` just lists none
    home = tmp_path / "home"
    first = run("sessions", "--json", env={"HOME": str(home)})
    assert first.returncode == 0 and json.loads(first.stdout) == []
    assert (home / ".memlane" / "memory.db").exists()


def test_errors_name_flags_and_commands_not_python(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    exported = tmp_path / "s1.json"
    assert run("--store", str(db), "export", "s1", "-o", str(exported)).returncode == 0
    again = run("--store", str(db), "import", str(exported))
    assert again.returncode == 5
    assert "--on-conflict skip" in again.stderr and "on_conflict" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    skipped = run("--store", str(db), "import", str(exported), "--on-conflict", "skip")
    assert skipped.returncode == 0, skipped.stderr
    bad = run("--store", str(db), "import", str(exported), "--on-conflict", "merge")
    assert bad.returncode == 2 and "'--on-conflict'" in bad.stderr
    missing = run("--store", str(db), "history", "nosuch")
    assert missing.returncode == 4 and "memlane sessions" in missing.stderr
    assert "create_session()" not in missing.stderr


def test_prune_says_how_many_before_asking(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    declined = run("--store", str(db), "prune", "--days", "0", input="n\n")
    assert "Delete 1 session(s) inactive for more than 0 days" in declined.stdout
    assert declined.returncode != 0
    assert json.loads(run("--store", str(db), "sessions", "--json").stdout)[0]["id"] == "s1"
    none = run("--store", str(db), "prune", "--days", "30")  # nothing old: no question at all
    assert none.returncode == 0 and "nothing deleted" in none.stdout
    accepted = run("--store", str(db), "prune", "--days", "0", input="y\n")
    assert accepted.returncode == 0 and "deleted 1 session(s)" in accepted.stdout


def test_history_shows_tool_calls_as_calls_and_separates_messages(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    call = {"id": "call_w1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lisbon", "month": "May"}'}}
    with Memory(db, embedder="none") as mem:
        mem.create_session(session_id="trip")
        mem.add_messages("trip", [
            {"role": "user", "content": "Weather in [Lisbon]?", "author_name": "Ana"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "22C and sunny", "tool_call_id": "call_w1", "name": "get_weather"},
            {"role": "assistant", "content": "About 22C."},
        ])
    out = run("--store", str(db), "history", "trip", env={"COLUMNS": "120"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert 'get_weather(city="Lisbon", month="May")  [call_w1]' in text
    assert "function" not in text and '"arguments"' not in text  # no raw JSON
    assert "Weather in [Lisbon]?" in text  # user text is never taken for markup
    assert "(result of call_w1)" in text
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    assert len(blocks) == 4
    assert blocks[0].startswith("#1  Ana (user)") and blocks[2].startswith("#3  tool get_weather (tool)")


def test_long_commands_print_plain_progress_lines_off_a_terminal(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    _seed(db)
    out = run("--store", str(db), "reindex", "--embedder", "hashing")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.strip().splitlines()
    assert "keyword index: 2/2 (100%)" in lines and "vectors: 2/2 (100%)" in lines, out.stderr
    assert not any("\x1b" in line or "━" in line for line in lines)  # no live bar redrawn into a pipe
    bench = run("bench", "write", "--adds", "20", "--history", "1000")
    assert bench.returncode == 0, bench.stderr
    assert bench.stderr.splitlines()[0] == "benchmarking the write path" and len(bench.stderr.splitlines()) > 2


def test_demo_fills_the_configured_store(tmp_path: Path) -> None:
    db = tmp_path / "configured.db"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"memory:\n  storage_path: {db}\n  embedder: hashing\n")
    _seed(db)
    out = run("--config", str(cfg), "demo")
    assert out.returncode == 0, out.stderr
    assert "3 turns remembered across the restart" in out.stdout
    assert "127.0.0.1:8765/#/session/demo-session" in out.stdout
    again = run("--config", str(cfg), "demo")  # a rerun replaces the demo session, nothing else
    assert again.returncode == 0, again.stderr
    sessions = {s["id"]: s["message_count"] for s in json.loads(run("--config", str(cfg), "sessions", "--json").stdout)}
    assert sessions == {"s1": 2, "demo-session": 6}
    env = {"HOME": str(tmp_path / "home"), "MEMLANE_EMBEDDER": "hashing"}
    default = run("demo", env=env)
    assert default.returncode == 0, default.stderr
    listed = run("sessions", "--json", env=env)
    assert [s["id"] for s in json.loads(listed.stdout)] == ["demo-session"]
    assert not (tmp_path / "home" / ".memlane" / "demo.db").exists()


def test_stored_text_in_brackets_is_shown_as_typed(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    with Memory(db, embedder="none") as mem:
        mem.create_session(session_id="plan", title="notes [draft] [bold]x", user_id="[ana]")
        mem.add("plan", "see [link] and [/]")
        mem.add_note("I like [green] tea", user_id="[ana]")
    env = {"COLUMNS": "200"}
    assert "notes [draft] [bold]x" in run("--store", str(db), "sessions", env=env).stdout
    assert "[ana]" in run("--store", str(db), "sessions", env=env).stdout
    assert "see [link] and [/]" in run("--store", str(db), "search", "link", env=env).stdout
    assert "I like [green] tea" in run("--store", str(db), "notes", "list", env=env).stdout
    added = run("--store", str(db), "notes", "add", "call [mum] on sunday", env=env)
    assert "call [mum] on sunday" in added.stdout, added.stderr
