"""The response cache (seed 004): hits, misses, paraphrases, TTL, scope, invalidation by
forget and supersede, erasure from disk; on a SQLite file and on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import Memory
from memlane.context.question_match import minimal_pair, semantic_match, specifics
from memlane.errors import InvalidInputError
from tests.pg_fixture import fresh_pg_memory
from tests.test_erase import traces

Q = "How do I list open ports on Linux?"
PARAPHRASE = "Which command shows the open ports on my Linux machine?"
A = "Run `ss -tulpn`: it lists listening TCP and UDP ports with their processes."


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    if request.param == "sqlite":
        with Memory(tmp_path / "m.db") as m:
            yield m
    else:
        with fresh_pg_memory(request.getfixturevalue("pg_url")) as m:
            yield m


def _session(mem: Memory, user: str = "anna", tenant: str = "default") -> str:
    sid = mem.create_session("You help with Linux.", user_id=user, tenant_id=tenant)
    mem.store_interaction("Hi, I run Debian.", "Nice, how can I help?", session_id=sid)
    return sid


def test_exact_and_paraphrase_hit_a_different_question_misses(mem: Memory) -> None:
    sid = _session(mem)
    assert mem.cached_response(Q, sid, model="llama3.2") is None
    mem.cache_response(Q, A, sid, model="llama3.2", cost_seconds=2.5, cost_tokens=400)
    hit = mem.cached_response("how do I list open ports on linux", sid, model="llama3.2")
    assert hit is not None and hit.match == "exact" and hit.response == A
    para = mem.cached_response(PARAPHRASE, sid, model="llama3.2")
    assert para is not None and para.match == "semantic" and para.similarity >= 0.78
    assert mem.cached_response(PARAPHRASE, sid, model="llama3.2", semantic=False) is None
    assert mem.cached_response("How do I close an open port on Linux?", sid, model="llama3.2") is None
    assert mem.cached_response(Q, sid, model="mistral") is None  # another model's answer is not its own
    stats = mem.stats()["response_cache"]
    assert stats["lookups"] == 6 and stats["hits"] == 2 and stats["entries"] == 1
    assert stats["saved_seconds"] == pytest.approx(5.0) and stats["saved_tokens"] == 800
    assert stats["hit_rate"] == pytest.approx(2 / 6, abs=1e-3)


def test_a_repeated_question_hits_in_a_new_session_and_right_after(mem: Memory) -> None:
    first = mem.create_session("You help with Linux.", user_id="anna")
    mem.cache_response(Q, A, first, model="m")
    mem.store_interaction(Q, A, session_id=first)  # the turn the answer came from
    # Asked again at once: the earlier ask in the window does not change the context.
    assert mem.cached_response(Q, first, model="m") is not None
    # And in a new session of the same user, where recall finds the earlier ask.
    second = mem.create_session("You help with Linux.", user_id="anna")
    assert mem.cached_response(PARAPHRASE, second, model="m") is not None
    # Something else said since is context the answer did not see.
    mem.store_interaction("I switched to FreeBSD yesterday.", "Noted.", session_id=first)
    assert mem.cached_response(Q, first, model="m") is None


def test_scoped_per_user_and_tenant(mem: Memory) -> None:
    anna = mem.create_session("You help with Linux.", user_id="anna")
    mem.cache_response(Q, A, anna, model="m")
    assert mem.cached_response(Q, mem.create_session("You help with Linux.", user_id="anna"), model="m")
    assert mem.cached_response(Q, mem.create_session("You help with Linux.", user_id="ben"), model="m") is None
    other_tenant = mem.create_session("You help with Linux.", user_id="anna", tenant_id="acme")
    assert mem.cached_response(Q, other_tenant, model="m") is None
    anonymous = mem.create_session("You help with Linux.")
    mem.cache_response(Q, "anon answer", anonymous, model="m")
    assert mem.cached_response(Q, mem.create_session("You help with Linux."), model="m") is None
    assert mem.stats()["response_cache"]["entries"] == 2


def test_ttl(mem: Memory) -> None:
    sid = _session(mem)
    now = [1_000_000.0]
    mem.cache_response(Q, A, sid, model="m", ttl=60)
    assert mem.parts.responses is not None  # built on first use
    mem.parts.responses.clock = lambda: now[0]
    entry = mem.cached_response(Q, sid, model="m")
    assert entry is not None
    now[0] = entry.entry.expires_at or 0.0
    assert mem.cached_response(Q, sid, model="m") is None
    assert mem.stats()["response_cache"]["entries"] == 1  # expired, still on disk...
    mem.cache_response("Another question?", A, sid, model="m", ttl=60)
    assert mem.stats()["response_cache"]["entries"] == 1  # ...until the scope's next answer comes
    with pytest.raises(InvalidInputError, match="ttl"):
        mem.cache_response(Q, A, sid, model="m", ttl=0)
    with pytest.raises(InvalidInputError, match="model"):
        mem.cached_response(Q, sid, model=" ")


def test_forgetting_a_message_of_the_context_drops_the_answer(mem: Memory) -> None:
    sid = _session(mem)
    packet = mem.context(sid, Q)
    mem.cache_response(Q, A, sid, model="m", context=packet)
    assert mem.cached_response(Q, sid, model="m", context=packet) is not None
    first = next(m for m in packet.recent_turns if m.id is not None)
    assert first.id is not None
    mem.forget_messages([first.id])
    assert mem.cached_response(Q, sid, model="m", context=packet) is None  # gone, not only unmatched
    assert mem.stats()["response_cache"]["entries"] == 0


def test_a_superseded_note_drops_the_answer(mem: Memory) -> None:
    sid = mem.create_session("You help.", user_id="anna")
    mem.add_note("Anna's cat is called Whiskers.", user_id="anna", slot="cat name", session_id=sid)
    question = "What is my cat called?"
    packet = mem.context(sid, question)
    assert packet.note_ids, "the note should be in the packet"
    mem.cache_response(question, "Whiskers.", sid, model="m", context=packet)
    assert mem.cached_response(question, sid, model="m", context=packet) is not None
    mem.add_note("Anna's cat is called Tom.", user_id="anna", slot="cat name", session_id=sid)
    assert mem.stats()["response_cache"]["entries"] == 0
    assert mem.cached_response(question, sid, model="m") is None


def test_a_forgotten_session_takes_its_answers_off_disk(tmp_path: Path) -> None:
    token = "zorblaxquux"
    db = tmp_path / "m.db"
    with Memory(db) as mem:
        sid = _session(mem)
        keep = _session(mem, user="ben")
        mem.cache_response(f"What is the {token} setting?", f"The {token} setting is 42.", sid, model="m")
        mem.cache_response("What is the other setting?", "It is 7.", keep, model="m")
        assert traces(tmp_path, token)
        mem.delete_session(sid)
        assert mem.stats()["response_cache"]["entries"] == 1
    assert traces(tmp_path, token) == {}


def test_match_rules() -> None:
    assert minimal_pair("How do I enable the ufw firewall?", "How do I disable the ufw firewall?")
    assert not minimal_pair("How do I change my password?", "How can I change my password?")
    assert specifics("open port 22 with `ufw allow 22/tcp`") == {"22", "ufw allow 22/tcp"}
    assert not semantic_match("How do I install Python 3.12?", "How do I install Python 3.8?", 0.99)
    assert not semantic_match(Q, "Wie liste ich offene Ports unter Linux auf?", 0.99)  # answer language


def test_over_rest_with_the_client_and_tenant_keys(tmp_path: Path) -> None:
    from memlane.client import MemoryClient
    from memlane.server.auth import key_store_for
    from tests.server_support import auth, client_for, new_key, running_server

    with Memory(tmp_path / "m.db") as mem:
        acme = new_key(mem, "acme")
        beta = new_key(mem, "beta")
        keys = {"keys": key_store_for(mem.store), "require_auth": True}
        with running_server(mem, **keys) as url, MemoryClient(url, api_key=acme) as client:
            sid = client.create_session("You help with Linux.", user_id="anna")
            assert client.cached_response(Q, sid, model="m") is None
            stored = client.cache_response(Q, A, sid, model="m", ttl=600, cost_seconds=1.5)
            assert stored.id is not None and stored.expires_at is not None
            hit = client.cached_response(PARAPHRASE, sid, model="m")
            assert hit is not None and hit.match == "semantic" and hit.response == A
            assert hit.entry.cost_seconds == 1.5
        with client_for(mem, **keys) as http:
            other = http.post(f"/v1/sessions/{sid}/response-cache/lookup", json={"query": Q, "model": "m"},
                              headers=auth(beta))
            assert other.status_code == 404  # another tenant's session does not exist for it
            bad = http.post(f"/v1/sessions/{sid}/response-cache", json={"query": Q, "model": "m", "response": ""},
                            headers=auth(acme))
            assert bad.status_code == 422
    with Memory(tmp_path / "m.db") as mem, client_for(mem) as http:  # no keys: the operator sees /metrics
        text = http.get("/metrics").text
        assert "memlane_response_cache_hits_total 1.0" in text
        assert "memlane_response_cache_lookups_total 2.0" in text
        assert "memlane_response_cache_saved_seconds_total 1.5" in text


def test_over_rest_the_context_fingerprint_names_the_packet_the_model_got(tmp_path: Path) -> None:
    """A client sends back the fingerprint of the packet it got: the server fingerprints that
    packet (no build), even after the session moved on; an unknown fingerprint, or one whose
    messages were forgotten since, makes the server build the packet as old bodies do."""
    import httpx

    from memlane.client import MemoryClient
    from tests.server_support import running_server

    class Counting(Memory):
        builds = 0

        def context(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            type(self).builds += 1
            return super().context(*args, **kwargs)  # type: ignore[arg-type]

    with Counting(tmp_path / "m.db", embedder="hashing") as mem, running_server(mem) as url, \
            MemoryClient(url) as client:
        sid = client.create_session("You help with Linux.", user_id="anna")
        client.store_interaction("Hi, I run Debian.", "Nice, how can I help?", session_id=sid)
        packet = client.context(sid, Q, 500)
        assert packet.fingerprint.startswith("pk1_") and Counting.builds == 1
        assert client.cached_response(Q, sid, model="m", context=packet) is None
        client.cache_response(Q, A, sid, model="m", context=packet)
        assert Counting.builds == 1  # lookup and store fingerprinted the packet the client got
        client.store_interaction("Also, I use zsh.", "Noted.", session_id=sid)
        hit = client.cached_response(Q, sid, model="m", context=packet)  # the model's packet: a hit
        assert hit is not None and hit.response == A and Counting.builds == 1
        assert client.cached_response(Q, sid, model="m") is None  # built now: it has the zsh turn
        assert Counting.builds == 2
        client.forget_messages([packet.recent_turns[0].id or 0])
        assert client.cached_response(Q, sid, model="m", context=packet) is None
        assert Counting.builds == 3  # its packet quotes a forgotten message: built again
        note = mem.add_note("Anna's Linux laptop has ports 22 and 80 open.", session_id=sid, slot="open ports")
        with_note = client.context(sid, Q, 500)
        assert with_note.notes and Counting.builds == 4
        mem.correct_note(note.id or 0, "Anna's Linux laptop has port 22 open.")
        client.cache_response(Q, A, sid, model="m", context=with_note)
        assert Counting.builds == 5  # its note was superseded since: built again
        fresh = client.context(sid, Q, 500)
        other = client.create_session(user_id="bo")
        wrong = httpx.post(f"{url}/v1/sessions/{other}/response-cache/lookup",
                           json={"query": Q, "model": "m", "fingerprint": fresh.fingerprint})
        assert wrong.status_code == 422 and "another session" in wrong.text
        bad = httpx.post(f"{url}/v1/sessions/{sid}/response-cache/lookup",
                         json={"query": Q, "model": "m", "fingerprint": "not-one"})
        assert bad.status_code == 422 and "fingerprint" in bad.text


def test_an_uncalibrated_embedder_gets_exact_match_only(tmp_path: Path) -> None:
    from memlane.context.answers import ResponseCache
    from memlane.search.embedders import HashingEmbedder

    with Memory(tmp_path / "m.db") as mem:
        repository = mem.store.response_cache()
        assert repository is not None
        cache = ResponseCache(repository, mem.store, embedder=HashingEmbedder())
        assert cache.thresholds == {}  # MiniLM's thresholds mean nothing for its cosines
        sid = _session(mem)
        packet = mem.context(sid, Q)
        cache.store(Q, A, mem.get_session(sid), "m", packet)
        assert cache.lookup(Q.upper(), mem.get_session(sid), "m", packet) is not None
        assert cache.lookup(PARAPHRASE, mem.get_session(sid), "m", packet) is None
