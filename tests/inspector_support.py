"""What the inspector's browser tests share: the data they load, Debian's chromium under
Playwright, a ready page, screenshots under test-artifacts/, confirming a dialog."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.eval.locomo_data import load_conversation
from memlane.server.tenancy import Caller, TenantView
from tests.conftest import LONG_CONVERSATION
from tests.server_support import REPO

# Playwright is a dev dependency; a bare install without it should skip, not fail to collect.
expect = pytest.importorskip(
    "playwright.sync_api", reason="skipping browser tests: playwright is not installed (pip install -e '.[dev]')"
).expect

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def browser_or_skip() -> None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("skipping browser tests: /usr/bin/chromium is not installed (apt-get install -y chromium)")


def load_data(mem: Memory) -> dict[str, Any]:
    """A travel chat with tool calls and turns, plus three sessions of a LoCoMo-format conversation."""
    view = TenantView(mem, Caller(None))
    view.create_session(session_id="trip", title="Trip planning", user_id="ana", system_prompt="You plan trips.")
    mem.store_interaction("Hi! I'm Ana and I'm vegetarian. Lisbon in May?", "Lovely! Noted: vegetarian.",
                          session_id="trip", author_name="Ana", metadata={"intent": "plan", "model_used": "llama3.2:3b"})
    call = {"id": "call_w1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lisbon", "month": "May"}'}}
    mem.add_messages("trip", [
        {"role": "user", "content": "What's the weather like then?", "author_name": "Ana"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "22C and sunny on average", "tool_call_id": "call_w1", "name": "get_weather"},
        {"role": "assistant", "content": "Expect about 22C and sun."},
    ])
    mem.store_interaction("Remind me to book the Sintra train.", "I'll remind you.", session_id="trip",
                          author_name="Ana", metadata={"intent": "reminder"})
    view.create_session(session_id="room-7", title="Matrix room #books", user_id="bob")
    mem.add("room-7", "Has anyone read Piranesi?", author_name="Bob", author_id="@bob:matrix.org")
    mem.add("room-7", "Yes, loved the house of endless halls.", author_name="Maria", author_id="@maria:matrix.org")
    loaded = 2
    convo = load_conversation(LONG_CONVERSATION)
    for session in convo.sessions[:3]:
        sid = f"locomo-{convo.sample_id}-{session.index}"
        view.create_session(session_id=sid, title=f"LoCoMo {convo.sample_id} {session.key}",
                            user_id=convo.speaker_a)
        mem.add_messages(sid, convo.session_messages(session, session_id=sid))
        loaded += 1
    mem.flush()
    return {"sessions": loaded}


def launch_browser() -> Iterator[Any]:
    """Headless Debian chromium through Playwright (a test module's ``browser`` fixture yields from it)."""
    browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
                              args=ARGS, headless=True)
        yield b
        b.close()


def ready_page(browser: Any, url: str, errors: list[str], width: int = 1400, height: int = 1000) -> Any:
    """A page on the inspector, loaded, collecting script errors into ``errors``."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url + "/")
    page.wait_for_selector("body[data-ready='1']")
    return page


def shot(page: Any, name: str, **options: Any) -> Path:
    """Save a screenshot under test-artifacts/ (git-ignored) and say where it went."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), **options)
    print(f"screenshot: {path}")
    return path


def confirm(page: Any) -> None:
    page.wait_for_selector("#confirm-dialog:not([hidden])")
    page.click("#confirm-ok")
    page.wait_for_selector("#confirm-dialog[hidden]", state="attached")


def offline(page: Any, base_url: str) -> list[str]:
    """Refuse every request that leaves the server under test; returns the refused URLs."""
    refused: list[str] = []

    def handle(route: Any) -> None:
        if route.request.url.startswith(base_url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", handle)
    return refused
