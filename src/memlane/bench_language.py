"""``memlane bench stems``: what the keyword index's language work costs per message written.

Every message's keyword row goes through ``memlane_stems()`` (language.keyword_text), on
the write or, since the keyword row follows the message, on the indexing thread. Splitting German compounds there (the parts beside the compound, so a question
naming the parts finds it) is extra work; this times ``keyword_text`` with and without the
split on the same German messages, interleaved one by one so both sides see the same load:

* cold - every message carries words never seen before (the per-word caches miss, as for
  a process's first messages or a long tail of rare words);
* warm - the messages repeat (the caches hit, as for most words of a chat).

The one-time costs are reported on their own: reading the word frequencies
(``data/words_de.txt``, sorted, looked up in place), splitting the first German message by
those lookups, and the dictionary a process builds once it has looked up many words.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from memlane.compounds import DICT_AFTER, compound_parts, word_frequencies, zipf_de
from memlane.eval.labelled import read_jsonl
from memlane.language import _stemmer, index_parts, stem, with_compound_parts

__all__ = ["format_table", "run_stems_bench"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzäöü"


def _german_messages() -> list[str]:
    return [p["memory"] for _, p in read_jsonl(None, "recall_en_de.jsonl", "memory/query pairs")
            if isinstance(p, dict) and p.get("language") == "de"]


def _us(samples: list[int]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_us": round(statistics.median(ordered) / 1000, 2),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] / 1000, 2),
            "mean_us": round(statistics.fmean(ordered) / 1000, 2)}


def _time(text: str, split: bool) -> int:
    t0 = time.perf_counter_ns()
    tokens = index_parts(text)
    if split:
        tokens = with_compound_parts(tokens)
    _stemmer("de").stemWords(tokens)
    return time.perf_counter_ns() - t0


def run_stems_bench(messages: int = 5000, seed: int = 7) -> dict[str, Any]:
    """Per-message keyword_text time for German text, with and without compound parts."""
    base = _german_messages()
    t0 = time.perf_counter()
    zipf_de("die")  # reads the word frequencies (sorted, looked up in place)
    load_ms = (time.perf_counter() - t0) * 1000
    # the first German message of a process: its words' splits by bisection
    first = " ".join(base[:3])
    t0 = time.perf_counter()
    with_compound_parts(index_parts(first))
    first_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    word_frequencies().as_dict()  # what a process that splits many words builds once
    dict_ms = (time.perf_counter() - t0) * 1000
    rng = random.Random(seed)
    stem("warm", "de")  # the stemmer itself is made once per thread, on either side

    def novel() -> str:
        # two unseen words per message, one of them a compound of known parts
        a, b = rng.sample(base, 2)
        word = "".join(rng.choice(_LETTERS) for _ in range(9))
        return f"{a} {word.capitalize()} {b.split()[1]}{word}"

    out: dict[str, Any] = {"messages": messages, "words_de_load_ms": round(load_ms, 1),
                           "first_message_ms": round(first_ms, 1), "words_de_dict_ms": round(dict_ms, 1),
                           "dict_after_lookups": DICT_AFTER}
    for name, texts in (("cold", [novel() for _ in range(messages)]),
                        ("warm", [base[i % len(base)] for i in range(messages)])):
        plain: list[int] = []
        split: list[int] = []
        if name == "cold":
            compound_parts.cache_clear()
        for text in texts:
            plain.append(_time(text, False))
            split.append(_time(text, True))
        out[name] = {"without_parts": _us(plain), "with_parts": _us(split),
                     "extra_p50_us": round((statistics.median(split) - statistics.median(plain)) / 1000, 2)}
    out["words_per_message"] = round(statistics.fmean(len(index_parts(t)) for t in base), 1)
    return out


def format_table(result: dict[str, Any]) -> str:
    lines = [f"keyword_text on {result['messages']} German messages "
             f"({result['words_per_message']} words each on average), interleaved:"]
    for name in ("cold", "warm"):
        r = result[name]
        lines.append(
            f"  {name}: without parts p50 {r['without_parts']['p50_us']} us (p95 {r['without_parts']['p95_us']}), "
            f"with parts p50 {r['with_parts']['p50_us']} us (p95 {r['with_parts']['p95_us']}); "
            f"+{r['extra_p50_us']} us per message"
        )
    lines.append(f"  once per process: word frequencies read in {result['words_de_load_ms']} ms, the first "
                 f"German message (3 sentences) split in {result['first_message_ms']} ms by bisection; "
                 f"after {result['dict_after_lookups']} lookups a dictionary is built "
                 f"({result['words_de_dict_ms']} ms)")
    return "\n".join(lines)
