"""The README's commands, run verbatim as a newcomer types them: in a fresh shell (no memlane
on PATH, no ~/.memlane), in a checkout whose .venv `make` has set up.

Every line of every ```sh block runs, in order, in one shell, except the few named in
NOT_RUN with the reason and the test that covers them instead.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.server_support import REPO

README = REPO / "README.md"
MARK = "@@readme@@ "

#: commands not run here, each with why and where it is covered
NOT_RUN = {
    "make run": "serves on the fixed port 8765 until stopped; `memlane serve --port 0` (what it runs) is "
                "tested in test_server*.py and test_inspector.py",
    "make test": "this test runs inside it",
    "memlane bench write": "a benchmark over 100,000 messages; test_cli.py::test_bench_write_reports_ratios "
                           "runs the same command at a small size",
    "memlane bench cold": "10 rounds of fresh processes beside the Agents SDK; "
                          "test_cold_start.py::test_bench_cold_reports_figures_ratios_and_targets runs it with --runs 1",
    "memlane bench erase": "two stores of 10,000 and 100,000 messages; "
                           "test_erase.py::test_bench_erase_reports_both_store_sizes runs it at a small size",
}
#: the examples/ programs: tests/acceptance/test_examples.py runs each (some need a chat model on 127.0.0.1,
#: which that test starts), so here they are only checked to exist
EXAMPLES = re.compile(r"^(cd examples|python (\w+\.py)\b.*)$")

#: what some commands must print, beyond exiting 0
EXPECT = {
    "memlane demo": "3 turns remembered across the restart",
    "memlane history demo-session": "vegetarian",
    "memlane search \"vegetarian food\"": "vegetarian",
    "memlane keys revoke support-bot": "revoked key",
}


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def shell_commands() -> list[str]:
    out = []
    for block in blocks("sh"):
        for line in block.splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if command:
                out.append(command)
    return out


def fresh_shell_env(home: Path) -> dict[str, str]:
    """A new login's environment: nothing of memlane's, no virtualenv active, our HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p + "/")
    env.update(HOME=str(home), COLUMNS="160")
    return env


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory that looks like the checkout after `make`: its .venv (a link to this one's)."""
    if not (REPO / ".venv" / "bin" / "memlane").exists():
        pytest.fail("run `make install` first: the README's commands need .venv/bin/memlane")
    work = tmp_path / "memlane"
    work.mkdir()
    (work / ".venv").symlink_to(REPO / ".venv")
    return work


def test_the_readme_names_how_to_reach_memlane() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):text.index("## Use it from Python")]
    assert "source .venv/bin/activate" in quick and ".venv/bin/memlane" in quick and "memlane demo" in quick
    python = text[text.index("## Use it from Python"):].split("```python")[0]
    assert ".venv/bin/python" in python and "source .venv/bin/activate" in python
    cli = text[text.index("## Command line"):].split("```sh")[0]
    assert ".venv/bin/memlane" in cli and "source .venv/bin/activate" in cli


def test_every_shell_command_in_the_readme_works_verbatim(tmp_path: Path, checkout: Path) -> None:
    commands = shell_commands()
    assert set(NOT_RUN) <= set(commands), f"NOT_RUN names commands the README no longer has: {NOT_RUN}"
    for command in commands:
        for program in re.findall(r"python (\w+\.py)", command):
            assert (REPO / "examples" / program).exists(), command
    to_run = [c for c in commands if c not in NOT_RUN and not EXAMPLES.match(c)]
    first_memlane = next(i for i, c in enumerate(to_run) if c.startswith("memlane"))
    assert "source .venv/bin/activate" in to_run[:first_memlane], "memlane is used before the README activates .venv"
    env = fresh_shell_env(tmp_path / "home")
    fresh = subprocess.run(["bash", "-c", "command -v memlane"], env=env, cwd=checkout, capture_output=True)
    assert fresh.returncode != 0, "this shell is not fresh: memlane is already on PATH"

    script = "set -o pipefail\n"
    for command in to_run:
        script += f"echo {shlex.quote(MARK + command)}\n"
        script += f"{command} || {{ echo {shlex.quote('FAILED: ' + command)} >&2; exit 1; }}\n"
    result = subprocess.run(["bash", "-c", script], env=env, cwd=checkout, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, f"{result.stderr[-3000:]}\n--- stdout ---\n{result.stdout[-3000:]}"
    printed = [part.partition("\n")[::2] for part in result.stdout.split(MARK)[1:]]  # (command, its output)
    assert [command for command, _ in printed] == to_run
    for command, output in printed:
        if command in EXPECT:
            assert EXPECT[command] in output, f"{command!r} printed:\n{output}"
    assert "error" not in result.stderr.lower(), result.stderr


def test_the_python_quick_example_runs(tmp_path: Path, checkout: Path) -> None:
    first, multimodal = blocks("python")[:2]
    assert first.startswith("from memlane import Memory") and "mem.add_messages(sid" in multimodal
    result = subprocess.run([".venv/bin/python", "-c", first + multimodal], env=fresh_shell_env(tmp_path / "home"),
                            cwd=checkout, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
