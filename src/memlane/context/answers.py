"""The response cache (seed 004): an answer kept for the same question asked in the same context.

An answer is found again by

* its **scope**: the tenant and the user of the session (a session without a user keeps
  its answers to itself), so nobody gets an answer made from someone else's memory;
* the **model** that gave it;
* the **fingerprint** of the context packet it was given with: the system prompt, the
  rolling summary, the long-term notes (id and text) and the ids of every message in the
  packet (recent turns, pinned, recalled), *except* earlier asks of the same question and
  their answers: asking again, in a new session or right after, finds the answer, while
  anything else said since (``my cat is called Tom now``) changes the fingerprint;
* the **question**, resolved (references replaced by what they point to): the same words
  (exact), or a paraphrase (:func:`~memlane.context.question_match.semantic_match`, with
  thresholds calibrated by ``memlane eval response-cache``) when an embedder is attached;
* its **TTL**, when one was given.

Every message and note of the packet, and the turn that stored the answer, are its
sources: the store drops the answer when one of them is forgotten or a note superseded
(triggers, migration 14), and with the session it was answered in.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memlane.context.question_match import (
    CALIBRATED_FOR,
    SEMANTIC_THRESHOLDS,
    question_key,
    same_language,
    semantic_match,
)
from memlane.errors import InvalidInputError
from memlane.language import detect_language
from memlane.ports import CachedResponse, MessageLog, ResponseCacheRepository

if TYPE_CHECKING:
    from memlane.context.packet import ContextPacket
    from memlane.models import Message, Session
    from memlane.ports import Embedder

__all__ = ["CacheHit", "ContextFingerprint", "ResponseCache", "scope_of"]


@dataclass(frozen=True, slots=True)
class ContextFingerprint:
    """What a packet's answer depends on: its digest and its sources."""

    digest: str
    message_ids: tuple[int, ...]
    note_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CacheHit:
    """A cached answer found for a question: ``match`` is ``exact`` or ``semantic``."""

    response: str
    match: str
    similarity: float
    entry: CachedResponse

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        return {
            "response": self.response, "match": self.match, "similarity": round(self.similarity, 4),
            "entry_id": e.id, "cached_query": e.query, "model": e.model, "created_at": e.created_at,
            "expires_at": e.expires_at, "hits": e.hits + 1,
            "saved_seconds": e.cost_seconds, "saved_tokens": e.cost_tokens,
        }


def scope_of(session: Session) -> tuple[str, str]:
    """(tenant, scope) of a session's cached answers."""
    scope = f"user:{session.user_id}" if session.user_id else f"session:{session.id}"
    return session.tenant_id, scope


def _digest(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


class ResponseCache:
    """Looks answers up and keeps them; counts lookups, hits and what hits saved."""

    def __init__(
        self,
        repository: ResponseCacheRepository,
        log: MessageLog,
        *,
        embedder: Embedder | None = None,
        thresholds: dict[str, float] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.repository = repository
        self.log = log
        self.embedder = embedder
        if thresholds is None:
            calibrated = embedder is not None and embedder.model_id.startswith(CALIBRATED_FOR)
            thresholds = SEMANTIC_THRESHOLDS if calibrated else {}
        self.thresholds = dict(thresholds)
        self.clock = clock

    # ------------------------------------------------------------ fingerprint

    def fingerprint(self, packet: ContextPacket, query: str) -> ContextFingerprint:
        """The fingerprint of ``packet`` for ``query`` (see the module doc)."""
        messages: dict[int, Message] = {}
        for m in [*packet.recent_turns, *packet.pinned_messages, *(r.message for r in packet.recalled)]:
            if m.id is not None:
                messages.setdefault(m.id, m)
        repeated = self._earlier_asks(query, list(messages.values()))
        kept = sorted(i for i, m in messages.items() if i not in repeated and (m.turn_id or "") not in repeated)
        notes = sorted(zip(packet.note_ids, packet.notes, strict=False))
        digest = _digest({
            "system": packet.system_prompt or "", "summary": packet.rolling_session_summary or "",
            "notes": notes if packet.note_ids else sorted(packet.notes), "messages": kept,
        })
        return ContextFingerprint(digest, tuple(sorted(messages)), tuple(sorted(set(packet.note_ids))))

    def _earlier_asks(self, query: str, messages: list[Message]) -> set[int | str]:
        """Turn ids (and ids of messages outside turns) that asked ``query`` already."""
        asks: dict[str, str] = {}  # turn id -> its user message
        for m in messages:
            if m.role == "user" and m.turn_id:
                asks[m.turn_id] = m.content
        missing = [m.id - 1 for m in messages if m.role == "assistant" and m.turn_id
                   and m.turn_id not in asks and m.id is not None]
        for m in self.log.get_messages(missing) if missing else ():
            if m.role == "user" and m.turn_id:
                asks.setdefault(m.turn_id, m.content)
        found: set[int | str] = set()
        wanted = question_key(query)
        others = [(t, text) for t, text in asks.items() if question_key(text) != wanted]
        found.update(t for t, text in asks.items() if question_key(text) == wanted)
        found.update(m.id for m in messages if m.id is not None and not m.turn_id and m.role == "user"
                     and question_key(m.content) == wanted)
        if others and self.embedder is not None and self.thresholds:
            texts = [text for _, text in others if same_language(query, text)]
            if texts:
                vectors = self.embedder.embed([query, *texts])
                cosines = dict(zip(texts, (float(vectors[0] @ v) for v in vectors[1:]), strict=True))
                found.update(t for t, text in others
                             if text in cosines and semantic_match(query, text, cosines[text], self.thresholds))
        return found

    # ------------------------------------------------------------ reading and writing

    def lookup(
        self, query: str, session: Session, model: str, packet: ContextPacket, *, semantic: bool = True
    ) -> CacheHit | None:
        """The answer cached for ``query`` in this context and scope, or None (counted either way)."""
        _check(query, model)
        tenant, scope = scope_of(session)
        now = self.clock()
        fp = self.fingerprint(packet, query)
        candidates = self.repository.response_candidates(tenant, scope, model, fp.digest, now)
        hit = self._match(query, candidates, semantic=semantic)
        self.repository.record_lookup(tenant, hit.entry if hit else None, now)
        return hit

    def _match(self, query: str, candidates: list[CachedResponse], *, semantic: bool) -> CacheHit | None:
        key = question_key(query)
        for entry in candidates:
            if entry.query_key == key:
                return CacheHit(entry.response, "exact", 1.0, entry)
        if not semantic or self.embedder is None or not self.thresholds:
            return None
        comparable = [e for e in candidates if e.vector is not None and e.vector_model == self.embedder.model_id]
        if not comparable:
            return None
        import numpy as np

        q = self.embedder.embed_query(query)
        best: CacheHit | None = None
        for entry in comparable:
            assert entry.vector is not None
            cosine = float(np.frombuffer(entry.vector, dtype=np.float32) @ q)
            if semantic_match(entry.query, query, cosine, self.thresholds) and (best is None or cosine > best.similarity):
                best = CacheHit(entry.response, "semantic", cosine, entry)
        return best

    def store(
        self,
        query: str,
        response: str,
        session: Session,
        model: str,
        packet: ContextPacket,
        *,
        ttl: float | None = None,
        cost_seconds: float | None = None,
        cost_tokens: int | None = None,
        message_ids: Sequence[int] = (),
    ) -> CachedResponse:
        """Keep ``response`` as the answer to ``query`` in this context (``ttl`` seconds, or
        until its sources change); ``message_ids``: the stored turn, also a source."""
        _check(query, model)
        if not isinstance(response, str) or not response.strip():
            raise InvalidInputError("response must be a non-empty string (nothing to cache)")
        if ttl is not None and not ttl > 0:
            raise InvalidInputError(f"ttl must be a positive number of seconds (or None: no expiry), got {ttl}")
        tenant, scope = scope_of(session)
        now = self.clock()
        fp = self.fingerprint(packet, query)
        vector: bytes | None = None
        if self.embedder is not None:
            import numpy as np

            vector = np.asarray(self.embedder.embed_query(query), dtype=np.float32).tobytes()
        entry = CachedResponse(
            tenant_id=tenant, scope=scope, model=model, fingerprint=fp.digest,
            query_key=question_key(query), query=query, response=response,
            created_at=now, expires_at=None if ttl is None else now + float(ttl), session_id=session.id,
            language=detect_language(query), vector=vector,
            vector_model=self.embedder.model_id if self.embedder is not None else None,
            cost_seconds=cost_seconds, cost_tokens=cost_tokens,
        )
        # Answers of this scope past their TTL leave the database as new ones come in.
        self.repository.delete_responses(tenant_id=tenant, scope=scope, expired_at=now)
        return self.repository.put_response(entry, [*fp.message_ids, *message_ids], fp.note_ids)

    def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        counts = self.repository.response_cache_counts(tenant_id)
        lookups = counts.get("lookups", 0)
        return {
            **counts,
            "hit_rate": round(counts.get("hits", 0) / lookups, 4) if lookups else None,
        }


def _check(query: str, model: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    if not isinstance(model, str) or not model.strip():
        raise InvalidInputError("model must name the model that answers (e.g. 'llama3.2')")
