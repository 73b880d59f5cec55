"""Which embedder and vector index recall uses, and recalled context for a prompt.

``memlane.components`` makes the search part from ``mem.settings.embedder``:

* ``"minilm"`` (default), ``"hashing"``, ``"st:..."``, ``"openai:..."``, ``"ollama:..."``:
  vectors are kept for user/assistant/system messages and search is hybrid;
* ``"none"`` / ``"off"`` / ``""``: no vectors; search is keyword-only (BM25) with the same
  conversation signals.

That sets ``mem.parts.recall`` (the :class:`RecallEngine`: Memory.search calls it; modes and
tuning), ``mem.parts.indexer`` and its flush and forget hooks. Each store provides its
vector index through ``store.vector_index()`` (SQLite: a table in the same file;
PostgreSQL: pgvector).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memlane.errors import InvalidInputError
from memlane.models import Message, SearchHit
from memlane.search.documents import RECIPE
from memlane.search.embedders import MINILM_F32_MODEL_ID, Embedder, MiniLMEmbedder, get_embedder
from memlane.search.relevance import DEFAULT_FLOOR
from memlane.search.vectors import ModelInfo, VectorIndex
from memlane.store import Store

if TYPE_CHECKING:
    from memlane.tokens import TokenCounter

log = logging.getLogger(__name__)

_DISABLED = frozenset({"", "none", "off", "false", "no", "disabled"})

__all__ = [
    "configured_model", "embedder_from_settings", "keep_older_minilm", "model_info", "relevant_context",
    "vector_index_for",
]


def embedder_from_settings(spec: str | None) -> Embedder | None:
    """The configured embedder, or None when vectors are switched off."""
    if spec is not None and spec.strip().lower() in _DISABLED:
        return None
    return get_embedder(spec)


def vector_index_for(store: Store) -> VectorIndex | None:
    """The store's vector index (``store.vector_index()``), or None without one."""
    index = store.vector_index()
    return index if isinstance(index, VectorIndex) else None


def model_info(embedder: Embedder) -> ModelInfo:
    return ModelInfo(embedder.model_id, embedder.dimension, RECIPE)


def keep_older_minilm(embedder: Embedder, index: VectorIndex, spec: str | None) -> Embedder:
    """The float32-activation MiniLM for a database it embedded, when the spec is plain "minilm".

    The default MiniLM became the int8-activation variant (another model_id). A database
    whose vectors came from the float32 one goes on with that one instead of refusing to
    open until `memlane reindex` (which, given "minilm", moves it to the int8 variant).
    """
    plain = spec is None or spec.strip().lower() == "minilm"
    if not plain or not isinstance(embedder, MiniLMEmbedder) or embedder.activations != "int8":
        return embedder
    stored = index.model_info()
    if stored is None or stored.model_id != MINILM_F32_MODEL_ID:
        return embedder
    log.info(
        "vectors in %s came from MiniLM with float32 activations; using that variant "
        "(run `memlane reindex` to switch to the faster int8 one)", index,
    )
    return MiniLMEmbedder(activations="float32")


def configured_model(spec: str | None, index: VectorIndex) -> ModelInfo | None:
    """Which model the embedder setting ``spec`` would use on ``index`` (None: vectors off)."""
    embedder = embedder_from_settings(spec)
    return None if embedder is None else model_info(keep_older_minilm(embedder, index, spec))


# ---------------------------------------------------------------------------- RAG context



def _when(ts: datetime) -> str:
    return f"{ts.day} {ts:%B %Y}"


def relevant_context(
    search: Callable[..., list[SearchHit]],
    counter: TokenCounter,
    query: str,
    max_tokens: int = 2048,
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    exclude_ids: Sequence[int] = (),
    top_k: int = 30,
    min_score: float | None = None,
    superseded: Callable[[list[int]], Iterable[int]] | None = None,
) -> list[Message]:
    """The best hits for ``query`` that fit ``max_tokens`` together (token-exact).

    ``search`` is ``Memory.search`` (its keyword arguments); ``superseded`` names the
    message ids whose facts a newer note replaced (the notes part), left out.

    Each returned message is a copy whose content starts with its date and speaker
    (``"[8 May 2023] Caroline: ..."``) so an LLM can place it; ``metadata`` carries the
    original ``message_id``, ``session_id`` and the ``recall_score``. Duplicates (the same
    message, or the same text said twice) appear once; a hit too large for what is left of
    the budget is skipped and smaller ones after it may still fit. Best first.
    """
    if max_tokens < 1:
        raise InvalidInputError("max_tokens must be at least 1")
    # Never padded: only hits at or above the calibrated floor (search/relevance.py).
    hits: list[SearchHit] = search(
        query, session_id=session_id, user_id=user_id, agent_id=agent_id, top_k=top_k,
        min_score=DEFAULT_FLOOR if min_score is None else min_score,
    )
    excluded = set(exclude_ids)
    # What a newer note superseded is not true any more (the note says what is).
    if superseded is not None and hits:
        excluded |= set(superseded([h.message.id for h in hits if h.message.id is not None]))
    used = 0
    out: list[Message] = []
    for hit in hits:  # search lists near-identical texts once already
        msg = hit.message
        if msg.id in excluded or not msg.content.strip():
            continue
        speaker = msg.author_name or msg.author_id or msg.role
        item = Message(
            role=msg.role,
            content=f"[{_when(msg.created_at)}] {speaker}: {msg.content}",
            session_id=msg.session_id,
            author_id=msg.author_id,
            author_name=msg.author_name,
            created_at=msg.created_at,
            metadata={
                "message_id": msg.id,
                "session_id": msg.session_id,
                "recall_score": hit.score,
            },
        )
        cost = counter.count_message(item)
        if used + cost > max_tokens:
            continue
        used += cost
        out.append(item)
    return out

