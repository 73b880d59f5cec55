"""`memlane eval locomo`: the JSON contract, and hybrid recall beating either part alone, on the
LoCoMo-format fixture conversation (tests/data/locomo; the real LoCoMo data is for `make bench`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane.cli.main import main
from memlane.eval.locomo import Scores, conversation_messages, questions
from memlane.eval.locomo_data import load_conversation

METRICS = {"recall@1", "recall@5", "recall@10", "recall@20", "hit@5"}


def test_scores_are_shares_of_evidence() -> None:
    s = Scores()
    s.add(["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6"], ["D1:1", "D1:6"])
    s.add(["D2:1"], ["D9:9"])
    d = s.as_dict()
    assert d["recall@1"] == 0.25 and d["recall@5"] == 0.25 and d["recall@10"] == 0.5
    assert d["hit@5"] == 0.5


def test_ingest_keeps_speaker_date_caption_and_dia_id(locomo_files: list[Path]) -> None:
    conv = load_conversation(locomo_files[0])
    sessions = conversation_messages(conv)
    first = sessions[0][1][0]
    assert first["author_name"] == conv.sessions[0].turns[0].speaker
    assert first["metadata"]["dia_id"] == conv.sessions[0].turns[0].dia_id
    assert first["created_at"].date() == conv.sessions[0].date_time.date()  # type: ignore[union-attr]
    captioned = [m for _, msgs in sessions for m in msgs if "[image: " in m["content"]]
    assert captioned, "image captions are kept as text"
    qs = questions(conv)
    assert qs and all(q.category in (1, 2, 3, 4) and q.evidence for q in qs)


def test_eval_json_on_one_conversation_with_minilm(
    locomo_files: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # the long conversation: 57 questions, capped at 40
    main(["eval", "locomo", str(locomo_files[0]), "--json", "--max-questions", "40"])
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {
        "overall", "by_category", "baselines", "gain", "questions", "ingest_msgs_per_s",
        "search_ms_p50", "search_ms_p95", "split", "parts",
    }
    assert set(out["overall"]) == METRICS
    assert set(out["baselines"]) == {"keyword", "semantic"}
    assert all(set(b) == METRICS for b in out["baselines"].values())
    assert out["by_category"] and set(out["by_category"]) <= {"1", "2", "3", "4"}
    assert all(c["questions"] > 0 and set(c) == {*METRICS, "questions", "name"} for c in out["by_category"].values())
    assert sum(c["questions"] for c in out["by_category"].values()) == 40
    assert out["questions"] == 40
    for mode in ("keyword", "semantic"):
        for metric in METRICS:
            base = out["baselines"][mode][metric]
            expected = round(out["overall"][metric] / base, 3) if base else None
            assert out["gain"][mode][metric] == expected
    assert out["gain"]["keyword"]["recall@10"] > 1 and out["gain"]["semantic"]["recall@10"] > 1
    assert out["ingest_msgs_per_s"] > 0 and 0 < out["search_ms_p50"] <= out["search_ms_p95"]
    # the point of the fusion: better than either part alone
    assert out["overall"]["recall@10"] > out["baselines"]["keyword"]["recall@10"]
    assert out["overall"]["recall@10"] > out["baselines"]["semantic"]["recall@10"]
    assert out["overall"]["recall@5"] > out["baselines"]["keyword"]["recall@5"]


def test_skipped_baseline_is_null_not_zero(locomo_files: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Without vectors there is no semantic baseline: null, not a score of 0."""
    smallest = min(locomo_files, key=lambda p: p.stat().st_size)
    main(["eval", "locomo", str(smallest), "--json", "--max-questions", "20", "--embedder", "none"])
    out = json.loads(capsys.readouterr().out)
    assert out["baselines"]["semantic"] is None and out["gain"]["semantic"] is None
    assert set(out["baselines"]["keyword"]) == METRICS and set(out["gain"]["keyword"]) == METRICS
    main(["eval", "locomo", str(smallest), "--max-questions", "20", "--embedder", "none"])
    table = capsys.readouterr().out
    assert "semantic only" in table and "skipped" in table and "gain vs keyword" in table


def test_split_parts_each_report_categories_and_latency(
    locomo_files: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Both fixture conversations in one run: one tunes, the other is held aside; the totals
    are the two parts together, and --split b swaps which is which."""
    args = ["eval", "locomo", *map(str, reversed(locomo_files)), "--embedder", "hashing"]
    main([*args, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["split"] == {"name": "a", "tune": ["harbour"], "held": ["workshop"]}  # sample-id order
    tune, held = out["parts"]["tune"], out["parts"]["held"]
    assert tune["questions"] > 0 and held["questions"] > 0
    assert tune["questions"] + held["questions"] == out["questions"]
    for figures in (tune, held):
        assert set(figures) == {"overall", "by_category", "questions", "search_ms_p50", "search_ms_p95"}
        assert 0 < figures["search_ms_p50"] <= figures["search_ms_p95"]
        assert sum(c["questions"] for c in figures["by_category"].values()) == figures["questions"]
    for cat, total in out["by_category"].items():  # the totals are the parts added up
        parts = [p["by_category"][cat] for p in (tune, held) if cat in p["by_category"]]
        assert sum(p["questions"] for p in parts) == total["questions"]
        mean = sum(p["recall@10"] * p["questions"] for p in parts) / total["questions"]
        assert abs(mean - total["recall@10"]) < 1e-3
    main([*args, "--json", "--split", "b", "--part", "held"])
    swapped = json.loads(capsys.readouterr().out)
    assert swapped["split"] == {"name": "b", "tune": ["workshop"], "held": ["harbour"]}
    assert set(swapped["parts"]) == {"held"}
    assert swapped["parts"]["held"]["overall"] == tune["overall"] == swapped["overall"]
    main([*args, "--part", "tune"])
    table = capsys.readouterr().out
    assert "tune (harbour)" in table and "held (" not in table and "tune: search p50" in table


def test_unknown_split_or_part_says_what_to_use(locomo_files: list[Path]) -> None:
    from memlane.errors import InvalidInputError
    from memlane.eval.locomo import evaluate

    with pytest.raises(InvalidInputError, match="use one of a, b"):
        evaluate(locomo_files[:1], embedder="hashing", split="c")
    with pytest.raises(InvalidInputError, match="use one of all, tune, held"):
        evaluate(locomo_files[:1], embedder="hashing", part="both")
    with pytest.raises(InvalidInputError, match="no 'held' conversation"):
        evaluate(locomo_files[:1], embedder="hashing", part="held")
