"""What the notes and rooms part is made from (``memlane.components`` wires it): the note
extractor the settings ask for, and the summaries' savings for ``mem.stats()``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memlane.notes.extract import Extractor, LLMExtractor, RuleExtractor

if TYPE_CHECKING:
    from memlane.config import Settings
    from memlane.store import Store

__all__ = ["extractor_for", "summary_tokens_saved"]

log = logging.getLogger(__name__)


def extractor_for(s: Settings) -> Extractor:
    """The note extractor the settings ask for (the rules unless an LLM is configured)."""
    if s.notes_extractor == "llm":
        if s.llm_base_url and s.llm_model:
            return LLMExtractor(s.llm_base_url, s.llm_model, api_key_env=s.llm_api_key_env)
        log.warning("notes_extractor is 'llm' but llm_base_url/llm_model are not set; using the rules")
    return RuleExtractor()


def summary_tokens_saved(store: Store) -> int:
    """Tokens the rolling summaries save over the turns they cover."""
    return store.derived_total("summary", "tokens_saved")
