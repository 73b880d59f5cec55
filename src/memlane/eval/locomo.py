"""Retrieval evaluation on LoCoMo: does ``mem.search`` find the turns that answer a question?

Each conversation is ingested through the public API only, into its own fresh database:
one memlane session per LoCoMo session, speaker -> ``author_id``/``author_name`` (the first
speaker as role "user", the second as "assistant"), the session's date -> each message's
``created_at`` (a second apart, to keep order), a shared image kept as text
``"[image: caption]"``, and the turn's ``dia_id`` in the message metadata.

Then every question of categories 1-4 is asked with ``mem.search`` and the ranked turns are
scored against the question's evidence: Recall@k is the share of evidence turns in the top
k, Hit@5 whether any is in the top 5. Evidence ids that name no turn of the conversation
(a few annotation slips) are dropped; a question left without evidence is skipped. The
keyword-only and semantic-only baselines run through the same harness on the same
databases. A baseline that could not run for every question (no recall engine, or no
vectors with ``--embedder none``) is reported as ``null``, never as a score of 0, and
``gain`` gives hybrid / baseline per metric (``null`` where the baseline is missing or 0).
Categories without questions are left out of ``by_category`` for the same reason.

Against over-fitting, the conversations fall into a fixed tuning part and a held-aside part
(:func:`split_conversations`; ``--split b`` swaps the roles) and every run reports recall per
category and search latency for each part beside the totals, so a change is judged on both.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from memlane.errors import InvalidInputError
from memlane.eval.locomo_data import LocomoConversation, LocomoQA, load_locomo
from memlane.memory import Memory
from memlane.models import MessageFilter

KS: tuple[int, ...] = (1, 5, 10, 20)
CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)
CATEGORY_NAMES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MAX_K = max(KS)
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")

Progress = Callable[[str, int, int], None]


@dataclass
class Scores:
    """Sums of per-question metrics; ``as_dict`` averages them."""

    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    hit5: float = 0.0

    def add(self, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        wanted = set(evidence)
        self.n += 1
        for k in KS:
            self.recall[k] += len(wanted & set(ranked[:k])) / len(wanted)
        self.hit5 += 1.0 if wanted & set(ranked[:5]) else 0.0

    def as_dict(self) -> dict[str, float]:
        d = max(self.n, 1)
        out = {f"recall@{k}": round(self.recall[k] / d, 4) for k in KS}
        out["hit@5"] = round(self.hit5 / d, 4)
        return out


def gain(hybrid: dict[str, float], baseline: dict[str, float] | None) -> dict[str, float | None] | None:
    """Hybrid / baseline for each metric; None for a missing baseline or a baseline of 0
    (no finite ratio: the baseline found nothing)."""
    if baseline is None:
        return None
    return {m: round(hybrid[m] / baseline[m], 3) if baseline[m] else None for m in hybrid}


def conversation_messages(conv: LocomoConversation) -> list[tuple[str, list[dict[str, Any]]]]:
    """(session key, message dicts) for each session, as the public API takes them."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for session in conv.sessions:
        base = session.date_time
        msgs: list[dict[str, Any]] = []
        for i, turn in enumerate(session.turns):
            text = turn.text
            if turn.blip_caption:
                text = f"{text} [image: {turn.blip_caption}]".strip()
            msg: dict[str, Any] = {
                "role": "user" if turn.speaker == conv.speaker_a else "assistant",
                "content": text,
                "author_id": turn.speaker,
                "author_name": turn.speaker,
                "metadata": {"dia_id": turn.dia_id},
            }
            if base is not None:
                msg["created_at"] = base + timedelta(seconds=i)
            msgs.append(msg)
        out.append((session.key, msgs))
    return out


def ingest(mem: Memory, conv: LocomoConversation) -> int:
    """Store one conversation through the public API; returns the number of messages."""
    total = 0
    for key, msgs in conversation_messages(conv):
        if not msgs:
            continue
        sid = mem.create_session(
            session_id=f"{conv.sample_id}:{key}", user_id=conv.sample_id,
            title=f"{conv.speaker_a} and {conv.speaker_b}, {key}",
        )
        mem.add_messages(sid, msgs)
        total += len(msgs)
    return total


def questions(conv: LocomoConversation) -> list[LocomoQA]:
    """Answerable questions (categories 1-4) with their evidence cut to existing turns."""
    known = set(conv.turns_by_id())
    out: list[LocomoQA] = []
    for qa in conv.qa:
        if qa.category not in CATEGORIES:
            continue
        evidence = tuple(e for e in qa.evidence if e in known)
        if evidence:
            out.append(LocomoQA(qa.question, qa.answer, evidence, qa.category))
    return out


def _dia_ids(hits: Sequence[Any]) -> list[str]:
    return [str(h.message.metadata.get("dia_id", "")) for h in hits]


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[pos]


SPLITS: tuple[str, ...] = ("a", "b")
PARTS: tuple[str, ...] = ("all", "tune", "held")
#: Share of the conversations that tune; the rest is held aside (five -> three and two).
TUNE_SHARE = 0.6


def split_conversations(
    conversations: Sequence[LocomoConversation], split: str = "a"
) -> dict[str, list[LocomoConversation]]:
    """The fixed tuning / held-aside split: conversations in sample-id order, the first
    ``TUNE_SHARE`` of them tune under split "a"; split "b" swaps the two roles. The order of
    the files on the command line does not matter, so a figure always means the same set."""
    if split not in SPLITS:
        raise InvalidInputError(f"unknown split {split!r}: use one of {', '.join(SPLITS)}")
    ordered = sorted(conversations, key=lambda c: c.sample_id)
    cut = max(1, round(len(ordered) * TUNE_SHARE))
    first, rest = ordered[:cut], ordered[cut:]
    return {"tune": first, "held": rest} if split == "a" else {"tune": rest, "held": first}


@dataclass
class Tally:
    """Everything one group of conversations measured: hybrid recall overall and per
    category, the two baselines, and the search latencies."""

    overall: dict[str, Scores] = field(default_factory=lambda: {m: Scores() for m in MODES})
    by_cat: dict[int, Scores] = field(default_factory=lambda: {c: Scores() for c in CATEGORIES})
    latencies: list[float] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """Hybrid figures, per category (named), and the search latency of this group."""
        return {
            "overall": self.overall["hybrid"].as_dict(),
            "by_category": {
                str(c): {**self.by_cat[c].as_dict(), "questions": self.by_cat[c].n, "name": CATEGORY_NAMES[c]}
                for c in CATEGORIES if self.by_cat[c].n
            },
            "questions": self.overall["hybrid"].n,
            "search_ms_p50": round(statistics.median(self.latencies), 2) if self.latencies else 0.0,
            "search_ms_p95": round(_percentile(self.latencies, 0.95), 2),
        }


def _ask(mem: Memory, conv: LocomoConversation, qs: Sequence[LocomoQA], tallies: Sequence[Tally],
         progress: Progress | None, label: str) -> None:
    """Ask each question of one ingested conversation; every tally in ``tallies`` counts it."""
    engine = mem.parts.recall
    flt = MessageFilter(user_id=conv.sample_id)
    for i, qa in enumerate(qs):
        t1 = time.perf_counter()
        hits = mem.search(qa.question, user_id=conv.sample_id, top_k=MAX_K)
        elapsed = (time.perf_counter() - t1) * 1000
        ranked = _dia_ids(hits)
        for tally in tallies:
            tally.latencies.append(elapsed)
            tally.overall["hybrid"].add(ranked, qa.evidence)
            tally.by_cat[qa.category].add(ranked, qa.evidence)
        for mode in ("keyword", "semantic"):
            if engine is None or (mode == "semantic" and not engine.has_vectors):
                continue
            base = _dia_ids(engine.search(qa.question, flt, MAX_K, mode=mode))
            for tally in tallies:
                tally.overall[mode].add(base, qa.evidence)
        if progress:
            progress(f"questions {label}", i + 1, len(qs))


def evaluate(
    files: Sequence[str | Path],
    *,
    embedder: str | None = "minilm",
    workdir: str | Path | None = None,
    max_questions: int | None = None,
    progress: Progress | None = None,
    store: str | None = None,
    split: str = "a",
    part: str = "all",
) -> dict[str, Any]:
    """Run the evaluation; returns the JSON-ready result (see ``memlane eval locomo``).

    ``store``: None/"sqlite" (temp files), "embedded" (a PostgreSQL started for the run) or
    a ``postgresql://`` URL (a scratch schema per conversation); see memlane.store.scratch.
    ``split`` picks the tuning / held-aside split (see :func:`split_conversations`) and
    ``part`` which of its conversations run: "all", only "tune" or only "held". The
    top-level figures cover every conversation that ran; ``parts`` has them per part.
    """
    from memlane.store.scratch import scratch_stores

    if part not in PARTS:
        raise InvalidInputError(f"unknown part {part!r}: use one of {', '.join(PARTS)}")
    conversations: list[LocomoConversation] = []
    for f in files:
        conversations.extend(load_locomo(f))
    if not conversations:
        raise InvalidInputError("no LoCoMo conversations given")
    groups = split_conversations(conversations, split)
    role = {c.sample_id: name for name, convs in groups.items() for c in convs}
    chosen = [c for c in sorted(conversations, key=lambda c: c.sample_id) if part in ("all", role[c.sample_id])]
    if not chosen:
        raise InvalidInputError(
            f"split {split!r} holds no {part!r} conversation among {len(conversations)} given; "
            "give more files or use --part all"
        )
    total = Tally()
    parts = {name: Tally() for name in groups if part in ("all", name) and groups[name]}
    ingest_seconds = 0.0
    ingested = 0
    asked = 0
    with tempfile.TemporaryDirectory(dir=workdir, prefix="memlane-locomo-") as tmp, scratch_stores(
        store, tmp, fsync=False
    ) as stores:
        for n, conv in enumerate(chosen):
            label = f"{conv.sample_id} ({n + 1}/{len(chosen)})"
            db = Path(tmp) / f"{n}-{conv.sample_id}.db"
            with stores.target(db.stem) as target, Memory(target, embedder=embedder, durability="normal") as mem:
                t0 = time.perf_counter()
                count = ingest(mem, conv)
                if progress:
                    progress(f"embedding {label}", 0, 1)
                mem.flush(timeout=None)
                ingest_seconds += time.perf_counter() - t0
                ingested += count
                qs = questions(conv)
                if max_questions is not None:
                    qs = qs[: max(0, max_questions - asked)]
                _ask(mem, conv, qs, (total, parts[role[conv.sample_id]]), progress, label)
                asked += len(qs)
            if max_questions is not None and asked >= max_questions:
                break
    summary = total.report()
    hybrid = summary["overall"]
    # A baseline skipped for some questions would be averaged over a different set; report none.
    baselines: dict[str, dict[str, float] | None] = {
        m: total.overall[m].as_dict() if total.overall[m].n == total.overall["hybrid"].n > 0 else None
        for m in ("keyword", "semantic")
    }
    result: dict[str, Any] = {
        **summary,
        "baselines": baselines,
        "gain": {m: gain(hybrid, b) for m, b in baselines.items()},
        "ingest_msgs_per_s": round(ingested / ingest_seconds, 1) if ingest_seconds else 0.0,
        "split": {"name": split, **{name: [c.sample_id for c in convs] for name, convs in groups.items()}},
        "parts": {name: tally.report() for name, tally in parts.items() if tally.overall["hybrid"].n},
    }
    if stores.backend != "sqlite":
        # The JSON contract has exactly the keys above; a run on another store says which.
        result["store"] = stores.backend
    return result


__all__ = [
    "CATEGORIES", "CATEGORY_NAMES", "KS", "PARTS", "SPLITS", "Scores", "Tally", "conversation_messages",
    "evaluate", "gain", "ingest", "questions", "split_conversations",
]
