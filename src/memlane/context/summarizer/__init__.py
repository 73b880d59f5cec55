"""Summaries of conversations: extractive and offline by default, an LLM when configured.

:class:`ExtractiveSummarizer` needs no model and no network. It splits every
message into sentences, drops greetings, fillers, emoji and questions, rewrites
the rest into the third person with the speaker's name ("I went to a support
group" from Caroline becomes "Caroline went to a support group"), scores each
sentence by centrality in the sentence-similarity graph (TextRank), coverage of
the conversation's keyphrases and how much it tells about the speaker, then
picks sentences with maximal marginal relevance (no near-duplicates, both
speakers heard) and prints them in the order they were said. Same input, same
output; a 30-turn session takes a few milliseconds.

:class:`RollingSummary` keeps a summary under a token budget while a
conversation grows: each new block of messages contributes its own best
sentences, and when the budget is full the oldest, least salient sentences go
first, while an early fact on a topic the conversation keeps returning to stays.

:class:`LLMSummarizer` asks any OpenAI-compatible chat-completions endpoint and
falls back to the extractive summary (with a warning) when the endpoint fails.

Token budgets are exact per :mod:`memlane.tokens`: a summary given
``max_tokens`` never counts more than that.

The modules, in the order a conversation meets them: ``cleaning`` and ``third_person``
make a message's sentences, ``sentences`` prepares them, ``ranking`` scores them,
``extractive`` picks them (``budgets`` fits them), ``llm`` asks a model instead;
``protocol`` says what a summarizer is.
    """

from memlane.context.summarizer.budgets import fit_to_budget
from memlane.context.summarizer.cleaning import clean_text, split_sentences
from memlane.context.summarizer.extractive import ExtractiveSummarizer, RollingSummary
from memlane.context.summarizer.llm import LLMSummarizer
from memlane.context.summarizer.protocol import Summarizer
from memlane.context.summarizer.ranking import RankWeights
from memlane.context.summarizer.sentences import SummarySentence

__all__ = [
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "RankWeights",
    "RollingSummary",
    "Summarizer",
    "SummarySentence",
    "clean_text",
    "fit_to_budget",
    "split_sentences",
]
