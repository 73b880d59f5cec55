"""The event bus: doorbells (PostgreSQL LISTEN/NOTIFY, SQLite data_version, Redis/Valkey), catch-up
after a disconnect from the durable outbox, subscriptions, and the shared hot cache on a real Valkey."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.bus.bell import Doorbell
from memlane.errors import NotFoundError
from memlane.store.events import ChangeEvent

ENV_SRC = str(Path(__file__).resolve().parents[1] / "src")

_WRITER = """
import sys
from memlane import Memory
with Memory(sys.argv[1], embedder="none", redis_url=sys.argv[3] or None) as mem:
    mem.create_session(session_id=sys.argv[4])
    for i in range(int(sys.argv[2])):
        mem.add(sys.argv[4], f"line {i}")
"""


def write_in_another_process(target: str, n: int, session: str, redis_url: str = "") -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, target, str(n), redis_url, session],
        env={"PYTHONPATH": ENV_SRC, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for background work by its outcome (with a generous limit), never by a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Collector:
    """A subscription's callback: keeps what arrives, in order."""

    def __init__(self) -> None:
        self.events: list[ChangeEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: ChangeEvent) -> None:
        with self._lock:
            self.events.append(event)

    def appended(self, session: str) -> list[int]:
        with self._lock:
            return [e.subject_id or 0 for e in self.events
                    if e.kind == "message.appended" and e.session_id == session]


def test_doorbell_wakes_waiters_and_callbacks_and_survives_a_broken_callback() -> None:
    bell = Doorbell()
    seen = bell.generation
    assert bell.wait(seen, 0.01) == seen  # nothing rang: the timeout passes
    calls: list[int] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    bell.on_ring(broken)
    cancel = bell.on_ring(lambda: calls.append(1))
    bell.ring()
    assert bell.wait(seen, 5) == seen + 1 and calls == [1]
    cancel()
    bell.ring()
    assert calls == [1]


def test_sqlite_subscriber_hears_another_process_through_data_version(tmp_path: Path) -> None:
    target = str(tmp_path / "m.db")
    with Memory(target, embedder="none") as mem:
        got = Collector()
        sub = mem.subscribe(got)
        write_in_another_process(target, 30, "w")
        wait_for(lambda: len(got.appended("w")) == 30, "30 appends from the other process")
        ids = got.appended("w")
        assert ids == sorted(ids) and len(set(ids)) == 30
        stats = mem.bus.stats()["bus"]
        assert stats["kind"] == "sqlite-data-version" and stats["changes"] >= 1
        sub.close()
        assert sub.error is None


def test_local_commits_ring_without_a_watcher(tmp_path: Path) -> None:
    with Memory("memory://", embedder="none") as mem:  # in RAM: no other process can write
        got = Collector()
        sub = mem.subscribe(got)
        sid = mem.create_session(session_id="s")
        for i in range(5):
            mem.add(sid, f"m{i}")
        wait_for(lambda: len(got.appended("s")) == 5, "5 local appends")
        assert mem.bus.kind == "local"
        sub.close()


@pytest.mark.postgres
def test_postgres_listen_wakes_and_catches_up_after_the_connection_is_killed(pg_url: str) -> None:
    from memlane.store.pg_listen import PgListener

    with Memory(pg_url, embedder="none") as mem:
        mem.delete_session("pg-a")
        mem.delete_session("pg-b")
        got = Collector()
        sub = mem.subscribe(got)
        listener = mem.bus.waker
        assert isinstance(listener, PgListener) and listener.listening
        write_in_another_process(pg_url, 10, "pg-a")
        wait_for(lambda: len(got.appended("pg-a")) == 10, "10 events woken by NOTIFY")
        assert listener.notifications >= 1
        # Disconnect: the server ends the LISTEN connection; NOTIFYs sent meanwhile are gone.
        pid = listener.backend_pid()
        assert pid is not None
        mem.store.write(lambda conn: conn.execute("SELECT pg_terminate_backend(%s)", (pid,)))  # type: ignore[attr-defined]
        write_in_another_process(pg_url, 25, "pg-b")
        wait_for(lambda: listener.connects >= 2, "the listener to reconnect")
        wait_for(lambda: len(got.appended("pg-b")) == 25, "the catch-up after reconnecting")
        sub.close()
        assert sub.error is None
        ids = [e.id for e in got.events]
        assert ids == sorted(ids) and len(ids) == len(set(ids)), "exactly once, in order"
        b = got.appended("pg-b")
        assert b == sorted(b) and len(set(b)) == 25
        # The same stream read afresh from the outbox matches what the subscriber got.
        first = got.events[0].id - 1
        replay = [e.id for e in mem.events(since=first) if e.id <= got.events[-1].id]
        assert replay == ids


# ---------------------------------------------------------------- Redis / Valkey


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_redis_bus_carries_events_between_instances_and_survives_a_kicked_subscriber(
    backend: str, tmp_path: Path, valkey_server: str, request: pytest.FixtureRequest,
) -> None:
    from memlane.bus.redis_bus import RedisWaker, redis_client

    target = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with Memory(target, embedder="none", redis_url=valkey_server) as mem:
        mem.delete_session("r1")
        mem.delete_session("r2")
        got = Collector()
        sub = mem.subscribe(got)
        waker = mem.bus.waker
        assert isinstance(waker, RedisWaker) and mem.bus.kind == "redis"
        assert mem.stats()["bus"]["kind"] == "redis"
        write_in_another_process(target, 15, "r1", valkey_server)
        wait_for(lambda: len(got.appended("r1")) == 15, "15 events rung through Redis")
        assert waker.messages >= 1  # the other instance PUBLISHed; no data_version watcher runs
        # Disconnect: Redis drops the subscriber; what is published meanwhile is not replayed.
        admin = redis_client(valkey_server)
        assert admin.client_kill_filter(_type="pubsub") >= 1
        write_in_another_process(target, 15, "r2", valkey_server)
        wait_for(lambda: waker.connects >= 2, "the Redis subscriber to reconnect")
        wait_for(lambda: len(got.appended("r2")) == 15, "the catch-up from the outbox")
        sub.close()
        ids = [e.id for e in got.events]
        assert ids == sorted(ids) and len(ids) == len(set(ids))
        admin.close()


def test_redis_hot_cache_is_shared_expires_and_drops_by_tag(valkey_server: str) -> None:
    from memlane.bus.shared_cache import HotCache, RedisCache
    from memlane.errors import InvalidInputError

    a, b = RedisCache(valkey_server, prefix="t1"), RedisCache(valkey_server, prefix="t1")
    other = RedisCache(valkey_server, prefix="t2")  # another deployment on the same server
    assert isinstance(a, HotCache)
    a.set("packet:s1", b"one", ttl_seconds=60, tags=["session:s1"])
    a.set("packet:s2", b"two", tags=["session:s2"])
    a.set("answer:q", b"three", ttl_seconds=60, tags=["session:s1", "note:7"])
    assert b.get("packet:s1") == b"one" and other.get("packet:s1") is None
    assert b.invalidate("session:s1") == 2  # instance B drops what instance A stored
    assert a.get("packet:s1") is None and a.get("answer:q") is None and a.get("packet:s2") == b"two"
    a.set("short", b"x", ttl_seconds=0.05)
    wait_for(lambda: b.get("short") is None, "the entry to expire")
    assert b.delete("packet:s2", "missing") == 1
    with pytest.raises(InvalidInputError, match="ttl_seconds"):
        a.set("k", b"v", ttl_seconds=0)
    assert b.stats()["hits"] >= 1
    for cache in (a, b, other):
        cache.close()


def test_windows_are_shared_through_valkey_and_never_stale(tmp_path: Path, valkey_server: str) -> None:
    from memlane.bus.redis_bus import redis_client

    target = str(tmp_path / "m.db")
    prefix = "winshare"
    with Memory(target, embedder="none", redis_url=valkey_server, redis_prefix=prefix) as a, \
            Memory(target, embedder="none", redis_url=valkey_server, redis_prefix=prefix) as b:
        sid = a.create_session(session_id="w1", system_prompt="be brief")
        for i in range(5):
            a.add(sid, f"line {i}", role="user")
        first = a.window(sid, 500)
        assert a.stats()["hot_cache"] == {"window_hits": 0, "window_misses": 1}
        got = b.window(sid, 500)  # B never read this session: served from what A stored
        assert b.stats()["hot_cache"] == {"window_hits": 1, "window_misses": 0}
        assert [m.to_dict() for m in got.messages] == [m.to_dict() for m in first.messages]
        assert got.tokens == first.tokens and got.messages[0].role == "system"
        assert b.window(sid, 40).tokens <= 40  # another budget is another entry
        assert b.stats()["hot_cache"]["window_misses"] == 1

        a.add(sid, "appended on A", role="user")
        after = b.window(sid, 500)
        assert after.messages[-1].content == "appended on A"
        assert b.stats()["hot_cache"]["window_hits"] == 1  # the append moved the key: a miss
        from memlane.server.metrics import Metrics

        scraped = Metrics(b).render().decode()
        assert 'memlane_hot_cache_windows_total{outcome="hits"} 1.0' in scraped
        assert 'memlane_hot_cache_windows_total{outcome="misses"} 2.0' in scraped

        admin = redis_client(valkey_server)
        assert any(sid.encode() in k for k in admin.scan_iter(f"{prefix}:*"))
        a.delete_session(sid)
        left = [k for k in admin.scan_iter(f"{prefix}:*") if sid.encode() in k]
        assert left == []  # nothing of the forgotten session stays in Valkey
        with pytest.raises(NotFoundError):
            b.window(sid, 500)
        again = a.create_session(session_id="w1")  # same name, fresh history
        a.add(again, "fresh", role="user")
        assert [m.content for m in b.window(again, 500).messages] == ["fresh"]
        gone = a.add(again, "secret", role="user")
        assert b.window(again, 500).messages[-1].content == "secret"
        a.forget_messages([gone.id or 0])
        assert [m.content for m in b.window(again, 500).messages] == ["fresh"]
        admin.close()


_WINDOW_READER = """
import json, sys
from memlane import Memory
with Memory(sys.argv[1], embedder="none", redis_url=sys.argv[2], redis_prefix=sys.argv[3]) as mem:
    win = mem.window(sys.argv[4], 500)
    print(json.dumps({"messages": [[m.content, m.pinned] for m in win.messages],
                      "hot": mem.stats()["hot_cache"]}))
"""


def window_in_another_process(target: str, redis_url: str, prefix: str, session: str) -> dict[str, Any]:
    """Instance B: a fresh process reads the session's window through the shared hot cache."""
    done = subprocess.run(
        [sys.executable, "-c", _WINDOW_READER, target, redis_url, prefix, session],
        env={"PYTHONPATH": ENV_SRC, "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_hide_pin_and_prompt_on_one_instance_move_the_window_key_for_another_process(
    backend: str, tmp_path: Path, valkey_server: str, request: pytest.FixtureRequest,
) -> None:
    """Hides and pins write no change event and leave the message count as it was: only the
    session's version tells another instance that its cached window is old. Instance B
    (another process, which hears no events) must never get a hidden message back."""
    target = str(tmp_path / "m.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    prefix = f"hide-{backend}"
    with Memory(target, embedder="none", redis_url=valkey_server, redis_prefix=prefix) as a:
        a.delete_session("h1")
        sid = a.create_session(session_id="h1")
        said = [a.add(sid, f"line {i}", role="user") for i in range(4)]
        assert [c for c, _ in window_in_another_process(target, valkey_server, prefix, sid)["messages"]] == [
            "line 0", "line 1", "line 2", "line 3"]
        warm = window_in_another_process(target, valkey_server, prefix, sid)
        assert warm["hot"] == {"window_hits": 1, "window_misses": 0}  # B's read is cached for all

        assert a.store.hide_messages(sid, up_to_id=said[1].id) == 2  # "clear" up to line 1
        after_hide = window_in_another_process(target, valkey_server, prefix, sid)
        assert [c for c, _ in after_hide["messages"]] == ["line 2", "line 3"]
        assert after_hide["hot"] == {"window_hits": 0, "window_misses": 1}

        a.mark_important(said[3].id or 0, pinned=True)
        after_pin = window_in_another_process(target, valkey_server, prefix, sid)
        assert after_pin["messages"] == [["line 2", False], ["line 3", True]]
        assert after_pin["hot"]["window_misses"] == 1

        a.update_session(sid, system_prompt="Answer in German.")
        assert window_in_another_process(target, valkey_server, prefix, sid)["messages"][0] == [
            "Answer in German.", False]
        a.clear_session(sid)
        assert window_in_another_process(target, valkey_server, prefix, sid)["messages"] == [
            ["Answer in German.", False]]


def test_bus_figures_in_stats_and_metrics_follow_a_slow_follower(tmp_path: Path) -> None:
    """kind, published commits, the outbox's head, the furthest id handed out and the
    slowest follower's lag, in mem.stats(), /metrics and `memlane stats --json`."""
    from typer.testing import CliRunner

    from memlane.cli.main import app
    from memlane.server.metrics import Metrics

    target = str(tmp_path / "m.db")
    with Memory(target, embedder="none") as mem:
        sid = mem.create_session(session_id="f1")
        idle = mem.stats()["bus"]
        assert idle["kind"] == "sqlite-data-version" and idle["followers"] == 0
        assert idle["lag_events"] == 0 and idle["seen_event_id"] is None
        assert idle["last_event_id"] >= 1  # session.created

        release, first = threading.Event(), threading.Event()
        got = Collector()

        def slow(event: ChangeEvent) -> None:
            first.set()
            release.wait(30)
            got(event)

        sub = mem.subscribe(slow, since=idle["last_event_id"])
        for i in range(3):
            mem.add(sid, f"line {i}", role="user")
        assert first.wait(30)  # it holds the first append; the other two wait behind it
        held = mem.stats()["bus"]
        assert held["followers"] == 1 and held["published"] >= 3
        assert held["last_event_id"] == idle["last_event_id"] + 3
        assert held["seen_event_id"] == idle["last_event_id"] + 1
        assert held["lag_events"] == 2 and held["lag_seconds"] >= 0.0
        scraped = Metrics(mem).render().decode()
        assert 'memlane_bus_info{kind="sqlite-data-version"} 1.0' in scraped
        assert "memlane_bus_lag_events 2.0" in scraped
        assert f"memlane_bus_last_event_id {float(held['last_event_id'])}" in scraped

        release.set()
        wait_for(lambda: len(got.appended(sid)) == 3, "the follower to catch up")
        caught = mem.stats()["bus"]
        assert caught["seen_event_id"] == caught["last_event_id"] and caught["lag_events"] == 0
        sub.close()
        assert mem.stats()["bus"]["followers"] == 0

    shown = CliRunner().invoke(app, ["stats", "--json", "--store", target])
    assert shown.exit_code == 0, shown.output
    bus = json.loads(shown.output)["bus"]
    assert bus["kind"] == "sqlite-data-version" and bus["last_event_id"] == caught["last_event_id"]


def test_redis_url_is_checked_when_settings_are_read(tmp_path: Path) -> None:
    from memlane.config import load_settings
    from memlane.errors import ConfigError

    env = {"MEMLANE_CONFIG": str(tmp_path / "absent.yaml"), "MEMLANE_REDIS_URL": "localhost:6379"}
    with pytest.raises(ConfigError, match="redis_url must start with redis://"):
        load_settings(env=env)


# ---------------------------------------------------------------- retention and forget


def test_forget_leaves_one_marker_that_pruning_removes_and_late_followers_hear_of_it(any_mem: Memory) -> None:
    from memlane.store.events import LOST

    mem = any_mem
    store = mem.store
    start = store.last_event_id()  # type: ignore[attr-defined]
    sid = mem.create_session(session_id="gone", user_id="ana", tenant_id="acme")
    mem.store_interaction("my tram pass number", "noted", session_id=sid)
    note = mem.add_note("Ana takes tram 28", user_id="ana", session_id=sid)
    mem.create_session(session_id="stays", tenant_id="acme")
    mem.delete_session(sid)
    events = list(mem.events(since=start))
    naming = [e.kind for e in events if e.session_id == sid]  # the tenant's key for "gone"
    assert naming == ["session.forgotten"]  # its created/appended events went with it
    removed = [e for e in events if e.kind == "note.removed"]
    assert [e.subject_id for e in removed] == [note.id] and removed[0].session_id is None
    # pruning: within the hour the marker stays, after it the id is gone from the outbox
    assert store.prune_events() == 0  # type: ignore[attr-defined]
    later = time.time() + 2 * 3600
    assert store.prune_events(later) == 1  # type: ignore[attr-defined]
    assert all(e.session_id != sid for e in mem.events(since=0))
    # a follower that stopped before the pruned marker is told it missed events
    replay = list(mem.events(since=start))
    assert replay[0].kind == LOST and replay[0].id == start
    assert [e.kind for e in replay[1:]] == [e.kind for e in events if e.kind != "session.forgotten"]
    assert list(mem.events(since=store.last_event_id())) == []  # type: ignore[attr-defined]
    # retention: everything older than event_retention_days goes
    assert store.prune_events(later, retention_seconds=3600) >= len(replay) - 1  # type: ignore[attr-defined]
    assert [e.kind for e in mem.events(since=0)] == [LOST]


def test_maintain_prunes_the_outbox_and_a_failing_callback_is_reported(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none") as mem:
        sid = mem.create_session(session_id="old")
        mem.store.write(lambda conn: conn.execute(  # type: ignore[attr-defined]
            "UPDATE change_events SET at = 0 WHERE session_id = 'old'"))  # a week and more ago
        report = mem.maintain()
        assert report.pruned_events == 1 and report.to_dict()["pruned_events"] == 1
        assert list(mem.events(since=mem.store.last_event_id())) == []  # type: ignore[attr-defined]

        def broken(event: ChangeEvent) -> None:
            raise ValueError("cache bug")

        sub = mem.subscribe(broken)
        mem.add(sid, "wake it")
        wait_for(lambda: sub.error is not None, "the subscription to record its failure")
        assert isinstance(sub.error, ValueError)
        sub.close()


def test_bench_hotcache_times_windows_and_packets_and_counts_repeated_packets(valkey_server: str) -> None:
    """`memlane bench hotcache`: windows from the log, hot-cache misses and hits; a packet's
    build beside the same packet served from Valkey; how many packets memlane chat builds
    twice (none, in process and over REST: every turn appends, and the response cache
    calls send the fingerprint of the packet the model got)."""
    from memlane.bench_hot_windows import format_table, run_hot_window_bench

    result = run_hot_window_bench(messages=60, budget=300, reads=10)
    assert result["hits"] >= 10 and result["window_messages"] > 1
    assert result["packet_bytes"] > 0 and result["packet_build_ms"] > 0 and result["packet_hit_ms"] > 0
    chat = result["chat_packets"]
    assert chat["in_process"] == {"builds": chat["turns"], "repeats": 0}
    # over REST the response cache calls name the turn's packet by its fingerprint: no rebuild
    assert chat["rest"] == {"builds": chat["turns"], "repeats": 0}
    assert result["packet_served_ms"] > 0 and result["packet_counts"]["hits"] >= 10
    assert "packets built" in format_table(result)
