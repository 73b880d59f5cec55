"""`memlane bench serve`: a short run against a real server; every acknowledged message is stored."""

from __future__ import annotations

import json
from pathlib import Path

from memlane.server.bench import run_serve_bench
from tests.server_support import new_key, open_memory, run_cli, running_server


def test_bench_serve_cli_short_run(tmp_path: Path) -> None:
    r = run_cli(["bench", "serve", "--duration", "3", "--clients", "3", "--search-every", "3", "--min-requests", "3",
                 "--embedder", "hashing", "--json"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["errors"] == 0
    assert result["append"]["count"] > 0 and result["search"]["count"] > 0
    assert result["verified"]["acknowledged"] == result["append"]["count"]
    assert result["verified"]["missing"] == 0 and result["verified"]["different"] == 0
    assert result["append"]["p50_ms"] <= result["append"]["p95_ms"]


def test_bench_serve_prints_a_report_unless_asked_for_json(tmp_path: Path) -> None:
    r = run_cli(["bench", "serve", "--duration", "2", "--clients", "2", "--embedder", "hashing"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not r.stdout.lstrip().startswith("{")
    lines = r.stdout.splitlines()
    assert lines[-1] == "result       ok"
    assert any(line.startswith("throughput ") and "requests/s" in line for line in lines)
    assert any(line.startswith("append ") and "p95" in line for line in lines)
    # progress went to stderr, as plain lines: stdout is not a terminal here
    assert "benchmarking the server" in r.stderr and "verifying every acknowledged message" in r.stderr


def test_bench_against_a_running_server_with_a_key(tmp_path: Path) -> None:
    from memlane.server.auth import key_store_for

    mem = open_memory(tmp_path / "bench.db")
    key = new_key(mem, "bench")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:
        result = run_serve_bench(url=url, api_key=key, clients=2, duration=2, search_every=4, min_requests=4)
    assert result["ok"], result
    stored = sum(len(mem.load_session(s.id)) for s in mem.list_sessions(limit=10, tenant_id="bench"))
    assert stored == result["verified"]["acknowledged"] > 0
    mem.close()



def _proc_state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a live process, None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


def test_sigterm_to_the_bench_stops_its_server(tmp_path: Path) -> None:
    # `kill <pid>` of a running bench (or a CI timeout) must not leave `memlane serve` behind.
    import os
    import signal
    import subprocess
    import time

    from tests.server_support import MEMLANE, cli_env

    bench = subprocess.Popen(
        [MEMLANE, "bench", "serve", "--duration", "120", "--clients", "1", "--embedder", "hashing"],
        env=cli_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server_pid: int | None = None
    try:
        deadline = time.monotonic() + 60
        while server_pid is None and time.monotonic() < deadline:
            for entry in Path("/proc").iterdir():
                state = _proc_state(int(entry.name)) if entry.name.isdigit() else None
                if state is not None and state[1] == bench.pid:
                    server_pid = int(entry.name)
            time.sleep(0.2)
        assert server_pid is not None, "the bench never started its server"
        time.sleep(1.0)  # let the clients start, so the signal lands mid-run
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(30) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 20
        # Gone, or a zombie (exited; only a wait is missing), counts as stopped.
        while (state := _proc_state(server_pid)) is not None and state[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state is None or state[0] == "Z", "memlane serve outlived the bench that started it"
    finally:
        if bench.poll() is None:
            bench.kill()
        if server_pid is not None and (left := _proc_state(server_pid)) is not None and left[0] != "Z":
            os.kill(server_pid, signal.SIGKILL)
