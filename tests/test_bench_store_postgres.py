"""`memlane bench store` against a given PostgreSQL, at toy sizes: the JSON it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.server_support import run_cli

pytestmark = pytest.mark.postgres


def test_bench_store_json_has_add_and_search_percentiles(pg_url: str, tmp_path: Path) -> None:
    done = run_cli(
        ["bench", "store", "--store", pg_url, "--messages", "1000", "--adds", "10", "--searches", "10",
         "--json"],
        tmp_path, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["messages"] == 1000 and result["adds"] == 10 and result["searches"] == 10
    assert result["postgres_server"] == "postgresql://..."  # the URL (and password) is not echoed
    assert str(result["postgres_version"]).split(".")[0].isdigit()
    for store in ("sqlite", "postgres"):
        side = result[store]
        for figure in ("memory_add", "store_append", "search_top10"):
            p50, p95 = side[figure]["p50_ms"], side[figure]["p95_ms"]
            assert 0 < p50 <= p95, (store, figure, side[figure])
        # timed adds land on top of the filled log: 10 through Memory, 10 straight to the store
        assert side["stored_messages"] == 1000 + 2 * 10
        assert side["mean_hits"] > 0, f"{store} search found nothing"
    ratio = result["search_ratio"]
    p50s = [result[s]["search_top10"]["p50_ms"] for s in ("sqlite", "postgres")]
    assert ratio["p50"] == pytest.approx(p50s[1] / p50s[0], rel=0.01)
    assert ratio["paired_median"] > 0
    assert len(ratio["load_average_start"]) == 3 and len(ratio["load_average_end"]) == 3


def test_bench_store_reports_the_hnsw_recall_with_an_embedder(pg_url: str, tmp_path: Path) -> None:
    done = run_cli(
        ["bench", "store", "--store", pg_url, "--messages", "1000", "--adds", "10", "--searches", "10",
         "--embedder", "hashing", "--json"],
        tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert 0.5 <= result["postgres"]["hnsw_recall_at_10"] <= 1.0
    assert "hnsw_recall_at_10" not in result["sqlite"]  # SQLite searches its vectors exactly here
