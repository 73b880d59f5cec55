"""What every summarizer is (:class:`Summarizer`) and the checks and defaults they share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memlane.errors import InvalidInputError
from memlane.models import Message

if TYPE_CHECKING:

    from memlane.tokens import TokenCounter


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns messages into a summary string."""

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> str: ...


def default_counter() -> TokenCounter:
    # Imported late: the summarizer is usable (without budgets) on its own.
    from memlane.tokens import get_counter

    return get_counter(None)


def check_budget(max_tokens: int | None) -> None:
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 0):
        raise InvalidInputError(
            f"max_tokens must be a non-negative integer or None, got {max_tokens!r}"
        )
