"""`memlane eval references`: the scorer on a small fixture, and the shipped EN/DE dev set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane.cli.main import main
from memlane.errors import InvalidInputError
from memlane.eval.references import load_cases, run_references_eval

_OPTS = [{"role": "user", "content": "Der Server ist langsam."},
         {"role": "assistant", "content": "Zwei Möglichkeiten:\n1. Den Dienst mit `systemctl restart app` neu starten\n"
                                          "2. Den Rechner mit `sudo reboot` neu starten\nWas ist dir lieber?"}]
_PARIS = [{"role": "user", "content": "What is the capital of France?"},
          {"role": "assistant", "content": "The capital of France is Paris."}]
FIXTURE = [
    {"id": "a", "language": "de", "category": "ambiguous", "turns": _OPTS, "query": "Mach das",
     "clarify": ["restart app", "reboot"]},
    {"id": "b", "language": "de", "category": "ordinal", "turns": _OPTS, "query": "die zweite", "resolve": ["reboot"]},
    {"id": "c", "language": "en", "category": "locative_time", "turns": _PARIS,
     "query": "How many people live there?", "resolve": ["Paris"]},
    {"id": "d", "language": "de", "category": "impersonal", "turns": _PARIS, "query": "Wie spät ist es?",
     "expect_none": True},
    # Labelled wrongly on purpose: the scorer must count it as a miss.
    {"id": "e", "language": "en", "category": "locative_time", "turns": _PARIS,
     "query": "Which museums are there?", "resolve": ["Berlin"], "split": "held"},
]


def _write(tmp_path: Path, cases: list[dict[str, object]]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    return path


def test_fixture_run_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["eval", "references", str(_write(tmp_path, FIXTURE)), "--json"])
    result = json.loads(capsys.readouterr().out)
    overall = result["figures"]["all"]
    assert overall["cases"] == 5 and overall["correct"] == 4
    assert overall["clarification_precision"] == 1.0 and overall["clarification_recall"] == 1.0
    assert overall["false_positive_rate"] == 0.0
    assert result["figures"]["language:de"]["accuracy"] == 1.0
    assert result["figures"]["category:locative_time/en"]["correct"] == 1
    assert [m["id"] for m in result["misses"]] == ["e"]
    held = run_references_eval(_write(tmp_path, FIXTURE), split="held")
    assert held["figures"]["all"]["cases"] == 1
    with pytest.raises(InvalidInputError, match="this file has: dev, held"):
        run_references_eval(_write(tmp_path, FIXTURE), split="held2")


def test_the_table_names_every_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["eval", "references", str(_write(tmp_path, FIXTURE)), "--misses"])
    out = capsys.readouterr().out
    assert "language:de" in out and "category:ambiguous" in out and "'Which museums are there?'" in out


def test_the_shipped_dev_set_covers_issue_17_and_holds_its_figures() -> None:
    cases = load_cases()
    assert len(cases) >= 200
    assert sum(c.language == "de" for c in cases) * 2 >= len(cases)
    assert {c.category for c in cases} >= {
        "pronoun", "demonstrative", "locative_time", "repetition", "ordinal", "topic_qualified",
        "assistant_item", "confirmation", "negation", "impersonal", "ambiguous", "implicit"}
    assert {c.split for c in cases} == {"dev", "held", "held2", "held3", "held4"}
    held2 = [c for c in cases if c.split == "held2"]
    assert len(held2) >= 60 and sum(c.language == "de" for c in held2) * 2 >= len(held2)
    figures = run_references_eval(None)["figures"]
    for group in ("split:dev", "split:held"):
        assert figures[group]["accuracy"] >= 0.9, (group, figures[group])
        assert figures[group]["clarification_recall"] >= 0.9, (group, figures[group])
    # held2 scored 0.670 before the resolver was changed for its misses; a floor, not a target
    assert figures["split:held2"]["accuracy"] >= 0.9, figures["split:held2"]
    for group in ("split:dev", "split:held", "split:held2"):
        assert figures[group]["false_positive_rate"] <= 0.05, (group, figures[group])
    # held3 is blind (never shown to whoever changed the resolver): 0.592 at 0b5767c, 0.857 at
    # a9a54dc; a floor well under that, so a change that breaks how the fixes generalise fails
    assert figures["split:held3"]["accuracy"] >= 0.8, figures["split:held3"]
    assert figures["split:held3"]["false_positive_rate"] <= 0.15, figures["split:held3"]
    # held4 (everyday domains) scored 0.717 before any change aimed at it (even half 0.750);
    # odd ids tuned on, even held aside - floors, not targets
    held4 = [c for c in cases if c.split == "held4"]
    assert len(held4) >= 100 and sum(c.language == "de" for c in held4) * 2 >= len(held4)
    assert figures["split:held4/odd"]["cases"] + figures["split:held4/even"]["cases"] == len(held4)
    assert figures["split:held4"]["accuracy"] >= 0.9, figures["split:held4"]
    assert figures["split:held4/even"]["accuracy"] >= 0.9, figures["split:held4/even"]
    assert figures["split:held4"]["clarification_recall"] >= 0.9, figures["split:held4"]
    assert figures["split:held4"]["false_positive_rate"] <= 0.15, figures["split:held4"]


def test_bad_case_files_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such file"):
        load_cases(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"language": "fr", "category": "x", "query": "q", "turns": [], "expect_none": true}\n')
    with pytest.raises(InvalidInputError, match="language must be 'en' or 'de'"):
        load_cases(bad)
    bad.write_text('{"language": "en", "category": "x", "query": "q", "turns": []}\n')
    with pytest.raises(InvalidInputError, match="resolve, clarify or expect_none"):
        load_cases(bad)
    bad.write_text("{not json\n")
    with pytest.raises(InvalidInputError, match="not JSON"):
        load_cases(bad)
