"""Seed 004 (Linux Superhelfer): German-first shell helper with references and history.

Written from the seed's text: its ConversationMemoryManager calls, its entry and session
shapes (query/response plus model_used, confidence_score, processing_time, resolved_query,
context_used), the "ja setze deinen vorschlag um!" example and the "Mach das nochmal"
clarification from its error-handling section.
"""

from __future__ import annotations

import json
from pathlib import Path

from memlane import Memory

SUGGESTION = "Ich schlage vor, einen neuen Benutzer mit dem Befehl useradd anzulegen: sudo useradd -m anna"
ENTRY_FIELDS = {"id", "session_id", "timestamp", "query", "response", "model_used", "confidence_score",
                "processing_time", "context_used", "resolved_query", "metadata"}


def _helper(mem: Memory) -> str:
    sid = mem.create_session(user_id="default_user")
    mem.store_interaction("Wie lege ich einen neuen Benutzer an?", SUGGESTION, session_id=sid, metadata={
        "model_used": "llama3.2:3b", "confidence_score": 0.71, "processing_time": 1.4, "topic": "user_management"})
    mem.store_interaction(
        "ja setze deinen vorschlag um!", "I'll implement the user account creation as suggested...",
        session_id=sid, resolve=True,
        metadata={"model_used": "llama3.2:3b", "confidence_score": 0.690, "processing_time": 2.02,
                  "vram_usage": "24.0%", "routing_decision": "fast model, complexity 0.00"},
    )
    mem.flush()
    return sid


def test_the_seeds_example_resolves_deinen_vorschlag(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as mem:
        sid = _helper(mem)
        turn = mem.get_conversation_context(sid, limit=5)[-1]
        assert turn["query"] == "ja setze deinen vorschlag um!"
        assert turn["context_used"] is True
        assert "useradd" in turn["resolved_query"] and turn["resolved_query"].startswith(turn["query"])
        assert turn["metadata"]["references_resolved"] == ["deinen vorschlag"]
        assert turn["metadata"]["routing_decision"] == "fast model, complexity 0.00"


def test_an_unresolvable_das_asks_in_german_with_options(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as mem:
        sid = _helper(mem)
        r = mem.resolve_references("Mach das nochmal", sid)
        assert r.needs_clarification and r.language == "de"
        assert r.clarification is not None
        assert r.clarification.startswith("Ich bin mir nicht sicher, worauf sich 'das' bezieht. Meinten Sie:")
        assert "useradd" in r.clarification and "Etwas anderes?" in r.clarification


def test_search_history_returns_conversation_entries(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as mem:
        _helper(mem)
        entries = mem.search_history("Benutzer anlegen")
        # Both exchanges are about creating a user (the second one's resolved query carries the
        # suggestion), so either may rank first; the seed needs the useradd exchange to be found whole.
        by_query = {e["query"]: e for e in entries}
        assert "Wie lege ich einen neuen Benutzer an?" in by_query, "the useradd exchange is about creating a user"
        first = by_query["Wie lege ich einen neuen Benutzer an?"]
        assert set(first) >= ENTRY_FIELDS
        assert first["query"] == "Wie lege ich einen neuen Benutzer an?" and first["response"] == SUGGESTION
        assert (first["model_used"], first["confidence_score"]) == ("llama3.2:3b", 0.71)
        assert first["metadata"]["topic"] == "user_management"
        assert 0.0 <= first["score"] <= 1.0
        # An exchange found by its query and its response is one entry.
        ids = [e["id"] for e in entries]
        assert len(ids) == len(set(ids))


def test_markdown_export_keeps_the_turn_metadata_and_imports_back(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = _helper(mem)
        md = mem.export_session(sid, "markdown")
        assert "model llama3.2:3b · confidence 0.69 · 2.02 s · context used" in md
        assert "resolved query: ja setze deinen vorschlag um! [Context:" in md
        (new,) = mem.import_sessions(md, "markdown")
        turns = mem.get_conversation_context(new, limit=5)
        assert [t["model_used"] for t in turns] == ["llama3.2:3b", "llama3.2:3b"]
        assert turns[-1]["resolved_query"] == mem.get_conversation_context(sid)[-1]["resolved_query"]
        assert json.loads(json.dumps(turns[-1]["metadata"]))["vram_usage"] == "24.0%"


def test_search_history_through_a_memlane_server_gives_the_same_entries(tmp_path: Path) -> None:
    from memlane.client import MemoryClient
    from tests.server_support import open_memory, running_server

    mem = open_memory(tmp_path / "served.db")
    try:
        _helper(mem)
        local = mem.search_history("Benutzer anlegen")
        with running_server(mem) as url:
            client = MemoryClient(url)
            try:
                remote = client.search_history("Benutzer anlegen")
            finally:
                client.close()
        assert [(e["id"], e["query"], e["model_used"]) for e in remote] == [
            (e["id"], e["query"], e["model_used"]) for e in local]
    finally:
        mem.close()


GERMAN_SESSION = [
    ("Wie lege ich einen neuen Benutzer an?", SUGGESTION),
    ("Wie setze ich ein Passwort für anna?", "Mit sudo passwd anna setzt du das Passwort."),
    ("Die Festplatte ist voll, was tun?", "du -sh /* | sort -h zeigt die größten Verzeichnisse."),
    ("Wie lösche ich alte Logdateien?", "sudo journalctl --vacuum-time=7d löscht alte Journaleinträge."),
    ("Wie starte ich den Docker-Dienst neu?", "Mit sudo systemctl restart docker."),
    ("Zeig mir den Status von Docker.", "systemctl status docker zeigt, ob der Dienst läuft."),
    ("Wie öffne ich Port 443 in der Firewall?", "sudo ufw allow 443/tcp öffnet den Port."),
    ("Und wie sehe ich die Regeln?", "sudo ufw status numbered listet alle Regeln."),
    ("Welcher Prozess belegt Port 8080?", "sudo ss -ltnp | grep 8080 zeigt den Prozess."),
    ("Wie beende ich ihn?", "Mit sudo kill und der PID aus der Ausgabe."),
    ("Wie aktualisiere ich alle Pakete?", "sudo apt update && sudo apt upgrade."),
    ("Muss ich danach neu starten?", "Nur wenn ein neuer Kernel installiert wurde."),
    ("Danke, das war's.", "Gern geschehen!"),
]


def test_a_long_german_session_reads_well_in_its_packet(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        sid = mem.create_session(user_id="default_user")
        for query, response in GERMAN_SESSION:
            mem.store_interaction(query, response, session_id=sid, resolve=True)
        turns = mem.get_conversation_context(sid, limit=20)
        # The referent may carry the turn it came from in brackets; what matters is the noun.
        assert "[Context: 'ihn' refers to Prozess" in turns[9]["resolved_query"]
        packet = mem.context(sid, "und wie entferne ich den Benutzer wieder?", max_tokens=400)
        summary = packet.rolling_session_summary
        assert summary, "13 turns: the first 10 are summarized"
        assert summary.count("The assistant:") <= 1  # a label once per run of one speaker's sentences
        assert "sudo ufw allow 443/tcp" in summary  # commands as typed, not "Sudo ufw"
        # Lower-case German words are verbs, adverbs and adjectives, not topics.
        assert all(any(ch.isupper() or ch.isdigit() for ch in t) for t in packet.active_topics)
        # What the summary covers is not sent again verbatim.
        sent = [m["content"] for m in packet.to_messages() if m["role"] != "system"]
        assert SUGGESTION not in sent and "Wie lege ich einen neuen Benutzer an?" not in sent
