"""Keyword search of the PostgreSQL store: BM25 over the generated ``tsvector``.

Why BM25 and not ``ts_rank_cd``: cover density has no inverse document frequency, so
with OR-ed query words (memlane's queries are OR-ed content words, as on SQLite) a
message matching a common word scored like one matching a rare one, and rankings
drifted from the SQLite store's. BM25 here uses FTS5's k1, b and IDF formula; term
frequencies come from the lexeme positions, document length is counted in lexemes.

Corpus statistics (N, average length, document frequencies) are exact and computed in
the search statement itself for small logs; above ``exact_below`` messages they are
cached per process for ``stats_ttl`` seconds, so a search stays one round trip.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlane.models import MessageFilter, Session
from memlane.store.base import KeywordHit
from memlane.store.pg_rows import (
    _M_COLS,
    _SESSION_COLS,
    _message_where,
    row_to_message,
    row_to_session,
    sessions_join,
)
from memlane.store.postgres_schema import TEXT_CONFIGS
from memlane.store.term_budget import ROW_BUDGET
from memlane.text import compound_words, content_words

if TYPE_CHECKING:
    from memlane.store.postgres import Conn, PostgresStore

# BM25 as SQLite FTS5 computes it (k1, b, and IDF clamped to a small positive value).
_K1 = 1.2
_B = 0.75
#: Corpus statistics are recounted on every search below this many messages and cached
#: for ``stats_ttl`` seconds above it (counting document frequencies costs a GIN scan).
EXACT_STATS_BELOW = 5_000
#: The best ``limit`` rows by BM25, given ``lx`` (one row: the query's lexemes ``arr`` with
#: their ``idfs`` in the same order, the OR-ed ``query`` and ``avgdl``). ts_filter(setweight())
#: keeps only the row's query lexemes (C functions). Most chat messages match one lexeme of
#: the query: then its term frequency is the count of weight marks 'A' in the text form
#: (lexemes are lower-case in the english and german configurations, so the marks are
#: the only capital A), which is a quarter of the server's time cheaper than the sub-select
#: over unnest() that rows with several lexemes take. OFFSET 0 keeps the filtered vector
#: computed once per row (the planner would otherwise inline it into every use).
_TOP = f"""top AS (
    SELECT r.id, CASE WHEN length(r.f) = 1
        THEN lx.idfs[array_position(lx.arr, (tsvector_to_array(r.f))[1])] * (r.tf * {_K1 + 1}) / (r.tf + r.k)
        ELSE (SELECT sum(lx.idfs[array_position(lx.arr, u.lexeme)] * (t.tf * {_K1 + 1}) / (t.tf + r.k))
              FROM unnest(r.f) u
              CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) t)
        END AS score
    FROM lx CROSS JOIN LATERAL (
        SELECT m.id, f.f,
               greatest(length(f.f::text) - length(replace(f.f::text, 'A', '')), 1)::float8 AS tf,
               {_K1}::float8 * (1 - {_B}::float8 + {_B}::float8 * length(m.tsv) / lx.avgdl) AS k
        FROM messages m {{join}}
        CROSS JOIN LATERAL (SELECT ts_filter(setweight(m.tsv, 'A', lx.arr), '{{{{a}}}}') AS f) f
        WHERE m.tsv @@ lx.query {{where}} OFFSET 0) r
    ORDER BY score DESC, r.id LIMIT %s)"""
#: The session columns of a hit, named apart from the message's.
_HIT_SESSION_COLS = ", ".join(f"ss.{c} AS session_{c}" for c in _SESSION_COLS.split(", "))
_N_MESSAGE_COLS = len(_M_COLS.split(", "))
_N_SESSION_COLS = len(_SESSION_COLS.split(", "))
#: The winners' full rows (only ids and scores were ranked), the text of their adjacent
#: turns in the same session (the search engine's coverage part reads them) and their
#: session (each hit is labelled with it): read here, neither costs a round trip of its own.
_FETCH = f"""SELECT {_M_COLS}, p.content AS prev_text, n.content AS next_text, {_HIT_SESSION_COLS}, top.score
    FROM top JOIN messages m ON m.id = top.id
    LEFT JOIN messages p ON p.id = m.id - 1 AND p.session_id = m.session_id
    LEFT JOIN messages n ON n.id = m.id + 1 AND n.session_id = m.session_id
    LEFT JOIN sessions ss ON ss.id = m.session_id
    ORDER BY top.score DESC, m.id"""
#: The row budget of a log too small to exceed it (a bigint: every lexeme is kept).
_NO_BUDGET = 2**62
#: ``l.lexeme`` as a one-lexeme tsquery (quoted: a lexeme may hold quotes or backslashes).
_QUOTED_LEXEME = r"""('''' || replace(replace(l.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery"""


def every_config_tsvector(text_sql: str) -> str:
    """SQL of the lexemes of ``text_sql`` in every language's configuration, merged: a
    message is stemmed in its own language (migration 10), so a query word is looked up
    by its stem in each ("Datenbanken": 'datenbank' in German, 'datenbanken' in English)."""
    return " || ".join(f"to_tsvector('{config}'::regconfig, {text_sql})" for config in TEXT_CONFIGS.values())


def tsquery_literal(lexemes: Sequence[str]) -> str:
    """An OR-query of exact lexemes in tsquery syntax (quotes and backslashes escaped)."""
    quoted = ("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)
    return " | ".join(quoted)


def fts5_idf(n_docs: int, df: int) -> float:
    """FTS5's IDF: log((N - df + 0.5) / (df + 0.5)), never below 1e-6."""
    return max(1e-6, math.log((n_docs - df + 0.5) / (df + 0.5))) if n_docs > 0 else 1e-6


class Bm25Index:
    """The search half of the keyword index (the GIN index and tsvector are the schema's)."""

    def __init__(
        self, *, stats_ttl: float = 30.0, exact_below: int = EXACT_STATS_BELOW, row_budget: int = ROW_BUDGET
    ) -> None:
        self._stats_ttl = stats_ttl
        self._exact_below = exact_below
        self.row_budget = row_budget
        self._stats_lock = threading.Lock()
        self._corpus_cache: tuple[float, int, float] | None = None  # (fetched_at, N, avgdl)
        self._df: dict[str, tuple[float, int]] = {}  # lexeme -> (fetched_at, document frequency)
        self._lexemes: dict[str, tuple[str, ...]] = {}  # query word -> its lexemes

    def clear(self) -> None:
        """Forget cached statistics (after a rebuild)."""
        with self._stats_lock:
            self._corpus_cache = None
            self._df.clear()
            self._lexemes.clear()

    def _corpus(self, conn: Conn) -> tuple[int, float]:
        """(N, average document length in lexemes), recounted every ``stats_ttl`` seconds."""
        now = time.monotonic()
        with self._stats_lock:
            corpus = self._corpus_cache
        if corpus is not None and now - corpus[0] < self._stats_ttl:
            return corpus[1], corpus[2]
        row = conn.execute("SELECT count(*), avg(length(tsv)) FROM messages").fetchone()
        assert row is not None
        fresh = (now, int(row[0]), max(float(row[1] or 1.0), 1.0))
        with self._stats_lock:
            self._corpus_cache = fresh
        return fresh[1], fresh[2]

    def _known_doc_freqs(self, words: Sequence[str]) -> tuple[list[str], list[int]]:
        """Cached document frequencies of the lexemes of ``words`` whose every lexeme is
        fresh (younger than ``stats_ttl``); the search statement counts the others."""
        now = time.monotonic()
        known: dict[str, int] = {}
        with self._stats_lock:
            for w in words:
                lexemes = self._lexemes.get(w)
                hits = [self._df.get(lex) for lex in lexemes or ()]
                fresh = [h[1] for h in hits if h is not None and now - h[0] < self._stats_ttl]
                if lexemes is not None and len(fresh) == len(lexemes):
                    known.update(zip(lexemes, fresh, strict=True))
        return list(known), list(known.values())

    def _remember_doc_freqs(self, words: Sequence[str], found: Sequence[tuple[str, str, int]]) -> None:
        """Cache what a search statement reported: each word's lexemes and their frequencies
        (a word without lexemes, a stopword in every configuration, is cached as such)."""
        now = time.monotonic()
        by_word: dict[str, list[str]] = {w: [] for w in words}
        with self._stats_lock:
            if len(self._df) > 50_000:  # a bound, not an LRU: refilling is cheap
                self._df.clear()
                self._lexemes.clear()
            for w, lexeme, count in found:
                by_word.setdefault(w, []).append(lexeme)
                fresh = self._df.get(lexeme)
                if fresh is None or now - fresh[0] >= self._stats_ttl:
                    self._df[lexeme] = (now, int(count))
            for w, lexemes in by_word.items():
                self._lexemes[w] = tuple(dict.fromkeys(lexemes))

    def search(self, store: PostgresStore, query: str, flt: MessageFilter, limit: int) -> list[KeywordHit]:
        return self.search_many(store, [query], flt, limit)[0]

    def search_many(
        self, store: PostgresStore, queries: Sequence[str], flt: MessageFilter, limit: int
    ) -> list[list[KeywordHit]]:
        """Each query's hits, all statements sent in one pipeline (one round trip).

        Each runs with its generic plan: psycopg prepares a statement on its fifth run,
        but PostgreSQL still planned this one anew on every run (it costs the generic
        plan above the custom ones; its lexemes are computed inside it, so no parameter
        changes the plan), a quarter of its time. ``plan_cache_mode`` is set around these
        statements alone, in the same pipeline, so the other statements (a vector search
        with a user filter) keep custom plans; if one fails, the pipeline's implicit
        transaction rolls the SET back."""
        wordlists = []
        for query in queries:
            found = content_words(query)
            wordlists.append(list(dict.fromkeys(found + compound_words(found, query))))
        if not any(wordlists):
            return [[] for _ in queries]
        where, params = _message_where(flt)
        top = _TOP.format(join=sessions_join(flt), where=where)

        def run(conn: Conn) -> list[list[Any]]:
            n_docs, avgdl = self._corpus(conn)
            statements = [
                self._statement(words, top, params, int(limit), n_docs, avgdl) if words else None
                for words in wordlists
            ]
            with conn.pipeline():
                conn.execute("SET plan_cache_mode = force_generic_plan", prepare=False)
                cursors = [conn.execute(*st) if st is not None else None for st in statements]
                conn.execute("RESET plan_cache_mode", prepare=False)
            out: list[list[Any]] = []
            for words, cur in zip(wordlists, cursors, strict=True):
                rows = cur.fetchall() if cur is not None else []
                if rows and n_docs >= self._exact_below:
                    # the large-log statement reports its counted frequencies in each row
                    counted_words, lexemes, dfs = rows[0][:3]
                    found = list(zip(counted_words or (), lexemes or (), dfs or (), strict=True))
                    self._remember_doc_freqs(words, found)
                    rows = [r[3:] for r in rows if r[3] is not None]
                out.append(rows)
            return out

        return [_hits(rows) for rows in store._run(run, write=False)]

    def _statement(
        self, words: list[str], top: str, params: Sequence[Any], limit: int, n_docs: int, avgdl: float
    ) -> tuple[str, tuple[Any, ...]]:
        """The search statement of one query's ``words`` and its parameters."""
        if n_docs < self._exact_below:
            # A small log: count N, the average length and every document frequency
            # exactly, in the same statement as the search (one round trip).
            return (
                f"""
                WITH lit AS (
                    SELECT DISTINCT lexeme, {_QUOTED_LEXEME} AS query
                    FROM (SELECT %s::text AS t) q
                    CROSS JOIN LATERAL unnest({every_config_tsvector("q.t")}) AS l),
                corpus AS (SELECT count(*)::float8 AS n,
                                  greatest(coalesce(avg(length(tsv)), 1), 1)::float8 AS avgdl
                           FROM messages),
                w AS (SELECT lit.lexeme,
                             greatest(1e-6, ln((c.n - d.df + 0.5) / (d.df + 0.5))) AS idf
                      FROM lit CROSS JOIN corpus c
                      CROSS JOIN LATERAL (SELECT count(*) AS df FROM messages x
                                          WHERE x.tsv @@ lit.query) d),
                lx AS (SELECT array_agg(w.lexeme ORDER BY w.lexeme) AS arr,
                              array_agg(w.idf ORDER BY w.lexeme) AS idfs,
                              (SELECT string_agg(query::text, ' | ')::tsquery FROM lit) AS query,
                              (SELECT avgdl FROM corpus) AS avgdl
                       FROM w),
                {top}
                {_FETCH}
                """,
                (" ".join(words), *params, limit),
            )
        # A large log: N and the average length come from the cache, so do document
        # frequencies where fresh; the statement counts the others itself, keeps the
        # lexemes within the row budget (term_budget.py) and reports its counts in the
        # first row, so the search stays one round trip when a query brings new words.
        known_lexemes, known_dfs = self._known_doc_freqs(words)
        budget = self.row_budget if n_docs > self.row_budget else _NO_BUDGET
        return (
            f"""
            WITH wl AS (
                SELECT w, l.lexeme FROM unnest(%s::text[]) AS w
                CROSS JOIN LATERAL unnest({every_config_tsvector("w")}) AS l),
            known(lexeme, df) AS (SELECT * FROM unnest(%s::text[], %s::bigint[])),
            d AS (
                SELECT l.lexeme, {_QUOTED_LEXEME} AS query,
                       coalesce(k.df, (SELECT count(*) FROM messages x
                                       WHERE x.tsv @@ {_QUOTED_LEXEME})) AS df
                FROM (SELECT DISTINCT lexeme FROM wl) l LEFT JOIN known k ON k.lexeme = l.lexeme),
            kept AS (
                SELECT lexeme, query, df FROM (
                    SELECT d.*, sum(df) OVER o AS cum, row_number() OVER o AS n FROM d
                    WINDOW o AS (ORDER BY df, lexeme COLLATE "C" ROWS UNBOUNDED PRECEDING)) b
                WHERE n = 1 OR cum <= %s),
            lx AS (SELECT array_agg(lexeme ORDER BY lexeme) AS arr,
                          array_agg(greatest(1e-6, ln(greatest(%s - df + 0.5, 1e-300) / (df + 0.5)))
                                    ORDER BY lexeme) AS idfs,
                          string_agg(query::text, ' | ')::tsquery AS query, %s::float8 AS avgdl
                   FROM kept),
            {top},
            found AS ({_FETCH}),
            counted AS (SELECT array_agg(wl.w) AS words, array_agg(wl.lexeme) AS lexemes,
                               array_agg(d.df) AS dfs FROM wl JOIN d ON d.lexeme = wl.lexeme)
            SELECT counted.words, counted.lexemes, counted.dfs, found.*
            FROM counted LEFT JOIN found ON true ORDER BY found.score DESC, found.id
            """,
            (words, known_lexemes, known_dfs, budget, float(n_docs), avgdl, *params, limit),
        )


def _hits(rows: Sequence[Sequence[Any]]) -> list[KeywordHit]:
    """Keyword hits from rows of ``_FETCH`` (each session decoded once, however many hits it has)."""
    sessions: dict[str, Session | None] = {}
    out: list[KeywordHit] = []
    for r in rows:
        message = row_to_message(r[:_N_MESSAGE_COLS])
        adjacent = tuple(t for t in r[_N_MESSAGE_COLS:_N_MESSAGE_COLS + 2] if t is not None)
        if message.session_id not in sessions:
            srow = r[_N_MESSAGE_COLS + 2:_N_MESSAGE_COLS + 2 + _N_SESSION_COLS]
            sessions[message.session_id] = row_to_session(srow) if srow[0] is not None else None
        out.append(KeywordHit(message, float(r[-1]), adjacent, sessions[message.session_id]))
    return out
