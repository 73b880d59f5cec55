"""`memlane eval topics` and the topic-change detector, English and German."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane.cli.main import main
from memlane.errors import InvalidInputError
from memlane.eval.topics import run_topics_eval
from memlane.state.topic_shift import content_stems, is_topic_change, shift_signals

_CONV = [
    {"id": "de", "language": "de", "split": "dev", "turns": [
        {"role": "user", "content": "Wie lange backe ich einen Apfelkuchen?"},
        {"role": "assistant", "content": "Etwa 45 Minuten bei 180 Grad."},
        {"role": "user", "content": "Welche Äpfel nehme ich für den Kuchen?", "switch": False},
        {"role": "assistant", "content": "Boskoop oder Elstar."},
        {"role": "user", "content": "Wer hat die letzte Fußball-WM gewonnen?", "switch": True},
        {"role": "assistant", "content": "Argentinien."},
        {"role": "user", "content": "Wie aktiviere ich die Firewall ufw unter Ubuntu?", "switch": True},
    ]},
    {"id": "en", "language": "en", "split": "held", "turns": [
        {"role": "user", "content": "How long should I bake an apple pie?"},
        {"role": "assistant", "content": "About 45 minutes at 190 degrees."},
        {"role": "user", "content": "Which apples are best for the pie filling?", "switch": False},
        {"role": "assistant", "content": "Tart ones like Granny Smith."},
        {"role": "user", "content": "Who won the last football World Cup?", "switch": True},
    ]},
]


def test_german_compounds_and_stems_meet() -> None:
    assert content_stems("Datenbanken sichern") & content_stems("die Datenbank")
    recent = ["Wie lange backe ich einen Apfelkuchen?", "Etwa 45 Minuten bei 180 Grad."]
    assert not is_topic_change("Welche Äpfel nehme ich für den Kuchen?", recent, None)
    assert is_topic_change("Wer hat die letzte Fußball-WM gewonnen?", recent, None)
    assert not is_topic_change("Ist ein ETF dafür gut?", recent, None)  # "dafür" refers back


def test_german_rewording_is_compared_through_its_english_gloss() -> None:
    from memlane.search.embedders import get_embedder

    embedder = get_embedder("minilm")
    recent = ["Wer hat die letzte Fußball-WM gewonnen?", "Argentinien hat die WM 2022 in Katar gewonnen."]
    follow_up = "War Messi der beste Spieler des Turniers?"  # no stem shared, same topic
    assert is_topic_change(follow_up, recent, None)  # stems alone split here
    signals = shift_signals(follow_up, recent, embedder)
    assert not signals.shared_stems and signals.gloss_cosine is not None
    assert signals.gloss_cosine > signals.best_cosine  # MiniLM reads the gloss, not the German
    assert not is_topic_change(follow_up, recent, embedder)
    assert is_topic_change("Wie aktiviere ich die Firewall unter Ubuntu?", recent, embedder)


def test_fixture_run_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "topics.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in _CONV), encoding="utf-8")
    main(["eval", "topics", str(path), "--embedder", "minilm", "--json"])
    result = json.loads(capsys.readouterr().out)
    now = result["figures"]["combined"]
    assert now["all"]["switches"] == 3 and now["all"]["continuations"] == 2
    assert now["language:de"]["recall"] == 1.0 and now["language:de"]["precision"] == 1.0
    assert now["language:en"]["recall"] == 1.0
    # The detector before issue 17 (MiniLM cosine alone) never fired in German.
    assert result["figures"]["embedding"]["language:de"]["recall"] == 0.0
    main(["eval", "topics", str(path), "--embedder", "none"])
    assert "language:de" in capsys.readouterr().out


def test_the_shipped_set_is_big_enough_and_german_works_like_english() -> None:
    result = run_topics_eval(embedder="none")  # stems only: no model needed for this check
    stems = result["figures"]["stems"]
    assert stems["all"]["switches"] >= 60 and stems["all"]["continuations"] >= 60
    assert stems["split:held2"]["switches"] >= 16 and stems["split:held2"]["continuations"] >= 24
    # held2 (written after the detector) rewords far more often; it is reported, not gated
    for group in ("split:dev/de", "split:dev/en", "split:held/de", "split:held/en"):
        assert stems[group]["precision"] >= 0.85 and stems[group]["recall"] >= 0.85, stems[group]


def test_bad_files_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no such file"):
        run_topics_eval(tmp_path / "none.jsonl", embedder="none")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"language": "fr", "turns": []}\n')
    with pytest.raises(InvalidInputError, match="language"):
        run_topics_eval(bad, embedder="none")


def test_eval_response_cache_calibrates_on_tune_and_reports_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pairs = [
        {"id": "1", "language": "en", "split": "tune", "kind": "para", "same": True,
         "a": "How do I restart nginx?", "b": "What's the command to restart nginx?"},
        {"id": "2", "language": "en", "split": "tune", "kind": "diff", "same": False,
         "a": "How do I restart nginx?", "b": "How do I install nginx on Debian?"},
        {"id": "3", "language": "en", "split": "held", "kind": "near", "same": False,
         "a": "How do I enable the firewall?", "b": "How do I disable the firewall?"},
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in pairs) + "\n", encoding="utf-8")
    main(["eval", "response-cache", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    different = result["cosines"]["diff"][0]
    assert result["calibrated"]["en"] > different  # never takes the tune split's different question
    assert result["figures"]["held/en"]["wrong"] == 0  # the minimal pair is refused at any cosine
    path.write_text('{"a": "x"}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="a pair needs"):
        from memlane.eval.response_cache import run_response_cache_eval
        run_response_cache_eval(path)
