"""Schemathesis against the OpenAPI document: no 5xx on any generated input, every
refusal has the one error body, and every operation gets generated examples. Bounded by
examples per operation, not by wall time: on a loaded machine it takes longer, never less
(the suite-wide pytest-timeout stays as the guard against a hang)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from memlane.server.app import create_app
from memlane.server.auth import key_store_for
from tests.server_support import auth, new_key, open_memory


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


def _fuzz(app: Any, headers: dict[str, str] | None, examples: int) -> tuple[dict[str, int], list[str]]:
    """Run every operation of the schema; returns the generated cases per operation label.

    Bounded by example count, not wall time: a deadline that stops early would leave the
    last operations untested, which is exactly what the per-operation assert rules out."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    calls: dict[str, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        calls[operation.label] = 0

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck), derandomize=True)
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            calls[case.operation.label] += 1
            _check(case, case.call(headers=headers), failures)

        run()
    return calls, failures


def _assert_every_operation_ran(calls: dict[str, int], at_least: int) -> None:
    assert len(calls) >= 20, f"the schema lost operations: {sorted(calls)}"
    assert "POST /v1/search" in calls and "GET /v1/sessions/{session_id}" in calls
    untried = sorted(label for label, n in calls.items() if n == 0)
    assert not untried, f"no generated example reached {untried}"
    assert sum(calls.values()) > at_least


def test_no_server_errors_on_generated_input(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "fuzz.db")
    # Some real data, so generated ids sometimes meet existing rows.
    mem.create_session(session_id="s", title="seed")
    mem.store_interaction("hello there", "hi", session_id="s")
    app = create_app(mem, mcp=False, allowed_hosts=["testserver"])  # the harness's Host
    calls, failures = _fuzz(app, None, examples=30)
    mem.close()
    _assert_every_operation_ran(calls, at_least=100)
    assert not failures, "\n".join(failures[:20])


def test_no_server_errors_with_keys(tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "fuzz-keys.db")
    key = new_key(mem, "fuzz")
    app = create_app(mem, keys=key_store_for(mem.store), require_auth=True, mcp=False,
                     allowed_hosts=["testserver"])
    calls, failures = _fuzz(app, auth(key), examples=8)
    mem.close()
    _assert_every_operation_ran(calls, at_least=50)
    assert not failures, "\n".join(failures[:20])
