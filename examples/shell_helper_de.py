"""Seed 004 (Linux Superhelfer): a German shell helper that stores interactions and
resolves references.

    python examples/shell_helper_de.py DB

Each query goes through the seed's pipeline: resolve references against the session
("deinen Vorschlag" -> the useradd suggestion), ask for clarification when a reference is
ambiguous ("Mach das nochmal"), answer (a canned helper stands in for Module A), and store
the interaction with the seed's entry fields (model_used, confidence_score,
processing_time, resolved_query, context_used). It then searches the history and exports
the session as Markdown, turn metadata included.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memlane import Memory

ANSWERS = {
    "vorschlag": "Ich lege den Benutzer anna mit sudo useradd -m anna an.",
    "benutzer": "Ich schlage vor, einen neuen Benutzer mit useradd anzulegen: sudo useradd -m anna",
    "festplatte": "du -sh /* | sort -h zeigt die größten Verzeichnisse.",
}
QUERIES = [
    "Wie lege ich einen neuen Benutzer an?",
    "ja setze deinen vorschlag um!",
    "Die Festplatte ist voll, was tun?",
    "Mach das nochmal",
]


def module_a(query: str) -> str:
    """Stands in for the Superhelfer's Module A (the model call)."""
    lower = query.lower()
    return next((text for key, text in ANSWERS.items() if key in lower), "Dazu weiß ich nichts.")


def run(db: Path) -> None:
    with Memory(db, embedder="hashing") as mem:
        session = mem.create_session(user_id="default_user", metadata={"primary_language": "de"})
        for query in QUERIES:
            resolution = mem.resolve_references(query, session)
            print(f"> {query}")
            if resolution.needs_clarification:
                print(resolution.clarification)  # the seed: ask, offer options, store nothing
                continue
            if resolution.context_used:
                print(f"  resolved: {resolution.resolved_query}")
            answer = module_a(resolution.resolved_query)
            mem.store_interaction(query, answer, session_id=session, metadata={
                **resolution.to_metadata(), "model_used": "llama3.2:3b", "confidence_score": 0.69,
                "processing_time": 2.02, "topic": "user_management"})
            print(f"  {answer}")
        mem.flush()
        print("\n== search_history('Benutzer anlegen') ==")
        for entry in mem.search_history("Benutzer anlegen", limit=2):
            print(json.dumps({k: entry[k] for k in ("query", "response", "model_used", "context_used", "score")},
                             ensure_ascii=False))
        print("\n== export (markdown) ==")
        print(mem.export_session(session, "markdown"))


if __name__ == "__main__":
    run(Path(sys.argv[1]))
