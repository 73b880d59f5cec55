"""`memlane bench serve`: a short run against a real server; every acknowledged message is stored."""

from __future__ import annotations

import json
from pathlib import Path

from memlane.server.bench import run_serve_bench
from tests.server_support import new_key, open_memory, run_cli, running_server


def test_bench_serve_cli_short_run(tmp_path: Path) -> None:
    r = run_cli(["bench", "serve", "--duration", "3", "--clients", "3", "--search-every", "3",
                 "--embedder", "hashing", "--json"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["ok"] and result["errors"] == 0
    assert result["append"]["count"] > 0 and result["search"]["count"] > 0
    assert result["verified"]["acknowledged"] == result["append"]["count"]
    assert result["verified"]["missing"] == 0 and result["verified"]["different"] == 0
    assert result["append"]["p50_ms"] <= result["append"]["p95_ms"]


def test_bench_against_a_running_server_with_a_key(tmp_path: Path) -> None:
    from memlane.server.auth import key_store_for

    mem = open_memory(tmp_path / "bench.db")
    key = new_key(mem, "bench")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:
        result = run_serve_bench(url=url, api_key=key, clients=2, duration=2, search_every=4)
    assert result["ok"], result
    stored = sum(len(mem.load_session(s.id)) for s in mem.list_sessions(limit=10, tenant_id="bench"))
    assert stored == result["verified"]["acknowledged"] > 0
    mem.close()
