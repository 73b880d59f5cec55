"""Keyword search on SQLite: it ranks in the full-text index first and joins only the best
rows (exact even when a filter rejects most of them), and on a large log it leaves the most
frequent query terms out (term_budget.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.models import Message, MessageFilter, Session
from memlane.store import SQLiteStore
from memlane.store.sqlite_rows import _message_where
from memlane.store.term_budget import OwnedRows, SelectiveFilters, TermBudget
from memlane.text import fts5_match, fts5_terms


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "kw.db", durability="normal")
    yield s
    s.close()


def _fill(store: SQLiteStore) -> None:
    # "ana" owns many short messages that BM25 ranks above all of "ben"'s longer ones.
    store.create_session(Session(id="a", user_id="ana"))
    store.create_session(Session(id="b", user_id="ben"))
    store.append("a", [Message(role="user", content=f"kayak kayak {i}") for i in range(300)])
    store.append("b", [
        Message(role="user", content=f"we talked for hours about many things and then the kayak {i}")
        for i in range(4)
    ])


def test_selective_filter_finds_rows_below_the_unfiltered_best(store: SQLiteStore) -> None:
    _fill(store)
    hits = store.keyword_search("kayak", MessageFilter(user_id="ben"), limit=10)
    assert sorted(h.message.content[-1] for h in hits) == ["0", "1", "2", "3"]
    assert {h.message.session_id for h in hits} == {"b"}
    # fewer than asked pass in a pool that is all "ana": the exact path still fills the limit
    assert len(store.keyword_search("kayak", MessageFilter(user_id="ben"), limit=2)) == 2


def _key(flt: MessageFilter) -> tuple[object, ...]:
    where, params = _message_where(flt)
    return (where, *params)


def test_a_filter_whose_pool_fell_short_is_ranked_over_its_own_rows_next_time(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memlane.store.sqlite as sqlite_store

    # owners holding many rows against the matches (else their own rows are ranked first)
    monkeypatch.setattr(sqlite_store, "OWNED_PER_MATCH", 0)
    _fill(store)
    ben = MessageFilter(user_id="ben")
    first = store.keyword_search("kayak", ben, limit=10)
    assert store._selective.known(_key(ben))  # remembered: the pool was short
    again = store.keyword_search("kayak", ben, limit=10)  # one statement now, same answer
    assert [(h.message.id, h.score) for h in again] == [(h.message.id, h.score) for h in first]
    store.append("b", [Message(role="user", content="kayak again")])
    assert "kayak again" in {h.message.content for h in store.keyword_search("kayak", ben, limit=10)}
    # "ana" fills the pool: never remembered, and a query too rare to fill any pool neither
    store.keyword_search("kayak", MessageFilter(user_id="ana"), limit=10)
    store.keyword_search("hours", MessageFilter(user_id="ana"), limit=10)
    assert not store._selective.known(_key(MessageFilter(user_id="ana")))


def test_selective_filters_are_forgotten_after_their_ttl() -> None:
    filters = SelectiveFilters(ttl=0.0)
    filters.note(("x",))
    assert not filters.known(("x",))
    assert not SelectiveFilters().known(("x",))


def _owners_log(store: SQLiteStore) -> None:
    # "ann" owns one session in twenty of a log whose words every session shares
    for i in range(40):
        user = "ann" if i % 20 == 0 else None if i % 7 == 0 else f"u{i}"
        store.create_session(Session(id=f"s{i}", user_id=user, agent_id="bot",
                                     tenant_id="t1" if i % 2 else "t0"))
        store.append(f"s{i}", [
            Message(role="user" if j % 2 == 0 else "assistant",
                    content=f"the kayak trip {'went well' if j % 3 else 'was long and wet'} {i} {j}")
            for j in range(12)
        ])
    store.hide_messages("s20")


@pytest.mark.parametrize("flt", [
    MessageFilter(user_id="ann"), MessageFilter(session_id="s3"), MessageFilter(user_id="ann", roles=["assistant"]),
    MessageFilter(tenant_id="t1", user_id="u5"), MessageFilter(user_id="ann", include_hidden=True),
    MessageFilter(agent_id="bot"), MessageFilter(tenant_id="t0", unowned=True),
])
def test_ranking_among_the_owners_rows_is_the_filtered_ranking(
    store: SQLiteStore, flt: MessageFilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memlane.store.sqlite as sqlite_store

    _owners_log(store)
    # the same hits, scores and order whichever plan ranks them
    monkeypatch.setattr(sqlite_store, "OWNED_PER_MATCH", 1_000)  # the owners' rows first
    owned = [(h.message.id, h.score) for h in store.keyword_search("kayak long wet", flt, limit=15)]
    monkeypatch.setattr(sqlite_store, "OWNED_PER_MATCH", 0)  # every match joined and filtered
    store._owned = OwnedRows()
    joined = [(h.message.id, h.score) for h in store.keyword_search("kayak long wet", flt, limit=15)]
    assert owned == joined
    if flt.user_id == "ann":
        sessions = {store.get_messages([mid])[0].session_id for mid, _ in owned}
        assert sessions == ({"s0", "s20"} if flt.include_hidden else {"s0"})  # s20's are hidden


def test_owned_rows_are_counted_once_up_to_the_limit() -> None:
    asked: list[int] = []

    def count_upto(n: int) -> int:
        asked.append(n)
        return min(n, 30)

    owned = OwnedRows()
    assert not owned.at_most(("ann",), 10, count_upto)  # counting stopped at 11
    assert not owned.at_most(("ann",), 5, count_upto)  # known to exceed 10: not counted again
    assert owned.at_most(("ann",), 40, count_upto)  # a higher limit counts again, exactly
    assert owned.at_most(("ann",), 30, count_upto)
    assert not owned.at_most(("ann",), 29, count_upto)
    assert asked == [11, 41]
    assert OwnedRows(ttl=0.0).at_most(("x",), 40, count_upto) and asked == [11, 41, 41]


def test_loose_filter_keeps_bm25_order(store: SQLiteStore) -> None:
    _fill(store)
    every = store.keyword_search("kayak", MessageFilter(), limit=400)
    assert len(every) == 304
    scores = [h.score for h in every]
    assert scores == sorted(scores, reverse=True)
    # the filtered search returns the best filtered rows of the unfiltered ranking (ties
    # may come in any order, so compare scores)
    ana = store.keyword_search("kayak", MessageFilter(user_id="ana"), limit=20)
    assert [h.score for h in ana] == pytest.approx([h.score for h in every if h.message.session_id == "a"][:20])


def _log(store: SQLiteStore) -> None:
    store.create_session(Session(id="c", user_id="cy"))
    store.append("c", [
        Message(role="user", content=f"a common remark number {i}" + (" about a zebra" if i % 40 == 0 else ""))
        for i in range(200)
    ])


def test_small_log_keeps_every_term(store: SQLiteStore) -> None:
    _log(store)
    hits = store.keyword_search("common zebra", MessageFilter(), limit=500)
    assert len(hits) == 200
    # the rows with both words rank first
    assert all("zebra" in h.message.content for h in hits[:5])


def test_large_log_drops_the_most_frequent_terms(store: SQLiteStore) -> None:
    _log(store)
    store._term_budget = TermBudget(budget=50)  # this log counts as large for this budget
    assert budget_terms(store, "common zebra") == ["zebra"]
    hits = store.keyword_search("common zebra", MessageFilter(), limit=500)
    assert sorted(h.message.content for h in hits) == sorted(
        f"a common remark number {i} about a zebra" for i in range(0, 200, 40)
    )
    # a lone term is always kept, however frequent
    assert len(store.keyword_search("common", MessageFilter(), limit=500)) == 200
    # terms that fit the budget together are all kept
    assert budget_terms(store, "zebra 40 120") == ["zebra", "40", "120"]


def budget_terms(store: SQLiteStore, query: str) -> list[str]:
    store.index_pending_keywords()  # as keyword_search does before it counts (SQLite migration 18)
    count = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    return store._term_budget.select(
        fts5_terms(query),
        lambda: int(store.read("SELECT MAX(id) FROM messages")[0][0]),
        lambda t: int(store.read(count, (fts5_match([t]),))[0][0]),
    )


def test_frequencies_counted_while_the_index_fills_are_not_kept(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bulk import's backlog (more than a search catches up on itself) is indexed in the
    # background; a search meanwhile sees a fraction of each word's rows. Kept, those
    # counts let "common" through once every row is indexed, and BM25 scored all of them.
    import memlane.store.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "SEARCH_CATCH_UP", 10)
    store._term_budget = TermBudget(budget=50)
    _log(store)  # 200 rows pending
    store.index_pending_keywords(limit=30)  # the background thread got this far
    assert {h.message.content for h in store.keyword_search("common zebra", MessageFilter(), limit=500)} >= {
        "a common remark number 1"  # 30 rows of "common" fit the budget: kept
    }
    store.index_pending_keywords()  # the backlog is gone
    hits = store.keyword_search("common zebra", MessageFilter(), limit=500)
    assert sorted(h.message.content for h in hits) == sorted(
        f"a common remark number {i} about a zebra" for i in range(0, 200, 40)
    )


def test_a_cached_frequency_is_counted_again_once_the_log_has_grown() -> None:
    counts = {"common": 10, "zebra": 1}
    asked: list[str] = []

    def doc_freq(term: str) -> int:
        asked.append(term)
        return counts[term]

    budget = TermBudget(budget=50)
    assert budget.select(["common", "zebra"], lambda: 100, doc_freq) == ["common", "zebra"]
    assert budget.select(["common", "zebra"], lambda: 120, doc_freq) == ["common", "zebra"]
    assert asked == ["common", "zebra"]  # within GROWTH: cached
    counts["common"] = 60
    assert budget.select(["common", "zebra"], lambda: 200, doc_freq) == ["zebra"]
    assert budget.select(["common", "zebra"], lambda: 200, doc_freq, settled=False) == ["zebra"]
    assert asked == ["common", "zebra"] * 3  # grown, then not settled: counted each time
