""":class:`LLMExtractor`: candidate notes from an OpenAI-compatible endpoint, falling back
to the rules when it fails."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence

from memlane.language import detect_language
from memlane.models import Message
from memlane.notes.extract.facets import entities
from memlane.notes.extract.protocol import ExtractionContext, Extractor
from memlane.notes.extract.rules import RuleExtractor
from memlane.notes.extract.slots import norm_text
from memlane.notes.models import NOTE_KINDS, NoteCandidate

log = logging.getLogger(__name__)


_LLM_PROMPT = """Extract long-term memory notes from the conversation below. Keep only facts
about people (who they are, where they live or work), stable preferences, decisions,
commitments and important links. Skip small talk and anything uncertain. Answer with a JSON
list only; each item: {"message_id": int, "kind": one of preference|fact|decision|commitment|link,
"text": a short third-person sentence naming the speaker, "slot": a short key for what the
note states (e.g. "pref:coffee", "work", "home", "attr:email") or null, "value": the stated
value, "polarity": 1 or -1, "importance": 0..1}.

Conversation:
"""


class LLMExtractor:
    """Candidates from an OpenAI-compatible chat endpoint; the rules when it fails."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 30.0,
        fallback: Extractor | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.fallback = fallback or RuleExtractor()

    def extract(self, messages: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
        users = [m for m in messages if m.role == "user" and m.id is not None]
        if not users:
            return []
        try:
            reply = self._ask(users, ctx)
            return parse_llm_notes(reply, users, ctx)
        except Exception as exc:  # an unreachable model must not stop promotion
            log.warning("LLM note extraction failed (%s); using the rules", exc)
            return self.fallback.extract(messages, ctx)

    def _ask(self, users: Sequence[Message], ctx: ExtractionContext) -> str:
        import httpx

        lines = []
        for m in users:
            _, name = ctx.speaker(m)
            lines.append(f"[{m.id}] {name}: {m.content[:2000]}")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url + ("/chat/completions" if self.base_url.endswith("/v1") else "/v1/chat/completions")
        resp = httpx.post(
            url,
            headers=headers,
            timeout=self.timeout,
            json={
                "model": self.model,
                "temperature": 0,
                "messages": [{"role": "user", "content": _LLM_PROMPT + "\n".join(lines)}],
            },
        )
        resp.raise_for_status()
        body = resp.json()
        return str(body["choices"][0]["message"]["content"])


def parse_llm_notes(reply: str, users: Sequence[Message], ctx: ExtractionContext) -> list[NoteCandidate]:
    """The candidates in an LLM's JSON answer; items naming unknown messages are dropped."""
    start, end = reply.find("["), reply.rfind("]")
    if start < 0 or end < start:
        raise ValueError("the model's answer holds no JSON list")
    items = json.loads(reply[start : end + 1])
    if not isinstance(items, list):
        raise ValueError("the model's answer is not a JSON list")
    by_id = {m.id: m for m in users}
    out: list[NoteCandidate] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        msg = by_id.get(item.get("message_id"))
        text = item.get("text")
        kind = item.get("kind")
        if msg is None or not isinstance(text, str) or not text.strip() or kind not in NOTE_KINDS:
            continue
        uid, name = ctx.speaker(msg)
        slot = item.get("slot") if isinstance(item.get("slot"), str) else None
        value = str(item.get("value") or "")
        try:
            importance = min(max(float(item.get("importance", 0.6)), 0.0), 1.0)
        except (TypeError, ValueError):
            importance = 0.6
        out.append(
            NoteCandidate(
                text=text.strip(), kind=kind, user_id=uid, source_ids=[msg.id or 0],
                session_id=ctx.session_id, author_id=msg.author_id, author_name=name,
                slot=slot or f"{kind}:{norm_text(text, detect_language(text))}", value=value,
                polarity=-1 if item.get("polarity") == -1 else 1, importance=importance,
                entities=entities(msg.content), valid_from=msg.created_at, origin="llm",
            )
        )
    return out
