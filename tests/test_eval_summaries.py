"""The LoCoMo loader and the ROUGE evaluation of session summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlane.errors import InvalidInputError, MissingExtraError
from memlane.eval.locomo_data import (
    LocomoConversation,
    load_conversation,
    load_locomo,
    locomo_files,
    parse_locomo_datetime,
)
from memlane.eval.summaries import evaluate_summaries, lead_summary, run_summaries_eval
from tests.conftest import SHORT_CONVERSATION

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def small_file() -> Path:
    return SHORT_CONVERSATION  # 5 sessions, 98 turns, a date key with no session


# -------------------------------------------------------------------- loader


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2023", datetime(2023, 1, 1, 12, 30, tzinfo=UTC)),
        ("10:04 AM on 19 Dec, 2022", datetime(2022, 12, 19, 10, 4, tzinfo=UTC)),
        ("8 May 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("May 8, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_parse_locomo_datetime(text: str, expected: datetime) -> None:
    assert parse_locomo_datetime(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "1:56 pm on 31 February, 2023", "13:00 pm on 8 May, 2023"])
def test_parse_locomo_datetime_rejects_bad_dates(text: str) -> None:
    with pytest.raises(InvalidInputError, match="LoCoMo date"):
        parse_locomo_datetime(text)


def test_load_conversation(small_file: Path) -> None:
    conv = load_conversation(small_file)
    assert (conv.sample_id, conv.speakers) == ("workshop", ("Priya", "Jonas"))
    assert "session_6_date_time" in json.loads(small_file.read_text())
    assert [s.index for s in conv.sessions] == list(range(1, 6))  # dangling date keys ignored
    assert sum(len(s.turns) for s in conv.sessions) == 98
    first = conv.sessions[0]
    assert first.date_time == datetime(2023, 9, 7, 14, 25, tzinfo=UTC)
    assert first.summary and first.summary.startswith("On 7 September, 2023 at 2:25 pm, Priya told Jonas")
    assert set(first.speakers()) == {"Priya", "Jonas"}
    assert all(s.summary for s in conv.sessions)
    turn = first.turns[0]
    assert turn.dia_id == "D1:1" and turn.speaker in conv.speakers and turn.text
    with_image = next(t for _s, t in conv.iter_turns() if t.blip_caption)
    assert with_image.img_urls and with_image.as_text().endswith(f"[shares {with_image.blip_caption}]")
    assert with_image.as_text(include_caption=False) == with_image.text
    answerable = [q for q in conv.qa if q.answerable and q.evidence]
    assert len(answerable) == 42
    assert [q.adversarial_answer for q in conv.qa if not q.answerable] == ["two"]
    known = conv.turns_by_id()
    assert all(e in known for q in answerable for e in q.evidence)
    assert conv.turn("D1:1") == turn
    with pytest.raises(KeyError):
        conv.turn("D99:1")
    assert first.observations and all(isinstance(f, tuple) for facts in first.observations.values() for f in facts)


def test_session_messages(small_file: Path) -> None:
    conv = load_conversation(small_file)
    session = conv.sessions[0]
    messages = conv.session_messages(session)
    assert len(messages) == len(session.turns)
    assert {m.author_name for m in messages} <= {"Priya", "Jonas"}
    assert all(m.role == ("user" if m.author_name == conv.speaker_a else "assistant") for m in messages)
    assert all(m.created_at == session.date_time for m in messages)
    assert [m.metadata["dia_id"] for m in messages] == [t.dia_id for t in session.turns]
    assert messages[0].session_id == "workshop:session_1"
    captioned = [m for m in messages if "image_caption" in m.metadata]
    assert all(m.metadata["image_caption"] not in m.content for m in captioned)
    with_captions = conv.session_messages(session, include_caption=True, session_id="s")
    assert all(m.session_id == "s" for m in with_captions)


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """The original locomo10.json layout of one sample."""
    conversation = {
        k: v for k, v in flat.items() if k.startswith(("speaker_", "session_")) and not k.endswith(("summary", "observation"))
    }
    return {
        "sample_id": "conv-workshop",
        "conversation": conversation,
        "qa": flat["qa"],
        "session_summary": {k: v for k, v in flat.items() if k.endswith("_summary")},
        "observation": {k: v for k, v in flat.items() if k.endswith("_observation")},
        "event_summary": {k: v for k, v in flat.items() if k.startswith("events_")},
    }


def test_locomo10_layout_loads_the_same(small_file: Path, tmp_path: Path) -> None:
    flat = json.loads(small_file.read_text())
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([_nested(flat), _nested(flat)]))
    convs = load_locomo(path)
    assert len(convs) == 2 and convs[0].sample_id == "conv-workshop"
    reference = load_conversation(small_file)
    for conv in convs:
        assert conv.sessions == reference.sessions
        assert conv.qa == reference.qa
    with pytest.raises(InvalidInputError, match="holds 2 conversations"):
        load_conversation(path)


def test_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_locomo(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="cannot read"):
        load_locomo(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(InvalidInputError, match="speaker_a"):
        load_locomo(other)
    assert locomo_files(tmp_path / "nowhere") == []


# ---------------------------------------------------------------- evaluation


def test_evaluate_one_file_beats_lead(small_file: Path) -> None:
    result = evaluate_summaries([small_file])
    assert set(result) == {"memlane", "lead", "sessions"}
    assert result["sessions"] == 5
    for name in ("memlane", "lead"):
        assert set(result[name]) == {"rouge1", "rouge2", "rougeL"}
        assert all(0.0 <= v <= 1.0 for v in result[name].values())
    for metric in ("rouge1", "rouge2", "rougeL"):
        # A clear margin, not a tie.
        assert result["memlane"][metric] > result["lead"][metric] + 0.04, (metric, result)


def test_lead_baseline_has_the_requested_length(small_file: Path) -> None:
    conv: LocomoConversation = load_conversation(small_file)
    session = conv.sessions[0]
    lead = lead_summary(conv, session, 25)
    assert len(lead.split()) == 25
    assert lead.startswith(f"{session.turns[0].speaker}: ")
    assert len(lead_summary(conv, session, 100_000).split()) < 100_000


def test_run_summaries_eval_json_and_table(small_file: Path) -> None:
    as_json = json.loads(run_summaries_eval([small_file], as_json=True))
    assert as_json == evaluate_summaries([small_file])
    table = run_summaries_eval([small_file], as_json=False)
    assert "ROUGE-1" in table and "ROUGE-L" in table and "lead" in table and "5 sessions" in table
    assert f"{as_json['memlane']['rouge2']:.4f}" in table


def test_eval_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="at least one"):
        evaluate_summaries([])
    path = tmp_path / "nosummary.json"
    path.write_text(
        json.dumps(
            {
                "speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:00 pm on 1 May, 2023",
                "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "I like tea."}], "qa": [],
            }
        )
    )
    with pytest.raises(InvalidInputError, match="no session with a gold summary"):
        evaluate_summaries([path])


def test_missing_rouge_gives_a_clear_error(small_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import rouge_score` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "rouge_score", None)
    with pytest.raises(MissingExtraError, match=r"rouge-score.*pip install 'memlane\[dev\]'"):
        evaluate_summaries([small_file])


def test_cli_eval_summaries(small_file: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "memlane.cli.main", "eval", "summaries", str(small_file), "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["sessions"] == 5 and data["memlane"]["rouge1"] > data["lead"]["rouge1"]
    # a path longer than a terminal line: the error is still one line, whole
    nowhere = tmp_path / ("deep-" * 20) / "nope.json"
    missing = subprocess.run(
        [sys.executable, "-m", "memlane.cli.main", "eval", "summaries", str(nowhere)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert missing.returncode != 0
    assert missing.stderr == f"error: LoCoMo file {nowhere} does not exist\n"
