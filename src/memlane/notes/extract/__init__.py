"""Candidate notes from messages: deterministic English/German rules, an optional LLM.

:class:`RuleExtractor` needs no model. It reads user messages sentence by sentence and
matches first-person statements that are worth keeping across conversations:
preferences ("I love X", "ich mag keinen X"), facts about the speaker ("my X is Y",
"I work at X", "I moved to X", "ich wohne in X"), decisions ("we decided to X", "wir
haben beschlossen"), commitments ("I will X", "ich werde X") and links. Each candidate
names a *slot* — the one thing it states ("pref:coffee", "attr:email", "work") — so the
gate can tell a duplicate (same slot, same value) from a change of mind (same slot, new
value or polarity). Questions, hedges and pronoun objects ("I like it") lower the score
below the gate's threshold instead of producing noise.

:func:`annotate` finds the facets kept beside the dialogue: named entities, links,
dates and system actions (tool calls).

:class:`LLMExtractor` asks an OpenAI-compatible endpoint for the same candidates and falls
back to the rules when the endpoint fails.

The modules: ``protocol`` (what an extractor is, who is who), ``slots`` (slot keys and
text helpers), ``rule_patterns`` (the EN/DE statement patterns), ``rules``, ``facets``
and ``llm``.
"""

from memlane.notes.extract.facets import annotate
from memlane.notes.extract.llm import LLMExtractor, parse_llm_notes
from memlane.notes.extract.protocol import UNKNOWN_SPEAKER, ExtractionContext, Extractor
from memlane.notes.extract.rules import RuleExtractor
from memlane.notes.extract.slots import find_urls, object_key, slot_key, slot_object, split_sentences

__all__ = [
    "UNKNOWN_SPEAKER",
    "ExtractionContext",
    "Extractor",
    "LLMExtractor",
    "RuleExtractor",
    "annotate",
    "find_urls",
    "object_key",
    "parse_llm_notes",
    "slot_key",
    "slot_object",
    "split_sentences",
]
