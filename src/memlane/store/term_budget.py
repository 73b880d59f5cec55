"""Which of a keyword query's OR-ed terms BM25 scores, on a large log.

FTS5 computes ``bm25()`` for every row that matches any OR-ed term before it can sort, so
a search costs about one docsize lookup per matching row: on 100,000 chat messages a
query with a few everyday words ("take", "important", "made": thousands of rows each)
matches a tenth of the log. Those words carry the least weight in BM25 (IDF falls with
document frequency), so past a budget of matching rows the most frequent terms are left
out, rarest first kept. The search engine's coverage part still counts every query word
in the best candidates, so a dropped word still helps rank them.

Logs with at most ``budget`` messages are never pruned (they cannot match more rows),
which covers the LoCoMo evaluation; on the 100,000-message bench this budget kept 97 %
of the hybrid top 10 unchanged while halving the BM25 step (``memlane bench search``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from memlane.lru import LRUCache

#: Matching rows (summed document frequencies) a keyword query may reach before its most
#: frequent terms are left out.
ROW_BUDGET = 12_000


def terms_within_budget(terms: Sequence[str], df: Mapping[str, int], budget: int) -> list[str]:
    """``terms`` (in their order) whose summed document frequencies fit ``budget``, rarest
    first; the rarest term is always kept."""
    kept: set[str] = set()
    total = 0
    for t in sorted(terms, key=lambda t: df[t]):
        if kept and total + df[t] > budget:
            break
        kept.add(t)
        total += df[t]
    return [t for t in terms if t in kept]


class TermBudget:
    """Picks terms within the row budget; caches document frequencies for ``ttl`` seconds
    (they drift slowly, and a stale one only shifts which common word is dropped).

    Not while the keyword index is filling (a bulk import's backlog): frequencies counted
    then are a fraction of the final ones, and kept for ``ttl`` they let every common word
    through once the backlog is indexed, so BM25 scored a tenth of the log for five
    minutes (``memlane bench search``: keyword search 250 ms instead of 0.8 ms at 100,000
    messages). A frequency is also counted again once the log has grown by ``GROWTH``
    since it was cached.
    """

    #: A cached frequency is reused while the log is at most this many times its size then.
    GROWTH = 1.25

    def __init__(self, budget: int = ROW_BUDGET, *, ttl: float = 300.0, cache_size: int = 4096) -> None:
        self.budget = budget
        self._ttl = ttl
        self._df: LRUCache[str, tuple[float, int, int]] = LRUCache(cache_size)

    def select(
        self, terms: list[str], corpus_size: Callable[[], int], doc_freq: Callable[[str], int],
        *, settled: bool = True,
    ) -> list[str]:
        """``terms`` (query order) whose summed document frequencies fit the budget; the
        rarest term is always kept. ``corpus_size`` may over-estimate (a max rowid);
        ``settled`` is False while the index is still being filled (nothing is cached then)."""
        if len(terms) < 2:
            return terms
        return self.select_counted(terms, corpus_size, doc_freq, settled=settled)[0]

    def select_counted(
        self, terms: list[str], corpus_size: Callable[[], int], doc_freq: Callable[[str], int],
        *, settled: bool = True,
    ) -> tuple[list[str], int]:
        """:meth:`select`, and a bound on the rows the kept terms match: their summed
        document frequencies on a large log (a lone term's too), else ``corpus_size``."""
        size = corpus_size()
        if size <= self.budget:
            return terms, size
        df = {t: self._doc_freq(t, doc_freq, size, settled) for t in terms}
        kept = terms_within_budget(terms, df, self.budget)
        return kept, sum(df[t] for t in kept)

    def _doc_freq(self, term: str, count: Callable[[str], int], size: int, settled: bool) -> int:
        if not settled:
            return count(term)
        now = time.monotonic()
        hit = self._df.get(term)
        if hit is not None and now - hit[0] < self._ttl and size <= hit[2] * self.GROWTH:
            return hit[1]
        n = count(term)
        self._df.put(term, (now, n, size))
        return n

    def clear(self) -> None:
        self._df.clear()


class SelectiveFilters:
    """Filters for which a rank-limited keyword pool (the best BM25 rows of the whole log,
    then filtered) last came back short, for ``ttl`` seconds.

    A user who owns 1% of a log rarely has `limit` rows among its best few hundred: the
    store then ranks again over the filter's own rows. Remembering that skips the doomed
    first statement (which scores every matching row) on their next searches; the entry
    expires so a user who grows into most of the log gets the cheap pool again.
    """

    def __init__(self, *, ttl: float = 300.0, size: int = 4096) -> None:
        self._ttl = ttl
        self._seen: LRUCache[tuple[object, ...], float] = LRUCache(size)

    def known(self, key: tuple[object, ...]) -> bool:
        at = self._seen.get(key)
        return at is not None and time.monotonic() - at < self._ttl

    def note(self, key: tuple[object, ...]) -> None:
        self._seen.put(key, time.monotonic())


class OwnedRows:
    """How many messages a filter's owners (session, user, agent, tenant) hold, counted up to
    a limit and kept for ``ttl`` seconds: whether the keyword search ranks the matches among
    those rows alone (store/sqlite.py). A count drifts slowly, and a stale one only picks the
    other of two exact plans."""

    def __init__(self, *, ttl: float = 300.0, size: int = 4096) -> None:
        self._counts: LRUCache[tuple[object, ...], tuple[int, bool]] = LRUCache(size, ttl_seconds=ttl)

    def at_most(self, key: tuple[object, ...], limit: int, count_upto: Callable[[int], int]) -> bool:
        """Whether the owners of ``key`` hold at most ``limit`` rows; ``count_upto(n)`` counts
        them, stopping at ``n``."""
        hit = self._counts.get(key)
        if hit is not None:
            n, exact = hit
            if exact or n > limit:
                return n <= limit
        n = count_upto(limit + 1)
        self._counts.put(key, (n, n <= limit))
        return n <= limit
