"""The LoCoMo retrieval evaluation on PostgreSQL agrees with the same run on SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.eval.locomo import evaluate

pytestmark = pytest.mark.postgres

#: How far apart the two stores may land. The log, the vectors and the fusion are the same;
#: the keyword side differs a little (stopword lists, document length counted in lexemes vs
#: tokens; both stem with Snowball), which moves a few evidence turns by a rank or two.
MARGIN = 0.03


def test_locomo_on_postgres_matches_sqlite(locomo_files: list[Path], pg_url: str) -> None:
    longest = locomo_files[0]  # one conversation: 190 turns, 57 questions
    on_pg = evaluate([longest], embedder="hashing", store=pg_url)
    on_sqlite = evaluate([longest], embedder="hashing")
    assert (on_pg["store"], on_sqlite.get("store", "sqlite")) == ("postgres", "sqlite")
    assert on_pg["questions"] == on_sqlite["questions"] > 50
    for metric in ("recall@5", "recall@10", "recall@20", "hit@5"):
        pg, lite = on_pg["overall"][metric], on_sqlite["overall"][metric]
        assert abs(pg - lite) <= MARGIN, (metric, pg, lite)
    for metric in ("recall@5", "recall@10"):
        pg, lite = on_pg["baselines"]["keyword"][metric], on_sqlite["baselines"]["keyword"][metric]
        assert abs(pg - lite) <= MARGIN, ("keyword", metric, pg, lite)
    # same embedder, same vectors: the semantic baseline is identical up to HNSW vs exact
    for metric in ("recall@5", "recall@10"):
        pg, lite = on_pg["baselines"]["semantic"][metric], on_sqlite["baselines"]["semantic"][metric]
        assert abs(pg - lite) <= 0.01, ("semantic", metric, pg, lite)
    assert on_pg["overall"]["recall@10"] > 0.6  # and it is not trivially agreeing at zero
