"""Rebuild the derived search indexes from the log (``memlane reindex``).

The log is the source of truth: the keyword index is rebuilt by the store, and every
vector is dropped and made again with the configured embedder. The same command is the
backfill for a database written before vectors existed and the way to switch embedders.
Stop processes that write to the database while it runs: a writer that opened the
database with the old embedder would keep adding vectors of the old model.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from memlane.models import Message
from memlane.search.documents import RECIPE, documents_for
from memlane.search.embedders import Embedder
from memlane.search.vectors import EMBEDDED_ROLES, ModelInfo, VectorIndex
from memlane.store import Store

#: (what, done, total) — total is 0 when unknown
ReindexProgress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class ReindexResult:
    messages: int
    embedded: int
    model: ModelInfo | None


def reindex(
    store: Store,
    index: VectorIndex | None,
    embedder: Embedder | None,
    *,
    batch_size: int = 64,
    progress: ReindexProgress | None = None,
) -> ReindexResult:
    """Rebuild the keyword index, then all vectors (or remove them when embedder is None)."""
    if progress:
        progress("keyword index", 0, 0)
    total = store.rebuild_keyword_index()
    if progress:
        progress("keyword index", total, total)
    if index is None:
        return ReindexResult(total, 0, None)
    index.clear()
    if embedder is None:
        return ReindexResult(total, 0, None)
    info = ModelInfo(embedder.model_id, embedder.dimension, RECIPE)
    index.set_model_info(info)
    done = 0
    embedded = 0
    batch: list[Message] = []

    def flush_batch() -> None:
        nonlocal embedded
        if batch:
            vectors = embedder.embed(documents_for(store, batch))
            embedded += index.upsert([m.id for m in batch if m.id is not None], vectors)
            batch.clear()

    bulk = getattr(index, "bulk_load", None)  # pgvector: build the HNSW graph once, at the end
    with bulk() if callable(bulk) else nullcontext():
        for msg in store.iter_messages(batch=500):
            done += 1
            if msg.role in EMBEDDED_ROLES and msg.content and msg.id is not None:
                batch.append(msg)
                if len(batch) >= batch_size:
                    flush_batch()
            if progress and (done % batch_size == 0):
                progress("vectors", done, total)
        flush_batch()
    if progress:
        progress("vectors", done, total)
    return ReindexResult(total, embedded, info)
