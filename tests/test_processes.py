"""memlane.processes.stop_process: the one way memlane stops a child it started (a private
Valkey, a benchmark's `memlane serve`, the tests' servers)."""

from __future__ import annotations

import signal
import subprocess
import sys

from memlane.processes import stop_process

_CHILD = """
import signal, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""


def _child(kind: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, kind], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"  # its handler is set
    return proc


def test_a_child_that_stops_on_sigterm_is_not_killed() -> None:
    proc = _child("polite")
    assert stop_process(proc) == -signal.SIGTERM
    assert stop_process(proc) == -signal.SIGTERM  # stopping a stopped child only reports it


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = _child("stubborn")
    assert stop_process(proc, grace=0.5) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL
