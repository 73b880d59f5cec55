"""Summaries from an OpenAI-compatible chat-completions endpoint, falling back to the
extractive summary when the endpoint fails."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlane.context.summarizer.budgets import fit_sentences
from memlane.context.summarizer.cleaning import SPACE_RE
from memlane.context.summarizer.extractive import ExtractiveSummarizer
from memlane.context.summarizer.protocol import Summarizer, check_budget, default_counter
from memlane.context.summarizer.sentences import speaker_of
from memlane.models import Message

if TYPE_CHECKING:
    import httpx

    from memlane.tokens import TokenCounter


log = logging.getLogger(__name__)


_SYSTEM_PROMPT = (
    "You summarize conversations. Write one concise paragraph in the third person that "
    "names the speakers (for example: 'Alice told Bob that she moved to Berlin.'). Keep "
    "concrete facts: names, dates, places, numbers, plans, decisions and open questions. "
    "Leave out greetings and small talk. Reply with the summary only."
)


class _RetryableStatus(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


@dataclass(slots=True)
class LLMSummarizer:
    """Summaries from an OpenAI-compatible chat-completions endpoint, fail-open.

    ``base_url`` is the API root (``http://127.0.0.1:8000/v1``); the request
    goes to ``{base_url}/chat/completions``. The key is read from the
    environment variable named by ``api_key_env`` (no header when unset, as
    local servers need none). Transport errors, 429 and 5xx are retried with
    backoff; when every try fails the ``fallback`` summarizer answers and a
    warning is logged, so a summary is always produced.
    """

    base_url: str
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 30.0
    max_attempts: int = 3
    backoff_seconds: float = 0.5
    temperature: float = 0.0
    fallback: Summarizer = field(default_factory=ExtractiveSummarizer)
    counter: TokenCounter | None = None
    client: httpx.Client | None = None

    def _counter(self) -> TokenCounter:
        if self.counter is None:
            self.counter = default_counter()
        return self.counter

    def _payload(
        self, messages: Sequence[Message], max_tokens: int | None, previous_summary: str | None
    ) -> dict[str, Any]:
        lines: list[str] = []
        for m in messages:
            if m.role not in ("user", "assistant") or m.hidden or not m.content.strip():
                continue
            lines.append(f"{speaker_of(m)}: {m.content.strip()}")
        when = min((m.created_at for m in messages), default=None)
        user = ""
        if previous_summary:
            user += (
                "Summary so far:\n" + previous_summary.strip() + "\n\nUpdate it with the new "
                "messages below; keep earlier facts that still matter.\n\n"
            )
        if when is not None:
            user += f"Conversation on {when.strftime('%d %B %Y, %H:%M')} UTC:\n"
        user += "\n".join(lines)
        if max_tokens is not None:
            user += f"\n\nUse at most {max(1, int(max_tokens * 0.85))} tokens."
        payload: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": user},
            ],
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        return payload

    def _request(self, payload: dict[str, Any]) -> str:
        import httpx
        from tenacity import (
            retry,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
        )

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.base_url.rstrip("/") + "/chat/completions"

        @retry(
            retry=retry_if_exception_type((httpx.TransportError, _RetryableStatus)),
            stop=stop_after_attempt(max(1, self.max_attempts)),
            wait=wait_exponential(multiplier=self.backoff_seconds, max=8.0),
            reraise=True,
        )
        def call() -> str:
            if self.client is not None:
                response = self.client.post(url, json=payload, headers=headers, timeout=self.timeout)
            else:
                response = httpx.post(url, json=payload, headers=headers, timeout=self.timeout)
            if response.status_code == 429 or response.status_code >= 500:
                raise _RetryableStatus(response.status_code)
            response.raise_for_status()
            data = response.json()
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str) or not content.strip():
                raise ValueError("the endpoint returned an empty summary")
            return content.strip()

        return call()

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str:
        check_budget(max_tokens)
        if max_tokens == 0:
            return ""
        try:
            text = self._request(self._payload(messages, max_tokens, previous_summary))
        except Exception as exc:  # fail-open: any failure means "use the offline summary"
            log.warning(
                "LLM summarizer at %s failed (%s: %s); using the extractive summary instead",
                self.base_url, type(exc).__name__, exc,
            )
            return self.fallback.summarize(
                messages, max_tokens=max_tokens, previous_summary=previous_summary
            )
        text = SPACE_RE.sub(" ", text)
        if max_tokens is not None:
            text = fit_sentences(text, max_tokens, self._counter())
        return text
