"""Session management (seed 004): auto-create, idle expiry, per-user cap, topic changes.

Real SQLite files under tmp_path. Idle time is produced by moving a session's
last activity back (``update_session(last_active_at=...)``), not by sleeping.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import InvalidInputError, SessionNotFoundError
from memlane.models import utcnow
from memlane.search.embedders import get_embedder
from memlane.state.sessions import SessionManager


def _age(mem: Memory, sid: str, minutes: int) -> None:
    mem.update_session(sid, last_active_at=utcnow() - timedelta(minutes=minutes))


def test_defaults_follow_the_seed(mem: Memory) -> None:
    assert isinstance(mem.sessions, SessionManager)
    assert mem.sessions.idle_timeout == timedelta(hours=1)
    assert mem.sessions.max_active_per_user == 10
    assert mem.sessions.split_on_topic_change is False


def test_first_query_creates_a_session_and_later_ones_reuse_it(mem: Memory) -> None:
    mem.store_interaction("Wie zeige ich den freien Speicher an?", "Mit `df -h`.", user_id="max")
    first = mem.get_active_session("max")
    assert first.user_id == "max" and first.message_count == 2
    mem.store_interaction("Und den RAM?", "Mit `free -h`.", user_id="max")
    assert mem.get_active_session("max").id == first.id
    assert mem.get_state(first.id).turn_count == 2
    # Another user gets their own session.
    mem.store_interaction("hello", "hi", user_id="eva")
    assert mem.get_active_session("eva").id != first.id
    # get_active_session auto-creates too.
    new = mem.get_active_session("nobody-yet")
    assert new.user_id == "nobody-yet" and new.status == "active"


def test_idle_sessions_expire_and_the_next_query_starts_a_new_one(mem: Memory) -> None:
    mem.store_interaction("Is the backup done?", "Yes, finished at 03:00.", user_id="ana")
    old = mem.get_active_session("ana").id
    fresh_other = mem.create_session(user_id="bob")
    ended = mem.create_session(user_id="ana")
    mem.end_session(ended)
    _age(mem, old, 61)
    _age(mem, ended, 600)
    _age(mem, fresh_other, 59)

    assert mem.auto_expire_sessions() == [old]
    assert mem.get_session(old).status == "paused"
    assert mem.get_state(old).status == "paused"
    assert mem.get_session(fresh_other).status == "active"  # 59 minutes is not idle
    assert mem.get_session(ended).status == "ended"  # already closed: left alone
    assert mem.auto_expire_sessions() == []

    mem.store_interaction("And the logs?", "They are in /var/log/backup.", user_id="ana")
    new = mem.get_active_session("ana").id
    assert new != old
    # Writing to the expired session by its id wakes it up.
    mem.store_interaction("back to this one", "Sure.", session_id=old)
    assert mem.get_session(old).status == "active"
    assert mem.get_state(old).status == "active"


def test_expiry_happens_on_lookup_and_with_a_custom_timeout(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.sessions.idle_timeout = timedelta(minutes=5)
        mem.store_interaction("q", "a", user_id="u")
        sid = mem.get_active_session("u").id
        _age(mem, sid, 6)
        # No explicit expiry call: looking up the active session expires it first.
        assert mem.get_active_session("u").id != sid
        assert mem.get_session(sid).status == "paused"


def test_at_most_n_active_sessions_per_user(mem: Memory) -> None:
    mem.sessions.max_active_per_user = 3
    made = []
    for i in range(5):
        sid = mem.sessions.create_session("kim", title=f"s{i}").id
        _age(mem, sid, 50 - i)  # s0 is the least recently active
        made.append(sid)
    statuses = [mem.get_session(sid).status for sid in made]
    assert statuses == ["paused", "paused", "active", "active", "active"]
    assert len(mem.list_sessions(user_id="kim", status="active")) == 3
    # A session made with plain create_session counts once it is written to.
    extra = mem.create_session(user_id="kim")
    mem.add(extra, "hello")
    assert mem.get_session(extra).status == "active"
    assert mem.get_session(made[2]).status == "paused"
    assert len(mem.list_sessions(user_id="kim", status="active")) == 3
    # Waking an old one pauses the least recently active other one instead.
    mem.add(made[0], "I'm back")
    assert mem.get_session(made[0]).status == "active"
    assert mem.get_session(made[3]).status == "paused"
    assert len(mem.list_sessions(user_id="kim", status="active")) == 3
    # Other users and sessions without a user are not counted against kim.
    for _ in range(4):
        mem.add(mem.create_session(), "anonymous")
    mem.add(mem.create_session(user_id="lee"), "hi")
    assert len(mem.list_sessions(user_id="kim", status="active")) == 3
    assert len(mem.list_sessions(limit=50, status="active")) == 3 + 4 + 1


def test_resume_session(mem: Memory) -> None:
    mem.sessions.max_active_per_user = 1
    a = mem.sessions.create_session("z").id
    b = mem.sessions.create_session("z").id
    assert mem.get_session(a).status == "paused"
    assert mem.sessions.resume_session(a).status == "active"
    assert mem.get_session(b).status == "paused"


# ---------------------------------------------------------------- topic changes


@pytest.fixture(scope="module")
def minilm() -> object:
    # MiniLM is the default embedder and a core dependency: if it cannot load, these tests fail
    embedder = get_embedder("minilm")
    embedder.embed(["warm up"])
    return embedder


def _nginx_session(mem: Memory) -> str:
    mem.store_interaction(
        "My nginx server returns 502 errors behind the proxy.",
        "You could restart it with `sudo systemctl restart nginx` and check the upstream "
        "timeouts.",
        user_id="ops",
    )
    return mem.get_active_session("ops").id


def test_detect_topic_change_with_minilm(mem: Memory, minilm: object) -> None:
    mem.sessions.embedder = minilm  # type: ignore[assignment]
    sid = _nginx_session(mem)
    assert not mem.detect_topic_change("How do I configure nginx reverse proxy timeouts?", sid)
    assert not mem.detect_topic_change("Can I also raise the nginx upload size limit?", sid)
    assert not mem.detect_topic_change("Which port does the server listen on?", sid)
    assert mem.detect_topic_change("What is a good recipe for banana bread with walnuts?", sid)
    assert mem.detect_topic_change("Wie backe ich ein Bananenbrot mit Walnüssen?", sid)
    # Replies that lean on the context are never a new topic.
    assert not mem.detect_topic_change("yes, do it", sid)
    assert not mem.detect_topic_change("Mach das bitte nochmal für alle Server", sid)
    empty = mem.create_session(user_id="ops2")
    assert not mem.detect_topic_change("banana bread", empty)


def test_topic_change_starts_a_new_session_when_enabled(mem: Memory, minilm: object) -> None:
    mem.sessions.embedder = minilm  # type: ignore[assignment]
    sid = _nginx_session(mem)
    mem.store_interaction("How do I tune nginx proxy timeouts?", "Set proxy_read_timeout.",
                          user_id="ops")
    assert mem.get_active_session("ops").id == sid  # off by default
    mem.sessions.split_on_topic_change = True
    mem.store_interaction("And the proxy_connect_timeout for nginx?", "Same block.", user_id="ops")
    assert mem.get_active_session("ops").id == sid  # same topic
    mem.store_interaction(
        "What is a good recipe for banana bread with walnuts?",
        "Mash three ripe bananas, add flour, sugar and chopped walnuts.",
        user_id="ops",
    )
    new = mem.get_active_session("ops")
    assert new.id != sid
    assert new.metadata["previous_session_id"] == sid
    assert mem.get_session(sid).status == "paused"
    assert mem.get_state(new.id).turn_count == 1
    assert "banana bread" in " ".join(mem.get_state(new.id).active_topics).lower() or any(
        "walnut" in t.lower() for t in mem.get_state(new.id).active_topics
    )


def test_topic_change_with_hashing_and_bad_input(mem: Memory) -> None:
    # The hashing embedder only sees shared words: it needs a low threshold.
    mem.sessions.embedder = get_embedder("hashing")
    mem.sessions.topic_change_threshold = 0.15
    sid = _nginx_session(mem)
    assert not mem.detect_topic_change("nginx proxy timeouts for the upstream", sid)
    assert mem.detect_topic_change("What is a good recipe for banana bread with walnuts?", sid)
    with pytest.raises(InvalidInputError):
        mem.detect_topic_change("", sid)
    with pytest.raises(SessionNotFoundError):
        mem.detect_topic_change("anything at all here", "missing")
