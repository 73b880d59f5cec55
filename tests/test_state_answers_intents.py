"""Short answers close open loops, deferrals become promises, and the tracker infers a
coarse intent when the caller gives none (English and German).

Real Memory on a SQLite file under tmp_path; each test asserts the state after
concrete turns.
"""

from __future__ import annotations

import pytest

from memlane import Memory
from memlane.state import language as lang
from memlane.state.tracker import rebuild_state

# ---------------------------------------------------------------- short answers


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("How long will it take?", "About 10 minutes."),
        ("Wie lange dauert das?", "Etwa 10 Minuten."),
        ("Is the backup encrypted?", "Yes."),
        ("Ist das Backup verschlüsselt?", "Nein."),
        ("Which port does it use?", "443."),
    ],
)
def test_short_answer_in_the_same_turn_closes_the_question(
    mem: Memory, question: str, answer: str
) -> None:
    sid = mem.create_session()
    mem.store_interaction(question, answer, session_id=sid)
    st = mem.get_state(sid)
    assert st.open_loops == []
    assert mem.context(sid).open_loops == []


def test_short_answer_as_the_next_assistant_message_closes_the_question(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add(sid, "How long will it take?")
    assert mem.get_state(sid).open_loops == ["How long will it take?"]
    mem.add(sid, "About 10 minutes.", role="assistant")
    assert mem.get_state(sid).open_loops == []

    mem.add(sid, "Wie lange dauert das?")
    mem.add(sid, "Etwa 10 Minuten.", role="assistant")
    assert mem.get_state(sid).open_loops == []


@pytest.mark.parametrize(
    ("question", "deferral"),
    [
        ("How long will it take?", "I'll check."),
        ("How long will it take?", "Let me check."),
        ("Wie lange dauert das?", "Ich schaue nach."),
        ("Wie lange dauert das?", "Moment, ich sehe nach."),
    ],
)
def test_deferral_keeps_the_question_as_a_promise(
    mem: Memory, question: str, deferral: str
) -> None:
    sid = mem.create_session()
    mem.store_interaction(question, deferral, session_id=sid)
    st = mem.get_state(sid)
    # One loop per request: the deferred question is now one the assistant owes.
    assert [(lp.kind, lp.text) for lp in st.loops] == [("promise", question)]
    assert mem.context(sid).open_loops == [question]


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        # Asked back: a clarification, the question is still owed.
        ("How long will it take?", "Do you mean the full backup or the incremental one?"),
        ("Wie lange dauert das?", "Meinst du die volle Sicherung oder die inkrementelle?"),
        # A clarification request after a statement still defers the answer.
        ("How long will it take?", "That depends. Which server do you mean?"),
        # The assistant changes the subject.
        ("How long will it take?", "By the way, your certificate expires tomorrow."),
        ("Wie lange dauert das?", "Übrigens läuft dein Zertifikat morgen ab."),
        # Acknowledgements say nothing.
        ("How long will it take?", "Okay."),
        ("Wie lange dauert das?", "Hmm, gute Frage."),
    ],
)
def test_questions_without_an_answer_stay_open(mem: Memory, question: str, reply: str) -> None:
    sid = mem.create_session()
    mem.store_interaction(question, reply, session_id=sid)
    assert mem.get_state(sid).open_loops == [question]


def test_aside_still_closes_an_older_question_it_names(mem: Memory) -> None:
    sid = mem.create_session()
    mem.store_interaction(
        "Is the nightly backup encrypted?", "Which backup do you mean?", session_id=sid
    )
    mem.store_interaction("How long does the cleanup take?", "Let me check.", session_id=sid)
    mem.store_interaction(
        "Any news?",
        "By the way, the nightly backup is encrypted with GPG.",
        session_id=sid,
    )
    texts = mem.get_state(sid).open_loops
    assert "Is the nightly backup encrypted?" not in texts  # named: answered
    assert "How long does the cleanup take?" in texts
    assert "Any news?" in texts  # the aside answers what it names, not the new question


# ---------------------------------------------------------------- intents


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("How long will it take?", "question"),
        ("Wie lange dauert das?", "question"),
        ("Restart nginx on web-01.", "command"),
        ("Starte bitte den Server neu.", "command"),
        ("Can you check the disk usage?", "command"),
        ("Kannst du die Logs prüfen?", "command"),
        ("Mach das nochmal", "command"),
        ("yes", "confirmation"),
        ("ja setze deinen Vorschlag um", "confirmation"),
        ("Ja, mach weiter.", "confirmation"),
        ("no, that's wrong", "negation"),
        ("Nein, das ist falsch.", "negation"),
        ("Never mind, forget it.", "negation"),
        ("Thanks!", "smalltalk"),
        ("Guten Morgen!", "smalltalk"),
        ("No problem, thanks", "smalltalk"),
        ("Remember that my server is called db-1.", "memory_command"),
        ("Merk dir, dass ich Max heiße.", "memory_command"),
        ("Remind me tomorrow to renew the certificate.", "memory_command"),
        ("My server is down since this morning.", "statement"),
        ("Der Server ist seit heute Morgen weg.", "statement"),
    ],
)
def test_infer_intent(text: str, intent: str) -> None:
    assert lang.infer_intent(text) == intent
    assert intent in lang.INTENTS


def test_state_infers_intent_but_the_caller_wins(mem: Memory) -> None:
    sid = mem.create_session()
    mem.store_interaction("How long will it take?", "About 10 minutes.", session_id=sid)
    assert mem.get_state(sid).last_intent == "question"
    mem.store_interaction("Starte den Server neu.", "Erledigt.", session_id=sid)
    assert mem.get_state(sid).last_intent == "command"
    mem.store_interaction(
        "Starte den Server neu.", "Erledigt.", {"intent": "restart_server"}, session_id=sid
    )
    assert mem.get_state(sid).last_intent == "restart_server"
    mem.add(sid, "ja")
    assert mem.get_state(sid).last_intent == "confirmation"
    mem.add(sid, "Danke!", metadata={"intent": "thanks"})
    st = mem.get_state(sid)
    assert st.last_intent == "thanks"
    assert mem.context(sid).last_intent == "thanks"
    # The inferred intent is part of the fold: a rebuild from the log gives the same.
    assert rebuild_state(mem, sid).last_intent == "thanks"
