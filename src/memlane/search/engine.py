"""Hybrid recall: keyword (BM25) and semantic candidates, fused with conversation signals.

Search runs in two stages, both cheap:

1. Candidates: the best ``pool`` messages by BM25 (the store's full-text index) and the best
   ``pool`` by vector similarity (the VectorIndex), both already filtered, plus the replies to
   the best few candidates that ask something (``replies``: an answer need not share a word
   with the query when the question before it does). Every candidate gets both scores (a
   semantic similarity is looked up for keyword-only candidates).
2. Ranking: a weighted sum of normalised parts, each kept in ``SearchHit.scores``:

   * ``semantic`` — cosine similarity, scaled between the pool's floor and its best;
   * ``keyword`` — BM25 over the best BM25 of the pool;
   * ``speaker`` — the query names the message's author ("what did Caroline research");
     names are also left out of the BM25 query and of the text the query vector is made
     from, where they would match every turn that merely addresses that person;
   * ``coverage`` — share of the query's (crudely stemmed) terms found in the message and its
     adjacent turns: BM25 sees one turn, an answer is often spread over two;
   * ``neighbour`` — an adjacent turn of the same session scored high: answers sit next to
     the questions that match;
   * ``session`` — how well the message's whole session matches (mean of its best parts),
     so a stray hit in an unrelated chat ranks below one inside a relevant conversation;
   * ``when`` — the query asks *when* ("when did ...", "how long ago", "wann") and the message
     carries a time expression of its own ("yesterday", "two weeks ago", "in 2019"): the turn
     that tells of an event usually says when (search/when.py);
   * ``dated`` — the query names a calendar date ("on 1 May, 2022", "in June") and the
     message was written on it or within two weeks after (half within ~six weeks): an
     event is told soon after it happens (search/dates.py);
   * ``recency`` and ``importance`` — small tie-breakers (newer, marked important/pinned).

   ``several_session`` / ``several_neighbour`` can scale the session and neighbour parts
   for a question asking for several things (search/several.py); off by default.

The weights were tuned on five LoCoMo conversations for the general case (no per-question
rules); the optimum is flat (±0.1 on any weight moves Recall@5/10 by about a point), which
is why round values were kept. See ``memlane eval locomo``. Modes "keyword" and "semantic" rank by one part alone
and are the baselines of that evaluation.
"""

from __future__ import annotations

import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from memlane.errors import InvalidInputError
from memlane.lru import LRUCache
from memlane.models import Message, MessageFilter, SearchHit, Session, to_epoch
from memlane.search.crosslingual import expand_query
from memlane.search.dates import date_matcher, query_dates
from memlane.search.embedders import Embedder, HashingEmbedder
from memlane.search.relevance import relevance
from memlane.search.several import asks_for_several
from memlane.search.vectors import VectorIndex
from memlane.search.when import asks_when, says_when
from memlane.store import KeywordHit, Store
from memlane.text import content_words, snippet, words

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from memlane.ports import Vectors

Mode = Literal["hybrid", "keyword", "semantic"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")

_NAME_RE = re.compile(r"[^\W\d_][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s?$")


#: Weight of a BM25 hit found only through a translation of the query's words.
_TRANSLATED = 0.5


def _done(value: list[KeywordHit]) -> Future[list[KeywordHit]]:
    fut: Future[list[KeywordHit]] = Future()
    fut.set_result(value)
    return fut


def _part(both: Future[list[list[KeywordHit]]], index: int) -> Future[list[KeywordHit]]:
    """The ``index``-th query's hits of a call for several, once it is done."""
    part: Future[list[KeywordHit]] = Future()

    def settle(done: Future[list[list[KeywordHit]]]) -> None:
        error = done.exception()
        if error is not None:
            part.set_exception(error)
        else:
            part.set_result(done.result()[index])

    both.add_done_callback(settle)
    return part


def _context(hit: KeywordHit) -> str | None:
    """A keyword hit's coverage text when the store read its adjacent turns with it."""
    if hit.adjacent is None:
        return None
    return " ".join((hit.message.content, *hit.adjacent)).lower()


def _stems(text: str) -> set[str]:
    """Crude stems of the content words, matched as substrings of lower-cased text: enough
    to match "painted" with "painting" and "fix" with "fixed"."""
    parts = (p for w in content_words(text) for p in w.split("-"))  # "self-care": both words
    return {_stem(p) for p in parts if len(p) > 2}


_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]


# "what did we discuss about X last week?": the topic is X. The question's frame and its
# time words are about the conversation, not its content, and would dilute the evidence.
_ABOUT = re.compile(
    r"\b(?:about|regarding|concerning|on the (?:topic|subject) of|über|bezüglich|zum thema|wegen)\s+(?P<topic>.+)$",
    re.IGNORECASE,
)
_WHEN_TAIL = re.compile(
    r"(?:\s+(?:(?:last|this|the other|next)\s+(?:week|month|year|time|night|day)|yesterday|today|"
    r"recently|earlier|before|again|(?:letzte|letzten|vorige|vorigen|diese|dieser)\s+\w+|gestern|"
    r"neulich|vorhin|heute|nochmal))+\s*$",
    re.IGNORECASE,
)


def query_focus(query: str) -> str:
    """The topic a question about the conversation asks about, or the query itself."""
    found = _ABOUT.search(query.strip().rstrip("?!. "))
    if found is None:
        return query
    topic = _WHEN_TAIL.sub("", found.group("topic")).strip(" ,")
    return topic or query


#: A message needs this many content words of its own for its exchange to count for it.
_MIN_OWN_WORDS = 3


def _partner_id(msg: Message) -> int:
    """Id of the other half of a user/assistant exchange (adjacent ids), or -1."""
    if msg.id is None:
        return -1
    return msg.id + 1 if msg.role == "user" else msg.id - 1 if msg.role == "assistant" else -1


def _coverage(terms: set[str], text: str) -> float:
    """Share of the query's stems found (as substrings) in lower-cased ``text``."""
    return sum(1 for t in terms if t in text) / len(terms) if terms else 0.0


def near_duplicate_key(text: str) -> frozenset[str]:
    """The words of a text, for telling near-identical messages apart from merely similar."""
    return frozenset(words(text))


def _same_text(a: frozenset[str], b: frozenset[str]) -> bool:
    """Near-identical: the same words up to case, punctuation and one word in ten."""
    return len(a & b) / len(a | b) >= 0.9


def _base(word: str) -> str:
    """Lower-case word without a possessive ending: "Caroline's" -> "caroline"."""
    return _POSSESSIVE.sub("", word.lower())


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """Weights of the fused score. Defaults are the tuned values."""

    pool: int = 100
    semantic: float = 0.5
    keyword: float = 0.5
    #: the keyword part is (BM25 / the pool's best BM25) to this power: BM25 over its best
    #: is flat near the top (a hit sharing one rare word of three scores 0.6), squaring-ish
    #: keeps the clear matches apart from the partial ones (LoCoMo R@10 tune .835 -> .839,
    #: held .783 -> .786; 1.25-2 alike)
    keyword_power: float = 1.5
    speaker: float = 0.35
    neighbour: float = 0.3
    session: float = 0.3
    recency: float = 0.02
    importance: float = 0.05
    #: recency half-life in days
    half_life_days: float = 30.0
    #: semantic similarity at or below this counts as no match at all
    semantic_floor: float = 0.1
    #: how many of a session's best candidates make its relevance
    session_top: int = 3
    #: leave speakers' names out of the keyword query and the query vector (the speaker
    #: part scores them)
    strip_names: bool = True
    #: share of the query's terms found in the message and its adjacent turns
    coverage: float = 0.3
    #: how many of the best candidates get the coverage part
    coverage_top: int = 50
    #: add German/English translations of the query's words (search/crosslingual.py)
    crosslingual: bool = True
    #: a query asking *when* favours turns that carry a time expression (search/when.py)
    when: float = 0.4
    #: a query naming a date ("on 1 May, 2022", "in June") favours turns written then
    #: (search/dates.py)
    dated: float = 0.6
    #: how many of the best candidate turns that ask something ("What genre is it?") bring
    #: the other speaker's turn after them in as a candidate: the answer ("A mix of drama and
    #: romance!") often shares no word with the query, the question does. The neighbour part
    #: then scores it (LoCoMo R@10 .815 -> .817 over all five, no conversation lower; 20:
    #: lower on one)
    replies: int = 5
    #: a question asking for several things ("What activities has Melanie done?",
    #: search/several.py) has its session and neighbour parts scaled by these: both lift one
    #: matching session's turns together, while such an answer is spread over sessions.
    #: Off (1.0): 0.0 / 0.5 raised LoCoMo's tuning part (R@5/R@10 .754/.843 -> .763/.846)
    #: but not the held-aside one (.717/.790 alike, one single-hop answer lost; README)
    several_session: float = 1.0
    several_neighbour: float = 1.0

    def with_(self, **changes: float | int) -> RecallConfig:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(slots=True)
class Candidate:
    message: Message
    keyword: float = 0.0  # raw BM25 (larger is better), 0 when not a keyword hit
    semantic: float = 0.0  # cosine similarity, 0 when the message has no vector
    keyword_rank: int | None = None
    semantic_rank: int | None = None
    #: lower-cased text of the message and its adjacent turns (query-term coverage):
    #: read with the keyword hit where the store does (PostgreSQL), else fetched lazily,
    #: only for the best candidates
    context: str | None = None
    #: the message's session when the store read it with the keyword hit (PostgreSQL)
    session: Session | None = None


class RecallEngine:
    """Search over every stored conversation; thread-safe."""

    def __init__(
        self,
        store: Store,
        *,
        embedder: Embedder | None = None,
        index: VectorIndex | None = None,
        config: RecallConfig | None = None,
    ) -> None:
        if (embedder is None) != (index is None):
            raise InvalidInputError("give both an embedder and a vector index, or neither")
        self.store = store
        self.embedder = embedder
        self.index = index
        self.config = config or RecallConfig()
        # Hashed word vectors carry no meaning beyond shared words: relevance is calibrated
        # on keyword evidence for them (search/relevance.py).
        self._semantic = embedder is not None and not isinstance(embedder, HashingEmbedder)
        self._query_cache: LRUCache[str, Vectors] = LRUCache(256)
        self._pool_lock = threading.Lock()
        self._authors: set[str] | None = None
        self._executor: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memlane-search")
            return self._executor

    def close(self) -> None:
        with self._pool_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    @property
    def has_vectors(self) -> bool:
        return self.embedder is not None

    @property
    def semantic_embedder(self) -> Embedder | None:
        """The embedder when its vectors carry meaning (not hashed words), else None."""
        return self.embedder if self._semantic else None

    # ------------------------------------------------------------ authors

    def drop_cached(self) -> None:
        """Drop the query vectors and speaker names kept in this process (after something
        was forgotten anywhere: a query or a name may have come from it)."""
        self.drop_query_vectors()
        self._authors = None

    def drop_query_vectors(self) -> None:
        """Forget the query vectors kept in this process: the next search of any query
        embeds it again (``memlane bench search`` times every query as a new question)."""
        self._query_cache.clear()

    def note_authors(self, messages: Iterable[Message]) -> None:
        """Observer side: remember author names so queries can be matched to speakers."""
        if self._authors is None:
            return
        for m in messages:
            if m.author_name:
                self._authors.add(m.author_name.lower())

    def _known_authors(self) -> set[str]:
        if self._authors is None:
            self._authors = {name.lower() for name in self.store.author_names()}
        return self._authors

    def named_speakers(self, query: str) -> set[str]:
        """Author names (lower-case) that the query mentions by a word of their name."""
        authors = self._known_authors()
        if not authors:
            return set()
        words = {_base(w) for w in _NAME_RE.findall(query)}
        out: set[str] = set()
        for name in authors:
            parts = name.split()
            if name in words or any(p in words for p in parts if len(p) > 2):
                out.add(name)
        return out

    def _keyword_query(self, query: str) -> str:
        """The query without speakers' names: a name matches every turn that addresses that
        person, which is noise for BM25; the speaker part of the score uses it instead."""
        if not self.config.strip_names:
            return query
        names = {p for name in self.named_speakers(query) for p in name.split()}
        if not names:
            return query
        kept = [w for w in _NAME_RE.findall(query) if _base(w) not in names]
        return " ".join(kept) if kept else query

    # ------------------------------------------------------------ candidates

    def embed_query(self, query: str) -> Vectors:
        assert self.embedder is not None
        cached = self._query_cache.get(query)
        if cached is not None:
            return cached
        vec = self.embedder.embed_query(query)
        self._query_cache.put(query, vec)
        return vec

    def candidates(
        self, query: str, flt: MessageFilter, *, pool: int | None = None, mode: Mode = "hybrid",
        config: RecallConfig | None = None,
    ) -> list[Candidate]:
        size = pool or self.config.pool
        found: dict[int, Candidate] = {}
        keyword: Future[list[KeywordHit]] | None = None
        vec_query = query
        added: tuple[str, ...] = ()
        if (config or self.config).crosslingual:
            expansion = expand_query(query)
            vec_query, added = expansion.vector_query, expansion.added
        translated: Future[list[KeywordHit]] | None = None
        if mode in ("hybrid", "keyword"):
            kw_query = self._keyword_query(query) if mode == "hybrid" else query
            background = mode == "hybrid" and self.index is not None
            if added and self.store.keyword_batching:
                # Both queries in one call where the store runs them at once (PostgreSQL:
                # one round trip, not two connections on two threads; 0.6x the search time
                # under load, docs/postgres.md).
                queries = [kw_query, " ".join(added)]
                if background:
                    both = self._pool().submit(self.store.keyword_searches, queries, flt, limit=size)
                    keyword, translated = _part(both, 0), _part(both, 1)
                else:
                    own, other = self.store.keyword_searches(queries, flt, limit=size)
                    keyword, translated = _done(own), _done(other)
            elif background:
                # BM25 runs in SQLite (which releases the GIL) while the model embeds the
                # query: the two slowest steps overlap instead of adding up.
                keyword = self._pool().submit(self.store.keyword_search, kw_query, flt, limit=size)
            else:
                keyword = _done(self.store.keyword_search(kw_query, flt, limit=size))
            if added and translated is None:
                # The translations are a query of their own: mixed into the original one they
                # would reorder its hits (English LoCoMo lost recall that way).
                translated = self._pool().submit(self.store.keyword_search, " ".join(added), flt, limit=size)
        if mode == "hybrid":
            # Names leave the vector's text too: "What did Melanie paint?" otherwise leans
            # towards every turn that greets Melanie (LoCoMo held R@10 0.746 -> 0.775).
            vec_query = self._keyword_query(vec_query)
        qvec = self.embed_query(vec_query) if mode in ("hybrid", "semantic") and self.index else None
        # The vector scan (GIL released) and fetching its messages also run before waiting
        # for BM25, so on two cores the two searches overlap rather than add up; messages
        # both searches found are fetched twice, which costs less than waiting.
        sem = self.index.search(qvec, size, flt) if qvec is not None and self.index is not None else []
        fetched = {m.id: m for m in self.store.get_messages([mid for mid, _ in sem])} if sem else {}
        if keyword is not None:
            for rank, hit in enumerate(keyword.result()):
                if hit.message.id is None:
                    continue
                found[hit.message.id] = Candidate(hit.message, keyword=hit.score, keyword_rank=rank,
                                                  context=_context(hit), session=hit.session)
        if translated is not None:
            # Hits of the translations only, after the original query's, at a lower weight:
            # what the query's own words found keeps its score and rank.
            offset = len(found)
            for rank, hit in enumerate(translated.result()):
                mid = hit.message.id
                if mid is not None and mid not in found:
                    found[mid] = Candidate(hit.message, keyword=hit.score * _TRANSLATED,
                                           keyword_rank=offset + rank, context=_context(hit),
                                           session=hit.session)
        if qvec is not None and self.index is not None:
            for rank, (mid, sim) in enumerate(sem):
                cand = found.get(mid)
                if cand is None:
                    msg = fetched.get(mid)
                    if msg is None:
                        continue  # deleted since the index was read
                    cand = found[mid] = Candidate(msg)
                cand.semantic = sim
                cand.semantic_rank = rank
            if mode == "hybrid":
                # Measured with vectors only; keyword-only search keeps to turns with the words.
                self._add_replies(found, flt, (config or self.config).replies)
                unscored = [mid for mid, c in found.items() if c.semantic_rank is None]
                if unscored:
                    for mid, sim in self.index.similarities(qvec, unscored).items():
                        found[mid].semantic = sim
        return list(found.values())

    def _add_replies(self, found: dict[int, Candidate], flt: MessageFilter, count: int) -> None:
        """Bring in the turn after each of the ``count`` best-placed candidates that ask
        something, when it is the other speaker's reply and passes ``flt``."""
        if count <= 0:
            return
        asking = sorted(
            (c for c in found.values() if "?" in c.message.content and c.message.id is not None),
            key=lambda c: min(c.keyword_rank if c.keyword_rank is not None else 1 << 30,
                              c.semantic_rank if c.semantic_rank is not None else 1 << 30),
        )[:count]
        wanted = {c.message.id + 1: c.message for c in asking if c.message.id is not None}
        wanted = {mid: q for mid, q in wanted.items() if mid not in found}
        if not wanted:
            return
        for msg in self.store.get_messages(sorted(wanted), flt):
            question = wanted[msg.id or 0]
            if (msg.session_id == question.session_id and msg.role != question.role
                    and msg.role in ("user", "assistant")):
                found[msg.id or 0] = Candidate(msg)

    def _attach_context(self, cands: Sequence[Candidate]) -> None:
        todo = [c for c in cands if c.context is None]
        known = {c.message.id: c.message for c in cands}
        wanted = {
            mid + d for c in todo if (mid := c.message.id) for d in (-1, 1)
        } - set(known)
        near = {m.id: m for m in self.store.get_messages(sorted(wanted))} if wanted else {}
        near.update(known)
        for c in todo:
            mid = c.message.id or 0
            parts = [c.message.content] + [
                m.content for m in (near.get(mid - 1), near.get(mid + 1))
                if m is not None and m.session_id == c.message.session_id
            ]
            c.context = " ".join(parts).lower()

    # ------------------------------------------------------------ ranking

    def rank(
        self,
        query: str,
        cands: Sequence[Candidate],
        *,
        mode: Mode = "hybrid",
        config: RecallConfig | None = None,
    ) -> list[tuple[Candidate, float, dict[str, float]]]:
        cfg = config or self.config
        if not cands:
            return []
        if mode == "keyword":
            ranked = sorted(cands, key=lambda c: -c.keyword)
            return [(c, c.keyword, {"keyword": c.keyword}) for c in ranked if c.keyword_rank is not None]
        if mode == "semantic":
            ranked = sorted(cands, key=lambda c: -c.semantic)
            return [(c, c.semantic, {"semantic": c.semantic}) for c in ranked if c.semantic_rank is not None]

        import numpy as np  # here, not at import: Memory opens without numpy

        best_kw = max((c.keyword for c in cands), default=0.0)
        sims = np.array([c.semantic for c in cands], dtype=np.float64)
        top_sim = float(sims.max()) if len(sims) else 0.0
        floor = max(cfg.semantic_floor, _low_percentile(sims, 10) if len(sims) > 10 else cfg.semantic_floor)
        span = max(top_sim - floor, 1e-6)
        speakers = self.named_speakers(query) if cfg.speaker else set()
        names = {part for name in speakers for part in name.split()}
        terms = _stems(query) - names
        focus = query_focus(query)
        focus_terms = (_stems(focus) - names or terms) if focus != query else terms
        focus_sims = self._focus_similarities(focus, cands) if focus != query else {}
        newest = max(to_epoch(c.message.created_at) for c in cands)
        if (cfg.several_session, cfg.several_neighbour) != (1.0, 1.0) and asks_for_several(query):
            cfg = cfg.with_(session=cfg.session * cfg.several_session,
                            neighbour=cfg.neighbour * cfg.several_neighbour)

        parts: list[dict[str, float]] = []
        base: list[float] = []
        for c in cands:
            p = {
                "semantic": max(0.0, (c.semantic - floor) / span) if self.has_vectors else 0.0,
                "keyword": (c.keyword / best_kw) ** cfg.keyword_power if best_kw > 0 else 0.0,
            }
            b = cfg.semantic * p["semantic"] + cfg.keyword * p["keyword"]
            if not self.has_vectors:
                b = p["keyword"]
            author = (c.message.author_name or "").lower()
            p["speaker"] = 1.0 if author and author in speakers else 0.0
            parts.append(p)
            base.append(b)

        if terms and cfg.coverage:
            # Coverage only matters near the top: fetch adjacent turns for the best few.
            best = sorted(range(len(cands)), key=lambda i: -base[i])[: cfg.coverage_top]
            self._attach_context([cands[i] for i in best])
            for i in best:
                text = cands[i].context or ""
                parts[i]["coverage"] = _coverage(terms, text)
                base[i] += cfg.coverage * parts[i]["coverage"]

        # Every candidate, not only the best few: on the top 50 alone the held-aside
        # conversations gained less (R@10 +0.005 instead of +0.008). Only "when" questions pay.
        if cfg.when and asks_when(query):
            for i, c in enumerate(cands):
                parts[i]["when"] = 1.0 if says_when(c.message.content) else 0.0
        spans = query_dates(query) if cfg.dated else []
        if spans:
            match = date_matcher(spans)
            for i, c in enumerate(cands):
                parts[i]["dated"] = match(c.message.created_at)

        # neighbours: adjacent turns of one session (ids are assigned in append order)
        by_id = {c.message.id: i for i, c in enumerate(cands)}
        session_scores: dict[str, list[float]] = defaultdict(list)
        for i, c in enumerate(cands):
            session_scores[c.message.session_id].append(base[i])
        session_rel = {
            sid: sum(top := sorted(v, reverse=True)[: cfg.session_top]) / len(top)
            for sid, v in session_scores.items()
        }
        best_session = max(session_rel.values(), default=0.0) or 1.0

        out: list[tuple[Candidate, float, dict[str, float]]] = []
        for i, c in enumerate(cands):
            p = parts[i]
            mid = c.message.id or 0
            nb = 0.0
            for other in (mid - 1, mid + 1):
                j = by_id.get(other)
                if j is not None and cands[j].message.session_id == c.message.session_id:
                    nb = max(nb, base[j])
            p["neighbour"] = nb
            p["session"] = session_rel[c.message.session_id] / best_session
            age_days = (newest - to_epoch(c.message.created_at)) / 86400.0
            p["recency"] = math.exp(-math.log(2) * age_days / cfg.half_life_days)
            p["importance"] = max(c.message.importance, 1.0 if c.message.pinned else 0.0)
            # the absolute evidences the calibrated relevance is made of (search/relevance.py)
            text = c.message.content.lower()
            p["cosine"] = max(c.semantic, focus_sims.get(mid, 0.0)) if self._semantic else 0.0
            p["own"] = _coverage(focus_terms, text)
            # The other half of its exchange: an answer is relevant to what its question asked.
            j = by_id.get(_partner_id(c.message))
            partner = cands[j].message if j is not None else None
            if partner is not None and (partner.session_id != c.message.session_id
                                        or {partner.role, c.message.role} != {"user", "assistant"}
                                        # "I don't know.", "Nice!": nothing to recall on its own
                                        or len(content_words(c.message.content)) < _MIN_OWN_WORDS):
                partner = None
            ctx = text if partner is None else f"{text} {partner.content.lower()}"
            p["context"] = _coverage(focus_terms, ctx)
            p["relevance"] = relevance(p["cosine"], p["own"], p["context"], vectors=self._semantic)
            score = (
                base[i]
                + cfg.speaker * p["speaker"]
                + cfg.neighbour * nb
                + cfg.session * p["session"]
                + cfg.recency * p["recency"]
                + cfg.importance * p["importance"]
                + cfg.when * p.get("when", 0.0)
                + cfg.dated * p.get("dated", 0.0)
            )
            # Nearest neighbours always exist, even for a query about something never
            # discussed: a candidate needs evidence of its own or from an adjacent turn.
            if c.keyword_rank is None and p["semantic"] <= 0.0 and nb <= 0.0:
                continue
            p["fused"] = score
            out.append((c, score, p))
        out.sort(key=lambda t: -t[1])
        return out

    def _focus_similarities(self, focus: str, cands: Sequence[Candidate]) -> dict[int, float]:
        """Cosine of each candidate to the question's topic alone (see query_focus)."""
        if not self._semantic or self.index is None or not cands:
            return {}
        ids = [c.message.id for c in cands if c.message.id is not None]
        return dict(self.index.similarities(self.embed_query(focus), ids))

    # ------------------------------------------------------------ public

    def search(
        self,
        query: str,
        flt: MessageFilter,
        top_k: int,
        *,
        mode: Mode = "hybrid",
        config: RecallConfig | None = None,
    ) -> list[SearchHit]:
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "semantic" and not self.has_vectors:
            raise InvalidInputError("semantic search needs an embedder; set embedder in the settings")
        cfg = config or self.config
        # Without vectors "hybrid" still fuses BM25 with the conversation signals.
        effective: Mode = mode
        pool = max(cfg.pool, top_k)
        found = self.candidates(query, flt, pool=pool, mode=effective, config=cfg)
        ranked = self.rank(query, found, mode=effective, config=cfg)
        sessions: dict[str, Session | None] = {
            c.session.id: c.session for c, _, _ in ranked[: top_k * 2] if c.session is not None
        }
        missing = list({c.message.session_id for c, _, _ in ranked[: top_k * 2]} - set(sessions))
        many = getattr(self.store, "get_sessions", None)  # PostgreSQL: one round trip, not one per hit
        if callable(many) and missing:
            sessions.update(many(missing))
        hits: list[SearchHit] = []
        seen: dict[str, list[frozenset[str]]] = defaultdict(list)
        # A repeated line (re-sent, pasted, a bot's stock answer) comes back as many
        # candidates with one text: its words are split once, not once per copy. On LoCoMo
        # turns repeated to 100K messages the loop below passes ~190 candidates per search.
        keys: dict[str, frozenset[str]] = {}
        # Ranked by the fused score (tuned for recall); each hit's score is its calibrated
        # relevance (0-1, what min_score compares against); parts stay in hit.scores.
        for cand, fused, parts in ranked:
            if len(hits) >= top_k:
                break
            msg = cand.message
            # The same line from the same speaker (a repeat, a re-sent message) is listed
            # once, at its best rank; two people saying the same thing are two facts.
            speaker = msg.author_id or msg.author_name or msg.role
            words = keys.get(msg.content)
            if words is None:
                words = keys[msg.content] = near_duplicate_key(msg.content)
            if words and any(_same_text(words, other) for other in seen[speaker]):
                continue
            seen[speaker].append(words)
            sid = cand.message.session_id
            if sid not in sessions:
                sessions[sid] = self.store.get_session(sid)
            hits.append(
                SearchHit(
                    message=cand.message,
                    score=parts.get("relevance", round(fused, 6)),
                    scores={k: round(v, 6) for k, v in parts.items()},
                    snippet=snippet(cand.message.content, query),
                    session=sessions[sid],
                )
            )
        return hits


def _low_percentile(values: NDArray[np.float64], q: float) -> float:
    """``np.percentile(values, q)`` (linear method), bit for bit, for 0 <= q < 100 and more than
    one value. np.percentile's first call in a process imports numpy.ma (~70-110 ms of a fresh
    process's first search); a partition around the two neighbours needs nothing new."""
    import numpy as np

    virtual = (len(values) - 1) * (q / 100)
    lo = math.floor(virtual)
    gamma = virtual - lo
    part = np.partition(values, [lo, lo + 1])
    a, b = float(part[lo]), float(part[lo + 1])
    # numpy's _lerp: from the nearer end, so the result matches np.percentile exactly.
    return b - (b - a) * (1 - gamma) if gamma >= 0.5 else a + (b - a) * gamma
