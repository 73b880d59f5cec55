"""The VectorIndex contract's checks, shared by the SQLite and pgvector indexes.

Both keep the model in ``vector_meta`` under the same keys and refuse the same things
(another model while vectors are stored, a vector or query of the wrong width), so the
rules and their messages live here once; each index keeps only how it stores and ranks.
numpy is imported inside the functions: the SQLite store opens without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memlane.errors import EmbedderMismatchError, InvalidInputError
from memlane.ports import ModelInfo
from memlane.store.filters import Dialect

if TYPE_CHECKING:
    from memlane.ports import Vectors

__all__ = ["META_KEYS", "check_claim", "checked_query", "checked_rows", "meta_select", "model_info_of", "write_model_info"]

#: The ``vector_meta`` keys that name the model of the stored vectors.
META_KEYS = ("model_id", "dimension", "recipe")


def meta_select(d: Dialect) -> tuple[str, list[Any]]:
    """The query (and parameters) reading the model's ``(key, value)`` rows."""
    clause, params = d.in_list("key", META_KEYS)
    return f"SELECT key, value FROM vector_meta WHERE {clause}", params


def model_info_of(rows: Iterable[Sequence[Any]]) -> ModelInfo | None:
    """The model named by ``(key, value)`` rows of ``vector_meta``; None before any claim."""
    meta = {str(r[0]): r[1] for r in rows}
    if "model_id" not in meta:
        return None
    return ModelInfo(str(meta["model_id"]), int(meta["dimension"]), str(meta.get("recipe", "")))


def check_claim(conn: Any, d: Dialect, info: ModelInfo) -> bool:
    """Refuse to record ``info`` while vectors of another model are kept, inside the
    claiming transaction; returns whether any vectors are stored."""
    if info.dimension < 1:
        raise InvalidInputError("dimension must be positive")
    stored: dict[str, Any] = dict(conn.execute(*meta_select(d)).fetchall())
    has_vectors = conn.execute("SELECT 1 FROM message_vectors LIMIT 1").fetchone() is not None
    if has_vectors and stored.get("model_id") and (
        stored.get("model_id") != info.model_id
        or int(stored.get("dimension", 0)) != info.dimension
        or stored.get("recipe", "") != info.recipe
    ):
        raise EmbedderMismatchError(
            "cannot record a new embedder while vectors of another one are stored; "
            "run `memlane reindex`"
        )
    return has_vectors


def write_model_info(conn: Any, d: Dialect, info: ModelInfo) -> None:
    """Record ``info`` in ``vector_meta`` (after :func:`check_claim`)."""
    m = d.mark
    for key, value in zip(META_KEYS, (info.model_id, str(info.dimension), info.recipe), strict=True):
        conn.execute(
            f"INSERT INTO vector_meta (key, value) VALUES ({m}, {m}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


def checked_rows(ids: Sequence[int], vectors: Vectors, info: ModelInfo | None) -> tuple[list[int], Vectors]:
    """``ids`` as ints and ``vectors`` as float32 rows, one per id and of the model's width."""
    import numpy as np

    id_list = [int(i) for i in ids]
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(id_list):
        raise InvalidInputError(
            f"upsert needs one row per id: got {len(id_list)} ids and shape {matrix.shape}"
        )
    if info is not None and matrix.shape[1] != info.dimension:
        raise EmbedderMismatchError(
            f"vectors of width {matrix.shape[1]} do not fit this index ({info.describe()}); "
            "run `memlane reindex`"
        )
    return id_list, matrix


def checked_query(query: Vectors, dimension: int) -> Vectors:
    """``query`` as one float32 row of the index's width."""
    import numpy as np

    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != dimension:
        raise EmbedderMismatchError(
            f"query vector has {q.shape[0]} dimensions, the index {dimension}; "
            "run `memlane reindex`"
        )
    return q
