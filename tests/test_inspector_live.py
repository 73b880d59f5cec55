"""The inspector updates live from the change-event stream (GET /v1/events): messages
another client writes appear, forgotten messages and sessions disappear, without a reload;
with an API key only the key's tenant is seen. Real server, real chromium, a second Memory
on the same SQLite file standing in for another process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from memlane import Memory
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.inspector_support import expect, load_data, ready_page, shot
from tests.server_support import new_key, open_memory, running_server

pytestmark = pytest.mark.browser


def _mark_page(page: Any) -> None:
    """A flag that a reload would lose: proves the page changed in place."""
    page.evaluate("window.__sameDocument = true")


def _same_document(page: Any) -> bool:
    return bool(page.evaluate("window.__sameDocument === true"))


@contextmanager
def _watched(tmp_path: Path, browser: Any) -> Iterator[tuple[Any, str, Memory]]:
    """(a ready inspector page, its server's URL, another Memory on the same SQLite file);
    the page must have raised no script error by the end."""
    db = tmp_path / "live.db"
    mem = open_memory(db)
    load_data(mem)
    errors: list[str] = []
    with running_server(mem) as url, Memory(db, embedder="none") as other:
        page = ready_page(browser, url, errors)
        expect(page.locator("#live")).to_have_attribute("data-state", "on", timeout=15_000)
        yield page, url, other
        assert _same_document(page)
        page.close()
    assert errors == []
    mem.close()


def test_new_messages_and_forgets_appear_without_reload(tmp_path: Path, browser: Any) -> None:
    with _watched(tmp_path, browser) as (page, url, other):
        page.goto(url + "/#/session/trip/transcript")
        page.wait_for_selector("#transcript")
        _mark_page(page)
        before = page.locator("#transcript .msg").count()

        # another client appends a turn: it shows up at the end of the open transcript
        other.store_interaction("Live from another client: is the tram 28 running?", "Yes, every 10 minutes.",
                                session_id="trip", author_name="Ana")
        new = other.load_session("trip")[-2:]
        expect(page.locator(f"#msg-{new[0].id}")).to_contain_text("tram 28", timeout=15_000)
        expect(page.locator(f"#msg-{new[1].id}")).to_contain_text("every 10 minutes", timeout=15_000)
        assert page.locator("#transcript .msg").count() == before + 2
        assert page.locator("#transcript .msg").last.get_attribute("id") == f"msg-{new[1].id}"
        # a live message has its language like a loaded one, and the language chips count it
        langs = httpx.get(f"{url}/v1/sessions/trip/languages", timeout=10).json()["messages"]
        english = sum(1 for x in langs if x["lang"] == "en")
        assert {x["lang"] for x in langs if x["id"] in (new[0].id, new[1].id)} == {"en"}
        expect(page.locator(f"#msg-{new[0].id}")).to_have_attribute("data-lang", "en")
        chip = page.locator("#transcript-facets .chip[data-facet='lang'][data-value='en']")
        expect(chip).to_have_text(f"English {english}", timeout=15_000)
        chip.click()
        expect(page.locator(f"#msg-{new[1].id}")).to_be_visible()
        page.locator("#transcript-facets .chip[data-facet='']").click()
        count = other.get_session("trip").message_count
        expect(page.locator(".session-item[data-session='trip'] .m")).to_contain_text(f"{count} msgs", timeout=15_000)
        expect(page.locator(".s-meta")).to_contain_text(f"{count} messages", timeout=15_000)
        shot(page, "inspector-live-appended.png", full_page=True)

        # it forgets one message: gone from the page
        other.forget_messages([new[0].id or 0])
        expect(page.locator(f"#msg-{new[0].id}")).to_have_count(0, timeout=15_000)
        expect(page.locator(f"#msg-{new[1].id}")).to_have_count(1)
        expect(chip).to_have_text(f"English {english - 1}")  # the chips no longer count it

        # it forgets another session: gone from the list; then the open one: the view says so
        other.delete_session("room-7")
        expect(page.locator(".session-item[data-session='room-7']")).to_have_count(0, timeout=15_000)
        other.delete_session("trip")
        expect(page.locator("#gone")).to_contain_text("forgotten", timeout=15_000)
        expect(page.locator(".session-item[data-session='trip']")).to_have_count(0)
        shot(page, "inspector-live-forgotten.png")

        # a session created elsewhere joins the list
        other.create_session(session_id="fresh-live", title="Created elsewhere")
        other.add("fresh-live", "hello from elsewhere")
        expect(page.locator(".session-item[data-session='fresh-live']")).to_contain_text("Created elsewhere",
                                                                                       timeout=15_000)


def test_live_notes_on_the_people_view(tmp_path: Path, browser: Any) -> None:
    with _watched(tmp_path, browser) as (page, url, other):
        page.goto(url + "/#/people/ana")
        page.wait_for_selector("#notes")
        _mark_page(page)
        note = other.add_note("Ana collects azulejo tiles", session_id="trip", user_id="ana", slot="hobby")
        expect(page.locator(f".note[data-note='{note.id}']")).to_contain_text("azulejo", timeout=15_000)
        other.forget_note(note.id or 0)
        expect(page.locator(f".note[data-note='{note.id}']")).to_have_count(0, timeout=15_000)


def test_reconnect_resumes_with_last_event_id(tmp_path: Path, browser: Any) -> None:
    """What was written while the stream was down arrives once it is back (Last-Event-ID)."""
    with _watched(tmp_path, browser) as (page, url, other):
        page.goto(url + "/#/session/room-7/transcript")
        page.wait_for_selector("#transcript")
        _mark_page(page)
        other.add("room-7", "first, while connected", author_name="Bob")
        expect(page.locator("#transcript")).to_contain_text("first, while connected", timeout=15_000)
        seen = page.evaluate("live.lastId")
        assert seen is not None
        page.evaluate("live.controller.abort()")  # the connection drops
        other.add("room-7", "second, while disconnected", author_name="Maria")
        requests: list[dict[str, str]] = []
        page.on("request", lambda r: requests.append(r.headers) if "/v1/events" in r.url else None)
        page.evaluate("void startLive()")
        expect(page.locator("#transcript")).to_contain_text("second, while disconnected", timeout=15_000)
        assert requests and requests[0].get("last-event-id") == str(seen)


def test_live_overview_counts(tmp_path: Path, browser: Any) -> None:
    with _watched(tmp_path, browser) as (page, url, other):
        page.goto(url + "/#/overview")
        page.wait_for_selector("#figures")
        _mark_page(page)
        before = int(page.locator("[data-figure='messages'] b").inner_text())
        other.add("room-7", "A new line for the overview", author_name="Bob")
        expect(page.locator("[data-figure='messages'] b")).to_have_text(str(before + 1), timeout=15_000)


def test_live_stream_with_a_key_sees_only_its_tenant(tmp_path: Path, browser: Any) -> None:
    db = tmp_path / "tenants.db"
    mem = open_memory(db)
    acme = new_key(mem, "acme")
    TenantView(mem, Caller("acme")).store_interaction("acme question", "acme answer", session_id="acme-1")
    TenantView(mem, Caller("other")).store_interaction("other question", "other answer", session_id="other-1")
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url, \
            Memory(db, embedder="none") as writer:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/#/session/acme-1/transcript")
        expect(page.locator("#live")).to_have_attribute("data-state", "off")  # no key yet: no stream
        page.fill("#key-input", acme)
        page.click("#key-form button[type=submit]")
        page.wait_for_selector("#transcript")
        expect(page.locator("#live")).to_have_attribute("data-state", "on", timeout=15_000)
        seen_before = page.evaluate("document.body.dataset.lastEvent || ''")
        # another tenant's new session and message: no event reaches this page
        other_2 = writer.create_session(session_id="other-2", tenant_id="other")
        writer.add(other_2, "other tenant's secret")
        writer.add(session_key("acme", "acme-1"), "acme's own new line")
        expect(page.locator("#transcript")).to_contain_text("acme's own new line", timeout=15_000)
        assert page.locator(".session-item[data-session='other-2']").count() == 0
        assert page.locator(".session-item").count() == 1
        seen = page.evaluate("document.body.dataset.lastEvent")
        assert seen != seen_before
        events = [e for e in writer.events(since=0) if str(e.id) == seen]  # type: ignore[attr-defined]
        assert events and events[0].tenant_id == "acme"
        page.close()
    mem.close()
