"""Process A of the cache-invalidation tests: reads memory, keeps its caches warm, reports.

Usage: python tests/_cache_reader.py URL TOKEN SPEAKER. Reads one command per line from stdin
and answers each with one JSON line: ``warm`` (search, context, notes and a cached
answer, all about TOKEN), ``read`` (the next read after another process forgot), ``quit``.
The report says whether TOKEN is in what the reads returned and in this process's caches
(query vectors, speaker names, note vectors, rolling summarizers).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from memlane import Memory

QUESTION = "What is the secret code word?"


def caches(mem: Memory, token: str, speaker: str) -> dict[str, bool]:
    engine = mem.parts.recall
    notes = mem.parts.notes
    found = {
        "query_vectors": any(token in q.lower() for q in engine._query_cache.snapshot_keys()) if engine else False,
        "speakers": any(speaker in a for a in (engine._authors or ())) if engine else False,
        "note_vectors": any(token in k[1].lower() for k in notes._vectors.snapshot_keys()) if notes else False,
    }
    return found


def main() -> None:
    url, token, speaker = sys.argv[1], sys.argv[2], sys.argv[3]
    with Memory(url, embedder="hashing") as mem:
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            out: dict[str, Any] = {}
            if command == "warm":
                hits = mem.search(f"{token} code word", top_k=5)
                mem.context("room", f"tell me about {token}", 2000)
                mem.context("other", f"what is my {token} code word", 2000)
                notes = mem.notes(token)
                mem.cache_response(QUESTION, f"It is {token}.", "other", model="m")
                out["search"] = any(token in h.message.content.lower() for h in hits)
                out["notes"] = any(token in n.text.lower() for n in notes)
            elif command == "read":  # asks about the code word without naming it
                hits = mem.search("secret code word", top_k=5)
                out["search"] = any(token in h.message.content.lower() for h in hits)
                out["notes"] = any(token in n.text.lower() for n in mem.notes())
                out["cached"] = mem.cached_response(QUESTION, "other", model="m") is not None
            out["caches"] = caches(mem, token, speaker)
            out["sync"] = mem.stats().get("cache_sync")
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
