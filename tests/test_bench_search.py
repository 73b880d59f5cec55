"""`memlane bench search` end to end with tiny sizes: every figure is there and measured.

The real run (100,000 messages, MiniLM) belongs to `make bench`; this only keeps the command
and its JSON fields working."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from memlane.cli.main import main
from memlane.errors import InvalidInputError

TIMINGS = (
    "search_ms_p50", "search_ms_p95", "search_ms_p50_query_vector_cached", "query_embedding_ms_p50",
    "vector_search_ms_p50", "vector_search_ms_p50_no_filter", "keyword_search_ms_p50",
    "hybrid_ms_p50_expansion_on", "hybrid_ms_p95_expansion_on",
    "hybrid_ms_p50_expansion_off", "hybrid_ms_p95_expansion_off",
)
COMPARED = {"vector_search_ms_p50", "vector_search_ms_p95", "vector_search_ms_p50_no_filter", "load_s", "version"}


def test_bench_search_json_fields(capsys: pytest.CaptureFixture[str]) -> None:
    main(["bench", "search", "--messages", "1000", "--ingest", "20", "--queries", "10",
          "--embedder", "hashing", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["messages"] == 1000 and out["embedder"].startswith("hashing")
    assert out["ingest_msgs_per_s"] > 0 and 8 <= out["ingest_words_per_msg"] <= 22
    # MEMLANE_LOCOMO_DIR points at the fixture conversations (conftest): their turns are the
    # corpus, and ingest is measured on them too, with their (longer) mean length
    assert out["corpus_kind"] == "locomo" and "tests/data/locomo" in out["corpus"]
    assert out["ingest_locomo_turns_msgs_per_s"] > 0 and out["ingest_locomo_turns_words_per_msg"] > 0
    assert all(isinstance(out[k], float) and out[k] >= 0 for k in TIMINGS)
    assert out["search_ms_p50"] > 0 and out["search_ms_p50"] <= out["search_ms_p95"]
    assert out["corpus"] and out["vectors"]

    # numpy brute force over a per-share matrix in RAM, for each share of the corpus
    brute = out["numpy_brute_force"]
    assert set(brute) == {"100%"} and brute["100%"]["rows"] == 1000
    assert 0 <= brute["100%"]["vector_search_ms_p50"] <= brute["100%"]["vector_search_ms_p95"]

    # sqlite-vec's vec0 on the same vectors, as a ratio to memlane's vector index
    vec0 = out["sqlite_vec"]
    if "skipped" in vec0:
        pytest.fail(f"vec0 comparison skipped: {vec0['skipped']} (apsw is in the dev extra)")
    assert set(vec0) == COMPARED and vec0["vector_search_ms_p50"] > 0 and vec0["version"].startswith("v")
    assert out["sqlite_vec_vs_memlane_vector_p50"] == pytest.approx(
        vec0["vector_search_ms_p50"] / max(out["vector_search_ms_p50"], 1e-3), abs=0.01)
    assert out["sqlite_vec_vs_memlane_vector_p50_no_filter"] > 0

    # ChromaDB (the bench extra): measured when installed, else a skip that says how to get it
    chroma = out["chromadb"]
    if importlib.util.find_spec("chromadb") is None:
        assert chroma == {"skipped": "chromadb is not installed: pip install 'memlane[bench]'"}
    else:
        assert set(chroma) == COMPARED and out["chromadb_vs_memlane_vector_p50"] > 0


def test_bench_search_without_conversation_files_says_synthetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMLANE_LOCOMO_DIR", str(tmp_path))  # a directory without any
    main(["bench", "search", "--messages", "2500", "--ingest", "10", "--queries", "10",
          "--embedder", "hashing", "--users", "5", "--no-peers", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["corpus_kind"] == "synthetic" and out["corpus"].startswith("synthetic chat")
    assert not {k for k in out if k.startswith("ingest_locomo")}
    assert out["ingest_msgs_per_s"] > 0 and out["search_ms_p50"] > 0
    assert "sqlite_vec" not in out and "chromadb" not in out  # --no-peers
    # a new process: its first search, then each user share, and its memory
    fresh = out["fresh_process"]
    assert fresh["first_search_ms"] > 0 and fresh["first_search_cold_total_ms"] >= fresh["first_search_ms"]
    # a one-shot process: import, open, then search at once (the model starts during that
    # search); the clock starts before memlane is imported, the interpreter's start apart
    unwarmed = fresh["unwarmed"]
    assert unwarmed["import_ms"] > 0 and unwarmed["first_search_ms"] > 0 and unwarmed["interpreter_start_ms"] > 0
    parts = unwarmed["import_ms"] + unwarmed["open_ms"] + unwarmed["first_search_ms"]
    assert abs(unwarmed["total_ms"] - parts) <= 1
    assert len(unwarmed["total_ms_runs"]) == 3 and sorted(unwarmed["total_ms_runs"])[1] == unwarmed["total_ms"]
    headline = out["first_search_fresh_process"]
    assert headline["total_ms"] == unwarmed["total_ms"] and headline["model_start_ms"] == fresh["model_start_ms"]
    assert set(fresh["by_share"]) == {"1%", "10%", "100%"}
    assert fresh["by_share"]["1%"]["filter"] == {"user_id": "user-001"}
    assert all(0 < s["search_ms_p50"] <= s["search_ms_p95"] for s in fresh["by_share"].values())
    assert all(0 < s["search_ms_p50_query_vector_cached"] <= s["search_ms_p95_query_vector_cached"]
               for s in fresh["by_share"].values())
    # the headline: hybrid p50/p95 per share, labelled, the fresh process's figures
    assert out["hybrid_search_by_share"] == {
        share: {"p50_ms": s["search_ms_p50"], "p95_ms": s["search_ms_p95"]} for share, s in fresh["by_share"].items()
    }
    memory = fresh["memory_after_searches"]
    assert memory["rss_mb"] > 0 and memory["rss_peak_mb"] >= memory["rss_mb"]


def test_bench_search_share_owners() -> None:
    from memlane.bench_search import owner, share_filters

    owners = [owner(s, 100) for s in range(1000)]
    assert owners.count("user-001") == 10 and owners.count("user-010") == 100
    assert len(set(owners)) == 100
    assert share_filters(1) == {"100%": {"user_id": "bench-user"}}
    with pytest.raises(InvalidInputError, match="at least 3"):
        share_filters(2)


def test_bench_search_prints_figures_for_people_without_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMLANE_LOCOMO_DIR", str(tmp_path))
    main(["bench", "search", "--messages", "1000", "--ingest", "10", "--queries", "10", "--embedder", "hashing"])
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{")
    figures = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert figures["messages"] == "1000" and float(figures["search_ms_p50"]) > 0
    assert "sqlite_vec.vector_search_ms_p50" in figures  # nested figures keep their path


def test_bench_search_vectors_only_times_the_index_alone(capsys: pytest.CaptureFixture[str]) -> None:
    main(["bench", "search", "--vectors-only", "--messages", "2500", "--users", "5", "--queries", "10", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["messages"] == 2500 and out["vectors"].startswith("synthetic")
    assert out["first_search_after_load_s"] > 0
    fresh = out["fresh_process"]
    assert set(fresh["by_share"]) == {"1%", "10%", "100%"}
    assert all(0 < s["vector_search_ms_p50"] <= s["vector_search_ms_p95"] for s in fresh["by_share"].values())
    assert fresh["memory_after_searches"]["rss_mb"] > 0
    for share in fresh["by_share"].values():  # 2,500 rows: below ivf.ANN_ABOVE, so exact
        assert share["recall_at_10_vs_exact"] == share["recall_at_100_vs_exact"] == 1.0
