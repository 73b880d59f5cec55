"""Schemathesis against the OpenAPI document: no 5xx on any generated input, and every
refusal has the one error body. Bounded so the whole file runs well under a minute."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from memlane.server.app import create_app
from memlane.server.auth import key_store_for
from tests.server_support import auth, new_key, open_memory

EXAMPLES_PER_OPERATION = 30


def _check(case: Any, response: Any, failures: list[str]) -> None:
    label = f"{case.method} {case.formatted_path} body={str(case.body)[:200]!r} query={case.query!r}"
    if response.status_code >= 500:
        failures.append(f"{response.status_code} for {label}: {response.text[:300]}")
        return
    if response.status_code >= 400:
        try:
            err = json.loads(response.text)["error"]
            assert isinstance(err["type"], str) and isinstance(err["message"], str)
        except (ValueError, KeyError, TypeError, AssertionError):
            failures.append(f"error body not in the standard shape for {label}: {response.text[:300]}")


def _fuzz(app: Any, headers: dict[str, str] | None, deadline: float) -> tuple[int, list[str]]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if time.monotonic() > deadline:
            break

        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), derandomize=True)
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            _check(case, case.call(headers=headers), failures)

        run()
    return calls, failures


def test_no_server_errors_on_generated_input(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "fuzz.db")
    # Some real data, so generated ids sometimes meet existing rows.
    mem.create_session(session_id="s", title="seed")
    mem.store_interaction("hello there", "hi", session_id="s")
    app = create_app(mem, mcp=False)
    calls, failures = _fuzz(app, None, time.monotonic() + 32)
    mem.close()
    assert calls > 100
    assert not failures, "\n".join(failures[:20])


def test_no_server_errors_with_keys(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "fuzz-keys.db")
    key = new_key(mem, "fuzz")
    app = create_app(mem, keys=key_store_for(mem.store), require_auth=True, mcp=False)
    global EXAMPLES_PER_OPERATION
    saved, EXAMPLES_PER_OPERATION = EXAMPLES_PER_OPERATION, 8
    try:
        calls, failures = _fuzz(app, auth(key), time.monotonic() + 12)
    finally:
        EXAMPLES_PER_OPERATION = saved
    mem.close()
    assert calls > 50
    assert not failures, "\n".join(failures[:20])
