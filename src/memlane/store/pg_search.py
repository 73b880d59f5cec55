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

from memlane.models import MessageFilter
from memlane.store.base import KeywordHit
from memlane.store.pg_rows import _M_COLS, _message_where, row_to_message, sessions_join
from memlane.store.postgres_schema import TEXT_CONFIGS
from memlane.store.term_budget import ROW_BUDGET, terms_within_budget
from memlane.text import compound_words, content_words

if TYPE_CHECKING:
    from memlane.store.postgres import Conn, PostgresStore

# BM25 as SQLite FTS5 computes it (k1, b, and IDF clamped to a small positive value).
_K1 = 1.2
_B = 0.75
#: Corpus statistics are recounted on every search below this many messages and cached
#: for ``stats_ttl`` seconds above it (counting document frequencies costs a GIN scan).
EXACT_STATS_BELOW = 5_000
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

    def _doc_freqs(self, conn: Conn, words: Sequence[str]) -> dict[str, int]:
        """Document frequency of each lexeme of ``words``; per word, cached for stats_ttl."""
        now = time.monotonic()
        df: dict[str, int] = {}
        missing: list[str] = []
        with self._stats_lock:
            for w in words:
                lexemes = self._lexemes.get(w)
                hits = [self._df.get(lex) for lex in lexemes or ()]
                fresh = [h[1] for h in hits if h is not None and now - h[0] < self._stats_ttl]
                if lexemes is None or len(fresh) < len(lexemes):
                    missing.append(w)
                else:
                    df.update(zip(lexemes, fresh, strict=True))
        if not missing:
            return df
        rows = conn.execute(
            f"SELECT w, l.lexeme, (SELECT count(*) FROM messages m WHERE m.tsv @@ {_QUOTED_LEXEME}) "
            f"FROM unnest(%s::text[]) AS w LEFT JOIN LATERAL unnest({every_config_tsvector('w')}) AS l ON true",
            (missing,),
        ).fetchall()
        found: dict[str, list[str]] = {w: [] for w in missing}
        for w, lexeme, count in rows:
            if lexeme is not None:
                found[w].append(lexeme)
                df[lexeme] = int(count)
        with self._stats_lock:
            if len(self._df) > 50_000:  # a bound, not an LRU: refilling is cheap
                self._df.clear()
                self._lexemes.clear()
            for w, new in found.items():
                self._lexemes[w] = tuple(new)
                self._df.update({lex: (now, df[lex]) for lex in new})
        return df

    def search(self, store: PostgresStore, query: str, flt: MessageFilter, limit: int) -> list[KeywordHit]:
        found = content_words(query)
        words = list(dict.fromkeys(found + compound_words(found, query)))
        if not words:
            return []
        where, params = _message_where(flt)
        join = sessions_join(flt)
        # BM25 per candidate. ts_filter(setweight(...)) keeps only the query's lexemes of
        # the row (C functions), so the unnest that reads their term frequencies stays tiny.
        # Only ids and scores are ranked; the k winners' full rows are fetched after.
        rank = (
            "CROSS JOIN LATERAL (SELECT sum(w.idf * (t.tf * {k1p1}) / "
            "(t.tf + {k1} * (1 - {b} + {b} * length(m.tsv) / {avgdl}))) AS score "
            "FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS tf "
            "FROM unnest(ts_filter(setweight(m.tsv, 'A', {lexemes}), '{{a}}')) u) t "
            "JOIN w ON w.lexeme = t.lexeme) sc"
        )
        top = (
            "top AS (SELECT m.id, sc.score FROM messages m {join} {rank} "
            f"WHERE m.tsv @@ {{query}} {where} ORDER BY sc.score DESC, m.id LIMIT %s)"
        )
        fetch = f"SELECT {_M_COLS}, top.score FROM top JOIN messages m ON m.id = top.id ORDER BY top.score DESC, m.id"

        def run(conn: Conn) -> list[Any]:
            n_docs, avgdl = self._corpus(conn)
            if n_docs < self._exact_below:
                # A small log: count N, the average length and every document frequency
                # exactly, in the same statement as the search (one round trip).
                ranked = rank.format(k1p1=_K1 + 1, k1=_K1, b=_B, avgdl="c.avgdl", lexemes="lx.arr")
                return conn.execute(
                    f"""
                    WITH lit AS (
                        SELECT DISTINCT lexeme, {_QUOTED_LEXEME} AS query
                        FROM (SELECT %s::text AS t) q
                        CROSS JOIN LATERAL unnest({every_config_tsvector("q.t")}) AS l),
                    lx AS (SELECT array_agg(lexeme) AS arr,
                                  string_agg(query::text, ' | ')::tsquery AS query FROM lit),
                    corpus AS (SELECT count(*)::float8 AS n,
                                      greatest(coalesce(avg(length(tsv)), 1), 1)::float8 AS avgdl
                               FROM messages),
                    w AS (SELECT lit.lexeme,
                                 greatest(1e-6, ln((c.n - d.df + 0.5) / (d.df + 0.5))) AS idf
                          FROM lit CROSS JOIN corpus c
                          CROSS JOIN LATERAL (SELECT count(*) AS df FROM messages x
                                              WHERE x.tsv @@ lit.query) d),
                    {top.format(join=join + " CROSS JOIN lx CROSS JOIN corpus c", rank=ranked, query="lx.query")}
                    {fetch}
                    """,
                    (" ".join(words), *params, int(limit)),
                ).fetchall()
            df = self._doc_freqs(conn, words)
            if not df:
                return []  # only stopwords of the text-search config
            lexemes = sorted(df)
            if n_docs > self.row_budget:
                # As on SQLite (term_budget.py): every row matching any OR-ed lexeme is
                # scored before the sort, so the most frequent lexemes are left out.
                lexemes = terms_within_budget(lexemes, df, self.row_budget)
            idf = [fts5_idf(n_docs, df[lex]) for lex in lexemes]
            ranked = rank.format(k1p1=_K1 + 1, k1=_K1, b=_B, avgdl="%s", lexemes="%s::text[]")
            return conn.execute(
                f"""
                WITH w(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),
                {top.format(join=join, rank=ranked, query="%s::tsquery")}
                {fetch}
                """,
                (lexemes, idf, avgdl, lexemes, tsquery_literal(lexemes), *params, int(limit)),
            ).fetchall()

        rows = store._run(run, write=False)
        return [KeywordHit(row_to_message(r[:-1]), float(r[-1])) for r in rows]
