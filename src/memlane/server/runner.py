"""Run the app under uvicorn: in the foreground (``memlane serve``) or in a thread (tests, bench).

The listening socket is bound before uvicorn starts, so the real URL (also for
port 0) is known and printed before the first request can arrive.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from memlane.errors import ConfigError


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    return f"http://{shown}:{port}"


class ServerThread:
    """A real uvicorn server on a free loopback port in a background thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self.config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
        self.server = uvicorn.Server(self.config)
        self.host = host
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self, timeout: float = 20.0) -> str:
        self._sock = self.config.bind_socket()
        self.url = _url(self._sock, self.host)
        sock = self._sock
        self._thread = threading.Thread(
            target=lambda: self.server.run(sockets=[sock]), name="memlane-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the memlane server did not start (see the log above)")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> ServerThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(app: Any, host: str, port: int, *, on_bound: Any = None, log_level: str = "warning") -> None:
    """Bind, report the URL through ``on_bound(url)``, then serve until Ctrl-C."""
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    server = uvicorn.Server(config)
    try:
        sock = config.bind_socket()
    except SystemExit as exc:  # uvicorn logs the OSError and exits; say what to do instead
        raise ConfigError(
            f"cannot listen on {host}:{port} (in use, or not an address of this machine); "
            "pick another with --port / --host"
        ) from exc
    try:
        if on_bound is not None:
            on_bound(_url(sock, host))
        server.run(sockets=[sock])
    finally:
        sock.close()
