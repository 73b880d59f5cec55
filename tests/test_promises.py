"""German promises open loops as English ones do (issue 17): the assistant says what it
will do in the present tense with a time ahead ("Ich schicke dir morgen ..."), and a
later completion closes the loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane import Memory
from memlane.cli.main import main
from memlane.errors import InvalidInputError
from memlane.eval.promises import opens_promise, run_promises_eval
from memlane.state.language import is_promise


@pytest.mark.parametrize("text", [
    "Ich schicke dir morgen die Zusammenfassung per Mail.",
    "Das prüfe ich gleich.",
    "Mache ich sofort.",
    "Ich gebe dir Bescheid, sobald das Update durch ist.",
    "I'm sending you the report in an hour.",
    "I'll check the logs.",
])
def test_commitments_are_promises(text: str) -> None:
    assert is_promise(text) and opens_promise(text)


@pytest.mark.parametrize("text", [
    "Ich habe dir gestern die Datei geschickt.",  # the past
    "Du schickst mir morgen die Zugangsdaten.",  # someone else's plan
    "Ich habe morgen leider keine Zeit.",  # a state, not an act
    "Ich wusste nicht, dass das Update morgen kommt.",  # the time is in another clause
    "Soll ich dir morgen die Zusammenfassung schicken?",  # an offer asked
    "Das Backup läuft jede Nacht um zwei Uhr.",  # a schedule
    "I'm not available tonight.",
])
def test_statements_and_offers_are_not(text: str) -> None:
    assert not is_promise(text) and not opens_promise(text)


def test_a_german_promise_opens_a_loop_and_its_completion_closes_it(mem: Memory) -> None:
    sid = mem.create_session(user_id="u")
    mem.store_interaction("Danke für die Hilfe heute.", "Gern! Ich schicke dir morgen die Zusammenfassung.",
                          session_id=sid)
    st = mem.get_state(sid)
    assert [lp.kind for lp in st.loops] == ["promise"]
    assert st.last_response_type == "action"
    mem.store_interaction("Hast du an die Zusammenfassung gedacht?",
                          "Erledigt: die Zusammenfassung ist in deinem Postfach.", session_id=sid)
    assert [lp.kind for lp in mem.get_state(sid).loops] == []


def test_promises_eval_on_a_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        {"id": "a", "text": "Ich rufe dich später zurück.", "language": "de", "promise": True},
        {"id": "b", "text": "Ich bin heute Abend nicht erreichbar.", "language": "de", "promise": False},
        {"id": "c", "text": "I'll call you back later.", "language": "en", "promise": True, "split": "held"},
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    result = run_promises_eval(path)
    assert result["figures"]["de"] == {"cases": 2, "precision": 1.0, "recall": 1.0, "accuracy": 1.0}
    assert result["figures"]["split:held"]["cases"] == 1 and result["misses"] == []
    main(["eval", "promises", str(path), "--json"])
    assert json.loads(capsys.readouterr().out)["figures"]["all"]["cases"] == 3
    path.write_text(json.dumps({"text": "x", "language": "fr", "promise": True}) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="language"):
        run_promises_eval(path)
