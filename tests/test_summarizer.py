"""The offline summarizer, rolling summaries, keyphrases and the LLM summarizer.

Real LoCoMo sessions for the extractive parts; a real HTTP server on 127.0.0.1
speaking chat-completions for the LLM summarizer and its fallback.
"""

from __future__ import annotations

import logging
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.context.keyphrases import extract_keyphrases
from memlane.context.summarizer import (
    ExtractiveSummarizer,
    LLMSummarizer,
    RollingSummary,
    Summarizer,
    split_sentences,
)
from memlane.errors import InvalidInputError
from memlane.eval.locomo_data import LocomoConversation, load_conversation
from memlane.models import Message
from memlane.tiny_model import TinyModel  # the one stand-in chat model (examples, bench, tests)
from memlane.tokens import get_counter
from tests.conftest import LONG_CONVERSATION

COUNTER = get_counter(None)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def conv() -> LocomoConversation:
    return load_conversation(LONG_CONVERSATION)


def session(conv: LocomoConversation, index: int) -> list[Message]:
    return conv.session_messages(conv.session(index))


def msg(author: str, text: str, role: str = "user") -> Message:
    return Message(role=role, content=text, author_name=author, created_at=datetime(2024, 3, 5, 9, 30, tzinfo=UTC))


# ---------------------------------------------------------------- extractive


def test_is_a_summarizer() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)
    assert isinstance(LLMSummarizer(base_url="http://127.0.0.1:1/v1", model="m"), Summarizer)


def test_budget_is_never_exceeded(conv: LocomoConversation) -> None:
    summarizer = ExtractiveSummarizer()
    for s in conv.sessions:
        messages = conv.session_messages(s)
        for budget in (1, 5, 12, 40, 80, 150, 400):
            text = summarizer.summarize(messages, max_tokens=budget)
            assert COUNTER.count(text) <= budget, (s.index, budget, text)
            if budget >= 40:
                assert len(text.split()) >= 10, (s.index, budget, text)
        assert summarizer.summarize(messages, max_tokens=0) == ""


def test_bad_budget_is_refused(conv: LocomoConversation) -> None:
    with pytest.raises(InvalidInputError, match="max_tokens"):
        ExtractiveSummarizer().summarize(session(conv, 1), max_tokens=-5)


def test_deterministic_across_calls_instances_and_hash_seeds(conv: LocomoConversation) -> None:
    messages = session(conv, 3)
    first = ExtractiveSummarizer().summarize(messages)
    assert first == ExtractiveSummarizer().summarize(messages)
    assert first == ExtractiveSummarizer().summarize(list(messages))
    # Another interpreter with another string-hash seed: no set or dict order leaks in.
    code = (
        "import sys; from memlane.eval.locomo_data import load_conversation;"
        "from memlane.context.summarizer import ExtractiveSummarizer;"
        "c = load_conversation(sys.argv[1]);"
        "sys.stdout.write(ExtractiveSummarizer().summarize(c.session_messages(c.session(3))))"
    )
    assert conv.source is not None
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code, str(conv.source)], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == first


def test_reads_like_a_third_person_summary(conv: LocomoConversation) -> None:
    messages = session(conv, 1)
    text = ExtractiveSummarizer().summarize(messages)
    # Who talked, and when (the session's time), then what was said.
    assert text.startswith("Maren and Tobias talked on 3 March 2023 at 6:10 pm.")
    assert "Maren" in text and "Tobias" in text
    # First person rewritten with the speaker's name; no greetings, no fillers.
    assert not re.search(r"\b(I|I'm|my|me)\b", text), text
    assert "Hey" not in text and "Ha," not in text
    assert "Maren went to their first pottery class yesterday" in text
    assert 60 <= len(text.split()) <= 200


def test_rewrite_fillers_emoji_and_questions_dropped() -> None:
    messages = [
        msg("Ana", "Hey Ben! 😀 Wow, guess what, I finally adopted my dog Pixel last weekend!! lol"),
        msg("Ben", "Omg that's great, Ana! What breed is Pixel?", role="assistant"),
        msg("Ana", "I'm so happy. Pixel is a border collie and my neighbours love him :)"),
        msg("Ben", "I started a new job at the Berlin observatory, I work nights now.", role="assistant"),
    ]
    text = ExtractiveSummarizer().summarize(messages)
    assert "Ana finally adopted their dog Pixel last weekend." in text
    assert "Pixel is a border collie and Ana's neighbours love him." in text
    assert "Ben started a new job at the Berlin observatory" in text
    assert "?" not in text  # questions are not summary sentences
    assert "😀" not in text and ":)" not in text and "lol" not in text.lower()
    assert not re.search(r"\b(I|my|Hey|Omg)\b", text), text


def test_german_keeps_its_sentences_with_the_speaker_named() -> None:
    messages = [
        msg("Anna", "Hallo Ben! Ich habe endlich meinen Hund Pixel adoptiert, er ist ein Border Collie."),
        msg("Ben", "Toll! Ich suche immer noch eine Wohnung in Leipzig, die Mieten sind gestiegen.", role="assistant"),
        msg("Anna", "Wir fahren im Juni mit dem Zug nach Wien, meine Schwester wohnt dort."),
    ]
    text = ExtractiveSummarizer().summarize(messages)
    assert "Anna: Ich habe endlich meinen Hund Pixel adoptiert, er ist ein Border Collie." in text
    assert "Ben: Ich suche immer noch eine Wohnung in Leipzig" in text
    assert "Hallo" not in text and "Toll" not in text and "talked on" not in text


def test_group_chat_you_is_the_last_other_speaker() -> None:
    messages = [
        msg("Ana", "I booked the cabin near Lake Tahoe for the August trip."),
        msg("Ben", "I will bring the kayaks and the camping stove for everyone."),
        msg("Cleo", "You always forget the paddles, so pack them tonight please."),
    ]
    text = ExtractiveSummarizer().summarize(messages)
    assert "Ana booked the cabin near Lake Tahoe for the August trip." in text
    assert "Ben will bring the kayaks" in text
    assert "Cleo said Ben always forgets the paddles" in text
    assert "camping stove for everyone." in text
    assert text.startswith("Ana, Ben and Cleo talked on 5 March 2024")


def test_near_duplicates_are_removed(conv: LocomoConversation) -> None:
    messages = session(conv, 1)
    fact = "I went to my first pottery class yesterday and it was so calming."
    echoes = [
        "I went to my very first pottery class yesterday and it was really calming.",
        "Yesterday I went to my first pottery class and it was calming!",
    ]
    assert any(m.content.startswith(fact) for m in messages)
    padded = messages[:4] + [msg("Maren", e) for e in echoes] + messages[4:]
    text = ExtractiveSummarizer().summarize(padded)
    sentences = [s for s in split_sentences(text) if "pottery class yesterday" in s]
    assert len(sentences) == 1, text


def test_fast_on_a_30_turn_session(conv: LocomoConversation) -> None:
    messages = [m for s in conv.sessions[:2] for m in conv.session_messages(s)][:30]
    assert len(messages) == 30
    summarizer = ExtractiveSummarizer()
    summarizer.summarize(messages)  # warm regex caches
    times = []
    for _ in range(15):
        # CPU time of this thread, not wall time: what the work costs, whatever else runs
        start = time.thread_time()
        summarizer.summarize(messages)
        times.append(time.thread_time() - start)
    # A few ms; the bound leaves room for a slow CPU.
    assert statistics.median(times) < 0.05, times


def test_empty_and_one_sided_input() -> None:
    summarizer = ExtractiveSummarizer()
    assert summarizer.summarize([]) == ""
    assert summarizer.summarize([msg("Ana", "ok")]) == ""
    solo = summarizer.summarize([Message(role="user", content="I moved to Porto in March for a data engineering job.")])
    assert solo == "The user moved to Porto in March for a data engineering job."


# ------------------------------------------------------------------- rolling


def blocks_of(conv: LocomoConversation, n: int = 20) -> list[list[Message]]:
    messages = [m for s in conv.sessions for m in conv.session_messages(s)]
    size = len(messages) // n
    return [messages[i * size : (i + 1) * size] for i in range(n)]


def test_rolling_summary_stays_in_budget_and_keeps_early_salient_facts(conv: LocomoConversation) -> None:
    blocks = blocks_of(conv)
    ranked_first = ExtractiveSummarizer().rank(blocks[0])
    salient_first = max(ranked_first, key=lambda s: (s.score, -s.order)).text
    rolling = RollingSummary(max_tokens=500)
    seen_blocks: list[str] = []
    for block in blocks:
        text = rolling.update(block)
        assert COUNTER.count(text) <= 500
        assert text == rolling.text
        seen_blocks.append(text)
    final = seen_blocks[-1]
    assert salient_first in final, (salient_first, final)
    # The newest block is represented too, and the budget is put to use.
    newest = ExtractiveSummarizer().rank(blocks[-1])
    assert any(s.text in final for s in newest)
    assert COUNTER.count(final) > 350


def test_rolling_summary_tight_budget_spreads_over_time(conv: LocomoConversation) -> None:
    blocks = blocks_of(conv)
    rolling = RollingSummary(max_tokens=200)
    per_block: list[set[str]] = []
    for block in blocks:
        text = rolling.update(block)
        assert COUNTER.count(text) <= 200
        per_block.append({s.text for s in ExtractiveSummarizer().rank(block)})
    sentences = split_sentences(rolling.text)
    represented = {i for i, texts in enumerate(per_block) if any(s in texts for s in sentences)}
    # One fact from many moments rather than many facts from the last one.
    assert len(represented) >= 5, represented
    assert 19 in represented


def test_rolling_from_stored_text_and_via_previous_summary(conv: LocomoConversation) -> None:
    summarizer = ExtractiveSummarizer()
    earlier = summarizer.summarize(session(conv, 1), max_tokens=120)
    later = summarizer.summarize(session(conv, 2), max_tokens=150, previous_summary=earlier)
    assert COUNTER.count(later) <= 150
    old = set(split_sentences(earlier))
    new = {s.text for s in summarizer.rank(session(conv, 2))}
    kept = split_sentences(later)
    assert any(s in old for s in kept) and any(s in new for s in kept), later
    # A RollingSummary handed text it did not write starts from that text.
    rolling = RollingSummary(max_tokens=150)
    assert rolling.update(session(conv, 2), previous_summary=earlier) == later


def test_rolling_tiny_budget_cuts_rather_than_empties(conv: LocomoConversation) -> None:
    rolling = RollingSummary(max_tokens=8)
    for block in blocks_of(conv)[:3]:
        text = rolling.update(block)
        assert 0 < COUNTER.count(text) <= 8
    assert RollingSummary(max_tokens=0).update(session(conv, 1)) == ""


def test_rolling_rejects_negative_budget() -> None:
    with pytest.raises(InvalidInputError):
        RollingSummary(max_tokens=-1)


# ---------------------------------------------------------------- keyphrases


def test_keyphrases_english() -> None:
    text = [
        "The database migration failed last night, so we rolled back the database migration.",
        "Before the next attempt we need to check the backup schedule.",
        "The backup schedule runs at midnight, right after the database migration window.",
        "Hey, thanks! Also the staging cluster needs more memory.",
    ]
    phrases = extract_keyphrases(text, top_k=4)
    assert phrases[:2] == ["database migration", "backup schedule"]
    assert "staging cluster" in phrases
    assert not {"hey", "thanks", "last night"} & {p.lower() for p in phrases}
    assert extract_keyphrases(text, top_k=4) == phrases  # deterministic


def test_keyphrases_german() -> None:
    text = [
        "Wir planen einen Urlaub in Italien. Der Urlaub in Italien soll im Juni stattfinden.",
        "Meine Schwester kommt mit, und wir wollen in Rom die Museen besuchen.",
        "Die Museen in Rom sind berühmt, und das Hotel in Rom ist schon gebucht.",
    ]
    phrases = extract_keyphrases(text, top_k=5)
    assert phrases[:2] == ["Rom", "Urlaub"]
    assert {"Italien", "Museen"} <= set(phrases)
    assert not {"wir", "und", "die", "der"} & {p.lower() for p in phrases}


def test_keyphrases_ignore_speaker_vocatives(conv: LocomoConversation) -> None:
    phrases = extract_keyphrases([m.content for m in session(conv, 1)], top_k=8)
    assert "pottery class" in phrases
    assert not {"Maren", "Tobias"} & set(phrases)
    assert extract_keyphrases([], top_k=3) == [] and extract_keyphrases(["x"], top_k=0) == []


# ----------------------------------------------------------------------- LLM


PIXEL_SUMMARY = "Ana told Ben that she adopted a border collie named Pixel."


@pytest.fixture
def chat_server() -> Iterator[TinyModel]:
    """A real chat-completions endpoint on 127.0.0.1 with a scripted reply."""
    with TinyModel(answer=lambda _messages: PIXEL_SUMMARY) as model:
        yield model


PIXEL = [
    msg("Ana", "I adopted a border collie, his name is Pixel!"),
    msg("Ben", "Congrats! I'm still looking for a flat in Leipzig.", role="assistant"),
]


def test_llm_summarizer_calls_chat_completions(chat_server: TinyModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_TEST_LLM_KEY", "sk-test-123")
    llm = LLMSummarizer(base_url=chat_server.url, model="tiny-model", api_key_env="MEMLANE_TEST_LLM_KEY")
    text = llm.summarize(PIXEL, previous_summary="Ana and Ben met in 2023.")
    assert text == PIXEL_SUMMARY
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["model"] == "tiny-model"
    system, user = request["messages"]
    assert system["role"] == "system" and "third person" in system["content"]
    assert "Ana: I adopted a border collie" in user["content"]
    assert "Ben: Congrats!" in user["content"]
    assert "Ana and Ben met in 2023." in user["content"]
    assert request["auth"] == "Bearer sk-test-123"


def test_llm_summarizer_enforces_the_budget(chat_server: TinyModel) -> None:
    long_reply = " ".join(
        f"Sentence {i} says that Ana adopted a dog and Ben looks for a flat in Leipzig." for i in range(40)
    )
    chat_server.answer = lambda _messages: long_reply
    llm = LLMSummarizer(base_url=chat_server.url, model="m", api_key_env=None)
    text = llm.summarize(PIXEL, max_tokens=40)
    assert 0 < COUNTER.count(text) <= 40
    assert text.startswith("Sentence 0 says")
    assert chat_server.requests[0]["max_tokens"] == 40
    assert chat_server.requests[0]["auth"] is None


def test_llm_summarizer_falls_back_on_500(chat_server: TinyModel, caplog: pytest.LogCaptureFixture) -> None:
    chat_server.status = 500
    llm = LLMSummarizer(base_url=chat_server.url, model="m", max_attempts=3, backoff_seconds=0.01)
    with caplog.at_level(logging.WARNING, logger="memlane.context.summarizer"):
        text = llm.summarize(PIXEL, max_tokens=60)
    assert text == ExtractiveSummarizer().summarize(PIXEL, max_tokens=60)
    assert "Ana adopted a border collie" in text
    assert len(chat_server.requests) == 3  # retried, then gave up
    assert any("falling back" in r.getMessage() or "extractive" in r.getMessage() for r in caplog.records)


def test_llm_summarizer_falls_back_when_nothing_listens() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = LLMSummarizer(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_attempts=2, backoff_seconds=0.01, timeout=2)
    assert llm.summarize(PIXEL) == ExtractiveSummarizer().summarize(PIXEL)
