"""Context packets in the shared hot cache (Redis/Valkey): instance B, another process, never
gets a packet staler than what it was built from — a note superseded, a summary rewritten
or a message forgotten on instance A moves the packet's key (memlane/hot_packets.py), and a
forget leaves nothing in Valkey that quotes what went."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory

ENV_SRC = str(Path(__file__).resolve().parents[1] / "src")
QUESTION = "what is the secret code word?"

_PACKET_READER = """
import json, sys
from memlane import Memory
with Memory(sys.argv[1], embedder="hashing", redis_url=sys.argv[2], redis_prefix=sys.argv[3]) as mem:
    packet = mem.context(sys.argv[4], sys.argv[5], 300)
    print(json.dumps({"summary": packet.rolling_session_summary, "notes": packet.notes,
                      "recalled": [r.message.content for r in packet.recalled],
                      "messages": packet.to_messages(), "hot": mem.stats()["hot_packets"]}))
"""


def packet_in_another_process(target: str, redis_url: str, prefix: str, session: str) -> dict[str, Any]:
    """Instance B: a fresh process asks for the session's packet through the shared hot cache."""
    done = subprocess.run(
        [sys.executable, "-c", _PACKET_READER, target, redis_url, prefix, session, QUESTION],
        env={"PYTHONPATH": ENV_SRC, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def cached_packets(redis_url: str, prefix: str) -> list[bytes]:
    from memlane.bus.redis_bus import redis_client

    admin = redis_client(redis_url)
    try:
        return [bytes(admin.get(k) or b"") for k in admin.scan_iter(f"{prefix}:cache:packet:*")]  # type: ignore[arg-type]
    finally:
        admin.close()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_another_process_never_gets_a_packet_staler_than_its_notes_summary_or_messages(
    backend: str, tmp_path: Path, valkey_server: str, request: pytest.FixtureRequest,
) -> None:
    target = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    prefix = f"packets-{backend}"
    with Memory(target, embedder="hashing", redis_url=valkey_server, redis_prefix=prefix) as a:
        for sid in ("p0", "p1"):
            a.delete_session(sid)
        earlier = a.create_session(session_id="p0", user_id="u1")
        code = a.add(earlier, "The secret code word is PLUMTREE, keep it safe.", role="user")
        sid = a.create_session(session_id="p1", user_id="u1")
        for i in range(30):
            a.add(sid, f"Let us go through item {i} of the quarterly report.", role="user")
            a.add(sid, f"Item {i} of the report: revenue grew by {i} percent.", role="assistant")
        note = a.add_note("Anna keeps the secret code word.", user_id="u1", session_id=sid, slot="code word keeper")
        a.context(sid, QUESTION, 300)  # A catches the summary up
        a.flush()

        first = packet_in_another_process(target, valkey_server, prefix, sid)
        assert any("PLUMTREE" in text for text in first["recalled"])
        assert any("Anna" in text for text in first["notes"])
        assert first["hot"]["misses"] == 1 and first["hot"]["kept"] == 1
        warm = packet_in_another_process(target, valkey_server, prefix, sid)
        assert warm["hot"]["hits"] == 1  # built once, served to every instance
        assert warm["messages"] == first["messages"]  # the same packet, rendered the same

        # a note superseded on A (no session of B's changed)
        a.correct_note(note.id or 0, "Ben keeps the secret code word.")
        after_note = packet_in_another_process(target, valkey_server, prefix, sid)
        assert after_note["hot"]["misses"] == 1
        assert any("Ben" in t for t in after_note["notes"]) and not any("Anna" in t for t in after_note["notes"])

        # a summary rewritten by A's background work (the summarizer's own store write)
        record = a.store.get_derived(sid, "summary")
        assert record is not None and record["text"], "A's summary should exist by now"
        a.store.put_derived(sid, "summary", {**record, "text": "REWRITTEN: the report was reviewed."})
        after_summary = packet_in_another_process(target, valkey_server, prefix, sid)
        assert after_summary["hot"]["misses"] == 1
        assert after_summary["summary"] == "REWRITTEN: the report was reviewed."
        assert packet_in_another_process(target, valkey_server, prefix, sid)["hot"]["hits"] == 1

        # a message of another session, seen through recall, forgotten on A
        assert any(b"PLUMTREE" in raw for raw in cached_packets(valkey_server, prefix))
        a.forget_messages([code.id or 0])
        assert not any(b"PLUMTREE" in raw for raw in cached_packets(valkey_server, prefix))  # gone from Valkey
        after_forget = packet_in_another_process(target, valkey_server, prefix, sid)
        assert after_forget["hot"]["misses"] == 1
        assert "PLUMTREE" not in json.dumps(after_forget)

        from tests.server_support import client_for

        with client_for(a) as http:  # A asked once, before anything was kept
            scraped = http.get("/metrics").text
        assert 'memlane_hot_cache_packets_total{outcome="misses"} 1.0' in scraped
        assert a.stats()["hot_packets"]["misses"] == 1


def test_background_writes_move_the_tenant_version_and_nothing_else(tmp_path: Path) -> None:
    """What the keyword backlog, the embedder and the summarizer write moves the data version
    of their tenant in the same transaction, and only of their tenant."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        store = mem.store
        sid = mem.create_session(session_id="v1", tenant_id="acme")
        other = store.tenant_version("default")
        before = store.tenant_version("acme")
        mem.add(sid, "Ein Satz über die Datenbanksicherung.", role="user")
        after_append = store.tenant_version("acme")
        assert after_append > before
        assert mem.backlog() != {}  # keyword index and vector still to be written
        mem.flush()
        assert mem.backlog() in ({}, {"keywords": 0, "vectors": 0})
        assert store.tenant_version("acme") > after_append  # the backlog's writes moved it
        settled = store.tenant_version("acme")
        store.put_derived(sid, "summary", {"text": "x"})
        assert store.tenant_version("acme") == settled + 1
        assert store.tenant_version("default") == other


@pytest.mark.postgres
def test_postgres_vectors_made_after_the_data_versions_still_move_them(pg_url: str) -> None:
    """pgvector is optional (migration 2 is retried at each start): a store that gets it after
    the data versions were made gets the trigger on message_vectors then."""
    from memlane.store.postgres import PostgresStore

    def without_vectors(conn: Any) -> None:  # as a server without pgvector would have left it
        conn.execute("DROP TABLE message_vectors, vector_meta")
        conn.execute("DELETE FROM schema_migrations WHERE version = 2")

    store = PostgresStore(pg_url)
    store.write(without_vectors)
    store.close()
    store = PostgresStore(pg_url)  # migration 2 runs now, after the data versions
    try:
        found = store.read("SELECT count(*) FROM pg_trigger WHERE tgname = 'data_version' "
                           "AND tgrelid = 'message_vectors'::regclass")
        assert found[0][0] == 1
    finally:
        store.close()
