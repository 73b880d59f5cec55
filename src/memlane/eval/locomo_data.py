"""A small, typed loader for LoCoMo conversations.

LoCoMo (Maharana et al., ACL 2024) is shipped in two layouts and both load here:

* one conversation per file, every field at the top level (``speaker_a``,
  ``session_1``, ``session_1_date_time``, ``session_1_summary``, ``qa`` ...), the
  layout of the files under ``shared/data/locomo``;
* the original ``locomo10.json``: a list of samples, each with a
  ``conversation`` object plus ``qa``, ``session_summary``, ``observation`` and
  ``event_summary``.

Everything becomes frozen dataclasses: speakers, sessions with a parsed
``datetime`` (UTC, since LoCoMo gives no zone), turns with ``dia_id``, speaker,
text and image caption, the question list and the gold session summaries.
:meth:`LocomoConversation.session_messages` turns a session into memlane
:class:`~memlane.models.Message` records for summarization or retrieval evals.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.models import Message

__all__ = [
    "LocomoConversation",
    "LocomoQA",
    "LocomoSession",
    "LocomoTurn",
    "default_locomo_dir",
    "load_conversation",
    "load_locomo",
    "locomo_files",
    "parse_locomo_datetime",
]

_MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}

# "1:56 pm on 8 May, 2023"; the time part and the comma are optional so
# "8 May 2023" and "May 8, 2023" also parse.
_DATE_DMY = re.compile(
    r"^\s*(?:(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?\s*(?:on\s+)?)?"
    r"(?P<d>\d{1,2})\s+(?P<mon>[A-Za-z]+)\.?,?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
_DATE_MDY = re.compile(
    r"^\s*(?:(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\.?)?\s*(?:on\s+)?)?"
    r"(?P<mon>[A-Za-z]+)\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})\s*$",
    re.IGNORECASE,
)
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")


def parse_locomo_datetime(value: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023" into an aware UTC datetime.

    Raises InvalidInputError for text that is not such a date.
    """
    for pattern in (_DATE_DMY, _DATE_MDY):
        m = pattern.match(value)
        if not m:
            continue
        month = _MONTHS.get(m.group("mon").lower())
        if month is None:
            break
        hour = int(m.group("h") or 0)
        minute = int(m.group("m") or 0)
        ampm = (m.group("ampm") or "").lower().replace(".", "")
        if ampm:
            if not 1 <= hour <= 12:
                break
            hour = hour % 12 + (12 if ampm == "pm" else 0)
        try:
            return datetime(int(m.group("y")), month, int(m.group("d")), hour, minute, tzinfo=UTC)
        except ValueError:
            break
    raise InvalidInputError(
        f"cannot parse LoCoMo date {value!r}; expected e.g. '1:56 pm on 8 May, 2023'"
    )


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str
    blip_caption: str | None = None
    img_urls: tuple[str, ...] = ()
    query: str | None = None  # the search query LoCoMo used to find the image

    def as_text(self, *, include_caption: bool = True) -> str:
        """The turn's text, with the shared image described when there is one."""
        if include_caption and self.blip_caption:
            return f"{self.text} [shares {self.blip_caption}]".strip()
        return self.text


@dataclass(frozen=True, slots=True)
class LocomoSession:
    index: int
    date_time: datetime | None
    date_time_text: str
    turns: tuple[LocomoTurn, ...]
    summary: str | None = None
    #: speaker -> [(fact, dia_id), ...] as written by the LoCoMo annotators
    observations: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: speaker -> events of that speaker in this session
    events: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"session_{self.index}"

    def speakers(self) -> tuple[str, ...]:
        """Speakers in order of first turn."""
        return tuple(dict.fromkeys(t.speaker for t in self.turns))


@dataclass(frozen=True, slots=True)
class LocomoQA:
    question: str
    answer: str | None
    evidence: tuple[str, ...]
    category: int
    adversarial_answer: str | None = None

    @property
    def answerable(self) -> bool:
        """Categories 1-4 have an answer in the conversation; 5 is adversarial."""
        return self.category in (1, 2, 3, 4) and self.answer is not None


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LocomoSession, ...]
    qa: tuple[LocomoQA, ...] = ()
    source: Path | None = None

    @property
    def speakers(self) -> tuple[str, str]:
        return (self.speaker_a, self.speaker_b)

    def iter_turns(self) -> Iterator[tuple[LocomoSession, LocomoTurn]]:
        for session in self.sessions:
            for turn in session.turns:
                yield session, turn

    def turn(self, dia_id: str) -> LocomoTurn:
        for _session, turn in self.iter_turns():
            if turn.dia_id == dia_id:
                return turn
        raise KeyError(dia_id)

    def turns_by_id(self) -> dict[str, LocomoTurn]:
        return {turn.dia_id: turn for _s, turn in self.iter_turns()}

    def session(self, index: int) -> LocomoSession:
        for session in self.sessions:
            if session.index == index:
                return session
        raise KeyError(f"session_{index}")

    def session_messages(
        self,
        session: LocomoSession,
        *,
        session_id: str | None = None,
        include_caption: bool = False,
    ) -> list[Message]:
        """The session as memlane messages.

        ``speaker_a`` speaks as role "user" and ``speaker_b`` as "assistant", both
        with ``author_name`` set. Every message carries ``metadata["dia_id"]``
        and, for a shared image, ``metadata["image_caption"]``. All messages get
        the session's time (LoCoMo has none per turn) so order is the list order.
        """
        sid = session_id or f"{self.sample_id}:{session.key}"
        created = session.date_time or datetime(1970, 1, 1, tzinfo=UTC)
        out: list[Message] = []
        for turn in session.turns:
            metadata: dict[str, Any] = {"dia_id": turn.dia_id}
            if turn.blip_caption:
                metadata["image_caption"] = turn.blip_caption
            out.append(
                Message(
                    role="user" if turn.speaker == self.speaker_a else "assistant",
                    content=turn.as_text(include_caption=include_caption),
                    session_id=sid,
                    author_name=turn.speaker,
                    created_at=created,
                    metadata=metadata,
                )
            )
        return out


# --------------------------------------------------------------------- parsing


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _turn(raw: object, where: str) -> LocomoTurn:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: a turn must be an object with speaker/dia_id/text")
    urls = raw.get("img_url") or ()
    if isinstance(urls, str):
        urls = (urls,)
    caption = raw.get("blip_caption")
    query = raw.get("query")
    return LocomoTurn(
        dia_id=_str(raw.get("dia_id"), f"{where}.dia_id"),
        speaker=_str(raw.get("speaker"), f"{where}.speaker"),
        text=str(raw.get("text") or ""),
        blip_caption=caption if isinstance(caption, str) and caption else None,
        img_urls=tuple(str(u) for u in urls),
        query=query if isinstance(query, str) and query else None,
    )


def _observations(raw: object) -> dict[str, tuple[tuple[str, str], ...]]:
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    if not isinstance(raw, Mapping):
        return out
    for speaker, facts in raw.items():
        if not isinstance(facts, list):
            continue
        items: list[tuple[str, str]] = []
        for fact in facts:
            if isinstance(fact, list | tuple) and len(fact) >= 2:
                # A few facts cite several turns ("D8:6; D9:17"); keep the text as given.
                items.append((str(fact[0]), str(fact[1])))
        out[str(speaker)] = tuple(items)
    return out


def _events(raw: object) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(k): tuple(str(e) for e in v)
        for k, v in raw.items()
        if isinstance(v, list) and k != "date"
    }


def _evidence(raw: object) -> tuple[str, ...]:
    # Mostly a clean list of "D1:3", but some entries pack several ids into
    # one string or carry stray spaces; pull the ids out with a pattern.
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return ()
    ids: list[str] = []
    for item in raw:
        ids.extend(_DIA_ID.findall(str(item)))
    return tuple(dict.fromkeys(ids))


def _qa(raw: object) -> tuple[LocomoQA, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[LocomoQA] = []
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("question"), str):
            continue
        answer = item.get("answer")
        adversarial = item.get("adversarial_answer")
        category = item.get("category")
        out.append(
            LocomoQA(
                question=item["question"],
                # Some answers are numbers (a year): keep them as text.
                answer=None if answer is None else str(answer),
                evidence=_evidence(item.get("evidence")),
                category=int(category) if isinstance(category, int | str) else 0,
                adversarial_answer=None if adversarial is None else str(adversarial),
            )
        )
    return tuple(out)


def _flatten(sample: Mapping[str, Any]) -> dict[str, Any]:
    """Bring the locomo10 layout to the flat per-file layout."""
    if "conversation" not in sample:
        return dict(sample)
    flat: dict[str, Any] = dict(sample["conversation"])
    for section in ("session_summary", "observation", "event_summary"):
        part = sample.get(section)
        if isinstance(part, Mapping):
            flat.update(part)
    flat["qa"] = sample.get("qa", [])
    if "sample_id" in sample:
        flat["sample_id"] = sample["sample_id"]
    return flat


def _conversation(sample: Mapping[str, Any], source: Path | None, default_id: str) -> LocomoConversation:
    flat = _flatten(sample)
    where = str(source) if source else "LoCoMo sample"
    if not isinstance(flat.get("speaker_a"), str) or not isinstance(flat.get("speaker_b"), str):
        raise InvalidInputError(
            f"{where} is not a LoCoMo conversation: it needs 'speaker_a' and 'speaker_b'"
        )
    sessions: list[LocomoSession] = []
    for key, value in flat.items():
        m = _SESSION_KEY.match(key)
        # Some files list session_N_date_time for sessions that do not exist.
        if not m or not isinstance(value, list) or not value:
            continue
        index = int(m.group(1))
        date_text = flat.get(f"{key}_date_time")
        date_text = date_text if isinstance(date_text, str) else ""
        try:
            date = parse_locomo_datetime(date_text) if date_text else None
        except InvalidInputError:
            date = None
        summary = flat.get(f"{key}_summary")
        sessions.append(
            LocomoSession(
                index=index,
                date_time=date,
                date_time_text=date_text,
                turns=tuple(_turn(t, f"{where}:{key}[{i}]") for i, t in enumerate(value)),
                summary=summary if isinstance(summary, str) and summary.strip() else None,
                observations=_observations(flat.get(f"{key}_observation")),
                events=_events(flat.get(f"events_{key}")),
            )
        )
    sessions.sort(key=lambda s: s.index)
    sample_id = flat.get("sample_id")
    return LocomoConversation(
        sample_id=str(sample_id) if sample_id is not None else default_id,
        speaker_a=flat["speaker_a"],
        speaker_b=flat["speaker_b"],
        sessions=tuple(sessions),
        qa=_qa(flat.get("qa")),
        source=source,
    )


def load_locomo(path: str | os.PathLike[str]) -> list[LocomoConversation]:
    """Every conversation in a LoCoMo file (one for the per-file layout, ten for locomo10)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInputError(f"LoCoMo file {p} does not exist") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read LoCoMo file {p}: {exc}") from exc
    if isinstance(data, Mapping):
        return [_conversation(data, p, p.stem)]
    if isinstance(data, list) and all(isinstance(s, Mapping) for s in data):
        return [_conversation(s, p, f"{p.stem}-{i}") for i, s in enumerate(data)]
    raise InvalidInputError(
        f"{p} is not a LoCoMo file: expected a conversation object or a list of samples"
    )


def load_conversation(path: str | os.PathLike[str]) -> LocomoConversation:
    """The single conversation of a per-conversation LoCoMo file."""
    conversations = load_locomo(path)
    if len(conversations) != 1:
        raise InvalidInputError(
            f"{path} holds {len(conversations)} conversations; use load_locomo() for it"
        )
    return conversations[0]


def default_locomo_dir() -> Path | None:
    """``$MEMLANE_LOCOMO_DIR``, else ``<repo>/../shared/data/locomo``; None if neither exists."""
    env = os.environ.get("MEMLANE_LOCOMO_DIR")
    candidates: Sequence[Path] = (
        [Path(env)] if env else [Path(__file__).resolve().parents[3].parent / "shared/data/locomo"]
    )
    for c in candidates:
        if c.is_dir():
            return c
    return None


def locomo_files(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """The ``*.json`` files of a LoCoMo directory, sorted by name (empty if there is none)."""
    d = Path(directory) if directory is not None else default_locomo_dir()
    if d is None or not d.is_dir():
        return []
    return sorted(d.glob("*.json"))
