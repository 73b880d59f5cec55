"""Helpers shared by the server, client, MCP, chat and inspector tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from memlane import Memory
from memlane.processes import stop_process
from memlane.server.app import create_app
from memlane.server.auth import key_store_for
from memlane.server.runner import ServerThread

REPO = Path(__file__).resolve().parents[1]
MEMLANE = str(REPO / ".venv" / "bin" / "memlane")


def open_memory(path: Path) -> Memory:
    return Memory(path, embedder="hashing")


@contextmanager
def client_for(mem: Memory, **options: Any) -> Iterator[TestClient]:
    """In-process ASGI client (lifespan included) for fast REST tests."""
    with TestClient(create_app(mem, **options), base_url="http://127.0.0.1",
                    raise_server_exceptions=False) as client:
        yield client


@contextmanager
def running_server(mem: Memory, **options: Any) -> Iterator[str]:
    """A real uvicorn server on a free loopback port; yields its base URL."""
    with ServerThread(create_app(mem, **options)) as server:
        yield server.url


def new_key(mem: Memory, tenant: str) -> str:
    return key_store_for(mem.store).create_key(tenant)[1]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(HOME=str(home), PYTHONUNBUFFERED="1", NO_COLOR="1", COLUMNS="200", MEMLANE_EMBEDDER="hashing")
    return env


@contextmanager
def serve_subprocess(args: Sequence[str], home: Path, timeout: float = 60.0) -> Iterator[tuple[str, list[str]]]:
    """Run `memlane ... serve --port 0 ...`; yield (base URL, banner lines) once it listens."""
    proc = subprocess.Popen(
        [MEMLANE, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(home),
    )
    lines: list[str] = []
    url = ""
    try:
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"server exited early:\n{''.join(lines)}")
            lines.append(line)
            if "inspector" in line and "http://" in line:
                url = line.split()[-1].rstrip("/")
            if line.startswith("Press Ctrl-C"):
                break
        assert url, "".join(lines)
        for _ in range(200):
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield url, lines
    finally:
        stop_process(proc)


def run_cli(args: Sequence[str], home: Path, input_text: str | None = None, timeout: float = 120.0,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = cli_env(home)
    env.update(extra_env or {})
    return subprocess.run(
        [MEMLANE, *args], capture_output=True, text=True, env=env, input=input_text,
        timeout=timeout, check=False,
    )


def python() -> str:
    return sys.executable
