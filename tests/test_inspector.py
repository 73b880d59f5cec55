"""The web inspector end to end: headless Chromium (Debian's package) driven by Playwright,
clicking through a real server with real data. Screenshots land in test-artifacts/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.eval.locomo_data import load_conversation
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.conftest import LONG_CONVERSATION
from tests.server_support import REPO, new_key, open_memory, running_server

pytestmark = pytest.mark.browser

# Playwright is a dev dependency; a bare install without it should skip, not fail to collect.
expect = pytest.importorskip(
    "playwright.sync_api", reason="skipping browser tests: playwright is not installed (pip install -e '.[dev]')"
).expect

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _browser_or_skip() -> None:
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


@pytest.fixture
def browser() -> Iterator[Any]:
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
                              args=ARGS, headless=True)
        yield b
        b.close()


def test_inspector_click_through(tmp_path: Path, browser: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    mem = open_memory(tmp_path / "inspector.db")
    data = load_data(mem)
    errors: list[str] = []
    with running_server(mem) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready='1']")
        assert page.locator(".session-item").count() == data["sessions"]
        assert "no auth" in page.locator("#who").inner_text()

        # filter and sort
        page.fill("#session-filter", "matrix")
        assert page.locator(".session-item").count() == 1
        page.fill("#session-filter", "")
        page.select_option("#session-sort", "messages")
        counts = [int(t.split()[0]) for t in page.locator(".session-item .m span:has-text('msgs')").all_inner_texts()]
        assert counts == sorted(counts, reverse=True)
        page.select_option("#session-sort", "recent")
        shown = page.locator(".session-item").evaluate_all("els => els.map(e => e.dataset.session)")
        activity = {s.id: s.last_active_at for s in mem.list_sessions(limit=100)}
        assert sorted(shown) == sorted(activity)
        assert [activity[sid] for sid in shown] == sorted(activity.values(), reverse=True), shown
        page.screenshot(path=str(ARTIFACTS / "inspector-sessions.png"))

        # transcript: authors, roles, tool calls, turn boundaries
        page.click(".session-item[data-session='trip']")
        page.wait_for_selector("#transcript")
        assert page.locator(".s-title").inner_text() == "Trip planning"
        assert page.locator("#transcript .turn-sep").count() == 3
        assert "intent plan" in page.locator("#transcript .turn-sep").first.inner_text()
        assert page.locator(".msg.tool").count() == 1
        assert "get_weather" in page.locator(".toolcall").inner_text()
        assert "call_w1" in page.locator(".msg.tool").inner_text()
        assert "Ana" in page.locator(".msg.user .author").first.inner_text()
        page.screenshot(path=str(ARTIFACTS / "inspector-transcript.png"), full_page=True)

        # search with score breakdown, then jump to the hit
        page.fill("#search-input", "vegetarian Lisbon")
        page.press("#search-input", "Enter")
        page.wait_for_selector("#search-results .hit")
        first = page.locator("#search-results .hit").first
        assert "vegetarian" in first.inner_text()
        assert first.locator(".score-parts .bar").count() >= 2
        assert "keyword" in first.locator(".score-parts").inner_text()
        page.screenshot(path=str(ARTIFACTS / "inspector-search.png"), full_page=True)
        first.locator(".hit-head a").click()
        page.wait_for_selector("#transcript .msg.highlight")

        # context packet for a query and a budget, with the per-section bar
        page.click(".tab[data-tab='context']")
        page.wait_for_selector("#context-query")
        page.fill("#context-query", "What should I eat in Lisbon?")
        page.fill("#context-budget", "600")
        page.click("#context-build")
        page.wait_for_selector("#budget-bar .seg, #context-out .error", timeout=30_000)
        expect(page.locator(".budget")).to_contain_text("/ 600 tokens", timeout=30_000)
        assert page.locator("#context-out .error").count() == 0, page.locator("#context-out").inner_text()
        segs = page.locator("#budget-bar .seg")
        assert segs.count() >= 2
        sections = {segs.nth(i).get_attribute("data-section") for i in range(segs.count())}
        assert "latest" in sections or "recent" in sections
        assert page.locator(".rendered .msg").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "inspector-context.png"), full_page=True)
        page.close()
    assert errors == []
    mem.close()


def test_inspector_asks_for_a_key(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "keys.db")
    key = new_key(mem, "acme")
    TenantView(mem, Caller("acme")).store_interaction("acme question", "acme answer", session_id="acme-1")
    TenantView(mem, Caller("other")).store_interaction("other question", "other answer", session_id="other-1")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:
        page = browser.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#key-dialog:not([hidden])")
        page.fill("#key-input", key)
        page.click("#key-form button[type=submit]")
        page.wait_for_selector(".session-item[data-session='acme-1']")
        assert page.locator(".session-item").count() == 1
        assert "tenant acme" in page.locator("#who").inner_text()
        page.close()
    mem.close()


def _offline(page: Any, base_url: str) -> list[str]:
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


def test_docs_render_offline(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "docs.db")
    with running_server(mem) as url:
        page = browser.new_page()
        refused = _offline(page, url)
        page.goto(url + "/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("memlane", timeout=30_000)
        paths = len(mem_spec_paths(page, url))
        page.wait_for_selector(".opblock")
        assert page.locator(".opblock").count() >= paths > 10
        page.locator(".opblock-summary", has_text="/v1/sessions").first.click()
        expect(page.locator(".opblock-body").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "docs.png"))
        page.close()
        assert refused == [], f"/docs reached outside the server: {refused}"
    mem.close()


def mem_spec_paths(page: Any, url: str) -> dict[str, Any]:
    paths: dict[str, Any] = page.request.get(url + "/openapi.json").json()["paths"]
    return paths


def test_empty_inspector_points_to_the_demo_which_fills_it(tmp_path: Path, browser: Any) -> None:
    import subprocess

    from tests.server_support import MEMLANE, cli_env

    db = tmp_path / "fresh.db"
    mem = open_memory(db)
    with running_server(mem) as url:
        page = browser.new_page()
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready='1']")
        empty = page.locator("#sessions .session-item").inner_text()
        assert "No sessions yet" in empty and "memlane demo" in empty
        demo = subprocess.run([MEMLANE, "--store", str(db), "demo"], env=cli_env(tmp_path), capture_output=True,
                              text=True, timeout=300)
        assert demo.returncode == 0, demo.stderr
        page.reload()
        page.wait_for_selector(".session-item[data-session='demo-session']")
        page.click(".session-item[data-session='demo-session']")
        expect(page.locator("#transcript")).to_contain_text("vegetarian")
        page.close()
    mem.close()
