"""The offline summarizers: :class:`ExtractiveSummarizer` (maximal marginal relevance over
the ranked sentences, printed in the order they were said) and :class:`RollingSummary`
(a summary kept under a token budget block by block)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlane.context.summarizer.budgets import fit_to_budget
from memlane.context.summarizer.cleaning import clean_text, split_sentences
from memlane.context.summarizer.protocol import check_budget, default_counter
from memlane.context.summarizer.ranking import RankWeights, rank_sentences, similarity, tfidf
from memlane.context.summarizer.sentences import SummarySentence, content_terms, prepare_sentences
from memlane.language import detect_language
from memlane.models import Message
from memlane.patterns import lazy_compile

if TYPE_CHECKING:

    from memlane.tokens import TokenCounter


def _header(messages: Sequence[Message], speakers: Sequence[str]) -> str:
    if len(speakers) < 2:
        return ""
    # Role labels are not names: "JanHein, the assistant and Maria talked...".
    people = [s if i == 0 or not s.startswith("The ") else "the" + s[3:] for i, s in enumerate(speakers)]
    names = ", ".join(people[:-1]) + f" and {people[-1]}"
    first = min((m.created_at for m in messages), default=None)
    if first is None or first.year <= 1970:
        return f"{names} talked."
    hour = first.hour % 12 or 12
    when = f"{first.day} {first.strftime('%B')} {first.year} at {hour}:{first.minute:02d} "
    when += "am" if first.hour < 12 else "pm"
    return f"{names} talked on {when}."


@dataclass(slots=True)
class ExtractiveSummarizer:
    """Deterministic, offline summaries built from the conversation's own sentences.

    ``target_words`` fixes the length; by default it grows gently with the
    input (about 110 words for a 500-word session, at most ``max_words``).
    ``max_tokens`` passed to :meth:`summarize` caps the length further.
    """

    target_words: int | None = None
    min_words: int = 60
    max_words: int = 180
    words_per_input_word: float = 0.1
    base_words: int = 60
    diversity: float = 0.3  # MMR: weight of the redundancy penalty
    duplicate_threshold: float = 0.6  # a sentence this similar to a chosen one is skipped
    header: bool = True
    third_person: bool = True
    compress: bool = True
    attribute: bool = True
    captions: bool = False
    weights: RankWeights = field(default_factory=lambda: RankWeights())
    counter: TokenCounter | None = None

    def _counter(self) -> TokenCounter:
        if self.counter is None:
            self.counter = default_counter()
        return self.counter

    def length_for(self, input_words: int) -> int:
        if self.target_words is not None:
            return self.target_words
        want = self.base_words + self.words_per_input_word * input_words
        return int(max(self.min_words, min(self.max_words, round(want))))

    def rank(self, messages: Sequence[Message]) -> list[SummarySentence]:
        """Every sentence worth summarizing with its salience score, in input order."""
        prepared = prepare_sentences(messages, self)
        return [s for s in rank_sentences(prepared, self.weights) if s.candidate]

    def select(
        self,
        ranked: Sequence[SummarySentence],
        *,
        max_words: int,
        max_tokens: int | None = None,
        prefix: str = "",
    ) -> list[SummarySentence]:
        """Maximal-marginal-relevance choice of sentences within the limits, in input order."""
        chosen: list[SummarySentence] = []
        words = len(prefix.split())
        counts: dict[str, int] = {}
        speakers = list(dict.fromkeys(s.speaker for s in ranked))
        pool = sorted(ranked, key=lambda s: (-s.score, s.order))
        top = pool[0].score if pool and pool[0].score > 0 else 1.0
        # Highest similarity of each pool sentence to anything chosen so far,
        # updated against the newest choice only.
        redundancy_of: dict[int, float] = {id(s): 0.0 for s in pool}
        newest: SummarySentence | None = None
        while pool:
            if newest is not None:
                for s in pool:
                    sim = similarity(s.terms, newest.terms)
                    if sim > redundancy_of[id(s)]:
                        redundancy_of[id(s)] = sim
                newest = None
            best: SummarySentence | None = None
            best_value = -math.inf
            for s in pool:
                redundancy = redundancy_of[id(s)]
                if redundancy >= self.duplicate_threshold:
                    continue
                # Keep both sides heard: a speaker already ahead by two gets a nudge down.
                lead = counts.get(s.speaker, 0) - min((counts.get(p, 0) for p in speakers), default=0)
                balance = 1.0 - 0.1 * max(0, lead - 1)
                value = (1 - self.diversity) * (s.score / top) * balance - self.diversity * redundancy
                if value > best_value:
                    best, best_value = s, value
            if best is None:
                break
            pool.remove(best)
            if words + best.words > max_words * 1.1 and chosen:
                continue
            if max_tokens is not None:
                trial = _join(prefix, sorted([*chosen, best], key=lambda c: c.order))
                if self._counter().count(trial) > max_tokens:
                    continue
            chosen.append(best)
            newest = best
            counts[best.speaker] = counts.get(best.speaker, 0) + 1
            words += best.words
            if words >= max_words:
                break
        return sorted(chosen, key=lambda c: c.order)

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str:
        check_budget(max_tokens)
        if previous_summary:
            # Without a budget the merged summary may grow to about max_words.
            budget = max_tokens if max_tokens is not None else int(self.max_words * 1.4)
            rolling = RollingSummary(max_tokens=budget, summarizer=self)
            return rolling.update(messages, previous_summary=previous_summary)
        if max_tokens == 0:
            return ""
        prepared = prepare_sentences(messages, self)
        ranked = [s for s in rank_sentences(prepared, self.weights) if s.candidate]
        header = _header(messages, prepared.speakers) if self.header and prepared.english else ""
        if header and max_tokens is not None and self._counter().count(header) > max_tokens // 3:
            header = ""  # a tiny budget is better spent on content
        target = self.length_for(prepared.input_words)
        chosen = self.select(ranked, max_words=target, max_tokens=max_tokens, prefix=header)
        text = _join(header, chosen)
        if max_tokens is not None:
            if not chosen and ranked:
                # Not even the best sentence fits: send it cut rather than nothing.
                best = max(ranked, key=lambda s: (s.score, -s.order))
                text = _join(header, [best])
            text = fit_to_budget(text, max_tokens, self._counter())
        return text


def _join(prefix: str, sentences: Sequence[SummarySentence]) -> str:
    parts = [prefix] if prefix else []
    parts.append(said_once([s.text for s in sentences]))
    return " ".join(p for p in parts if p)


_LABEL_RE = lazy_compile(r"^([^:.!?]{1,40}): (?=\S)")


def said_once(sentences: Sequence[str]) -> str:
    """Sentences joined, a speaker's label said once per run of their sentences:
    "Ana: A. B." rather than "Ana: A. Ana: B." (labels are used where the third-person
    rewrite does not apply, e.g. German)."""
    out: list[str] = []
    last: str | None = None
    for text in sentences:
        m = _LABEL_RE.match(text)
        label = m.group(1) if m else None
        if m is not None and label == last:
            text = text[m.end():]
        last = label
        out.append(text)
    return " ".join(out)


@dataclass(slots=True)
class _Kept:
    sentence: SummarySentence
    salience: float  # 0..1 within the block it came from
    block: int  # negative for sentences of a summary loaded as text
    central: float = 0.0  # 0..1 centrality among everything kept, refreshed each update


@dataclass(slots=True)
class RollingSummary:
    """A summary that is updated block by block and never exceeds ``max_tokens``.

    Each :meth:`update` ranks only the new messages and merges their best
    sentences into the kept ones; nothing is recomputed over the whole history.
    While over budget it drops the sentence with the lowest priority:

        priority = (salience in its block + centrality among the kept) / 2 - age penalty

    The age penalty grows over ``horizon`` blocks and then stays flat, so the
    oldest of the least salient sentences go first, while an early fact that
    was salient, and that later talk keeps returning to (high centrality),
    survives. The state lives in the object; given a ``previous_summary`` it
    did not write (e.g. loaded from storage), it starts from that text.
    """

    max_tokens: int
    summarizer: ExtractiveSummarizer = field(default_factory=ExtractiveSummarizer)
    age_weight: float = 0.3  # priority an old sentence loses against a new one
    horizon: int = 4  # blocks after which a sentence counts as fully old
    block_share: float = 0.5  # at most this share of the budget for one new block
    crowding: float = 0.2  # priority lost per better sentence kept from the same block
    _kept: list[_Kept] = field(default_factory=list)
    _blocks: int = 0
    _text: str = ""
    # term -> number of blocks that mention it: what the whole conversation
    # keeps talking about, kept up to date one block at a time.
    _profile: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_budget(self.max_tokens)

    @property
    def text(self) -> str:
        return self._text

    def update(self, messages: Sequence[Message], previous_summary: str | None = None) -> str:
        """Merge ``messages`` into the summary; returns the new summary text."""
        if previous_summary is not None and previous_summary.strip() != self._text:
            self._seed(previous_summary)
        counter = self.summarizer._counter()
        block = self._blocks
        self._blocks += 1
        ranked = self.summarizer.rank(messages)
        for term in {t for s in ranked for t in s.terms}:
            self._profile[term] = self._profile.get(term, 0) + 1
        if ranked and self.max_tokens > 0:
            share = max(1, int(self.max_tokens * self.block_share))
            # The delta: the block's own best sentences, about as many as a
            # share of the budget holds (a word is ~1.3 tokens in English).
            words = max(12, int(share * 0.75))
            words = min(words, self.summarizer.length_for(sum(s.words for s in ranked)))
            new = self.summarizer.select(ranked, max_words=words, max_tokens=share)
            if not new:
                # Even the best sentence is over the share: keep it, eviction cuts it.
                new = [max(ranked, key=lambda s: (s.score, -s.order))]
            top = max((s.score for s in new), default=1.0) or 1.0
            for s in new:
                if self._twin(s):
                    continue  # said before: the kept wording stands
                s.order = block * 1_000_000 + s.order % 1_000_000
                self._kept.append(_Kept(s, 0.3 + 0.7 * (s.score / top), block))
        self._refresh_centrality()
        self._evict(counter)
        return self._text

    # -- internals

    def _seed(self, summary: str) -> None:
        sentences = [s for s in split_sentences(clean_text(summary)) if s]
        self._kept = []
        self._blocks = 0
        n = len(sentences)
        language = detect_language(summary)
        for i, text in enumerate(sentences):
            terms = content_terms(text, frozenset(), language)
            sentence = SummarySentence(
                text=text, speaker="", order=i, terms={t: 1.0 for t in terms}, words=len(text.split())
            )
            # Without the old scores, later sentences of the stored summary
            # count as newer and a little more salient.
            self._kept.append(_Kept(sentence, 0.5 + 0.2 * (i + 1) / n, -self.horizon - (n - i)))
        graph = [k.sentence for k in self._kept if k.sentence.terms]
        tfidf(graph)
        self._text = said_once(sentences)

    def _twin(self, s: SummarySentence) -> bool:
        threshold = self.summarizer.duplicate_threshold
        return any(similarity(s.terms, k.sentence.terms) >= threshold for k in self._kept)

    def _refresh_centrality(self) -> None:
        # How much of the conversation so far is about this sentence's topics:
        # the share of blocks that mention its terms, best term first.
        blocks = max(self._blocks, 1)
        values: list[float] = []
        for k in self._kept:
            spread = sorted((self._profile.get(t, 0) / blocks for t in k.sentence.terms), reverse=True)
            values.append(sum(spread[:3]) / 3 if spread else 0.0)
        top = max(values, default=0.0) or 1.0
        for k, v in zip(self._kept, values, strict=True):
            k.central = v / top

    def _priorities(self) -> dict[int, float]:
        # Within one block, the second-best kept sentence ranks below every
        # block's best one: the summary keeps one fact from many moments
        # rather than many facts from one.
        by_block: dict[int, list[_Kept]] = {}
        for k in self._kept:
            by_block.setdefault(k.block, []).append(k)
        out: dict[int, float] = {}
        for items in by_block.values():
            items.sort(key=lambda k: (-k.salience, k.sentence.order))
            for rank, k in enumerate(items):
                age = (self._blocks - 1 - k.block) / max(self.horizon, 1)
                out[id(k)] = (
                    (k.salience + k.central) / 2
                    - self.age_weight * min(age, 1.0)
                    - self.crowding * rank
                )
        return out

    def _evict(self, counter: TokenCounter) -> None:
        self._kept.sort(key=lambda k: (k.block, k.sentence.order))
        text = said_once([k.sentence.text for k in self._kept])
        # The last sentence stays even when too long: cut below, it beats nothing.
        while len(self._kept) > 1 and counter.count(text) > self.max_tokens:
            priority = self._priorities()
            victim = min(self._kept, key=lambda k: (priority[id(k)], k.block, k.sentence.order))
            self._kept.remove(victim)
            text = said_once([k.sentence.text for k in self._kept])
        self._text = fit_to_budget(text, self.max_tokens, counter) if self._kept else ""
