"""Child processes memlane starts itself (a private Valkey, `memlane serve` for a benchmark,
servers in the tests): how to stop one."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[Any], grace: float = 10.0) -> int | None:
    """Ask ``proc`` to stop (SIGTERM), give it ``grace`` seconds to finish cleanly (a server
    closes its store, a database flushes), then kill it; returns its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()  # it had its chance; a hung child must not hang its parent too
    return proc.wait()
