"""The web inspector end to end: headless Chromium (Debian's package) driven by Playwright,
clicking through a real server with real data. Screenshots land in test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlane.errors import NotFoundError
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.inspector_support import ARTIFACTS, confirm, expect, load_data, offline, ready_page, shot
from tests.server_support import new_key, open_memory, running_server

pytestmark = pytest.mark.browser


def test_inspector_click_through(tmp_path: Path, browser: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    mem = open_memory(tmp_path / "inspector.db")
    data = load_data(mem)
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors, height=900)
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
        assert first.locator(".relevance").count() == 1  # one compact bar; the parts on expand
        assert not first.locator(".score-parts .parts").is_visible()
        first.locator(".score-parts summary").click()
        assert first.locator(".score-parts .bar").count() >= 2
        assert "keyword" in first.locator(".score-parts .parts").inner_text()
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


def test_docs_renderoffline(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "docs.db")
    with running_server(mem) as url:
        page = browser.new_page()
        refused = offline(page, url)
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


def _fully_visible(page: Any, selector: str, width: int) -> bool:
    box = page.locator(selector).bounding_box()
    return bool(page.locator(selector).is_visible() and box and box["x"] >= 0 and box["x"] + box["width"] <= width)


def test_titles_recalled_labels_and_narrow_header(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "titles.db")
    load_data(mem)
    # An untitled conversation: named after its first user message, in the list and its header.
    mem.create_session(session_id="untitled-1", user_id="ana")
    mem.add("untitled-1", "Can you suggest a vegetarian restaurant in Lisbon near the river?", role="user")
    mem.add("untitled-1", "Try Ao 26 Vegan Food Project.", role="assistant")
    mem.add("untitled-1", "What did I say about my diet before?", role="user")
    mem.flush(30)
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        item = page.locator(".session-item[data-session='untitled-1'] .t")
        assert item.inner_text().startswith("Can you suggest a vegetarian restaurant")
        assert "derived" in (item.get_attribute("class") or "")
        assert page.locator(".session-item[data-session='trip'] .t").inner_text() == "Trip planning"
        assert mem.get_session("untitled-1").title is None  # derived for display, stored data untouched
        for side in ("#search-form button", "#key-button"):
            assert _fully_visible(page, side, 1400), side
        shot(page, "inspector-1400-sessions.png")

        # the packet labels each recalled hit by where it came from
        page.click(".session-item[data-session='untitled-1']")
        page.wait_for_selector("#transcript")
        assert page.locator(".s-title").inner_text().startswith("Can you suggest a vegetarian")
        page.click(".tab[data-tab='context']")
        page.fill("#context-query", "vegetarian diet Lisbon")
        page.fill("#context-budget", "2000")
        page.click("#context-build")
        expect(page.locator(".budget")).to_contain_text("/ 2000 tokens", timeout=30_000)
        packet = page.request.post(url + "/v1/sessions/untitled-1/context",
                                   data={"query": "vegetarian diet Lisbon", "max_tokens": 2000}).json()
        others = [r for r in packet["recalled"] if not r["same_session"]]
        here = [r for r in packet["recalled"] if r["same_session"]]
        assert others, packet["recalled"]  # Ana's trip chat said vegetarian too
        assert page.locator(".recalled-hit .badge.other").count() == len(others)
        assert page.locator(".recalled-hit .badge.here").count() == len(here)
        assert "other session: Trip planning" in page.locator("#context-out").inner_text()
        assert f"{len(others)} from other sessions" in (page.locator("#context-out").text_content() or "")
        shot(page, "inspector-1400-context-recalled.png", full_page=True)
        page.close()

        narrow = ready_page(browser, url, errors, width=420, height=900)
        narrow.goto(url + "/#/session/trip/transcript")
        narrow.wait_for_selector("#transcript")
        for side in ("#search-form button", "#key-button", "#search-input"):
            assert _fully_visible(narrow, side, 420), side
        assert narrow.evaluate("document.documentElement.scrollWidth") <= 420
        shot(narrow, "inspector-420-transcript.png")
        narrow.fill("#search-input", "Piranesi")
        narrow.click("#search-form button")
        narrow.wait_for_selector("#search-results .hit")
        shot(narrow, "inspector-420-search.png")
        narrow.close()
    assert errors == []
    mem.close()


def test_actions_confirmed_audited_and_gone_everywhere(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "actions.db")
    load_data(mem)
    note = mem.add_note("Ana is vegetarian", session_id="trip", user_id="ana", slot="diet", value="vegetarian")
    newer = mem.add_note("Ana is vegan now", session_id="trip", user_id="ana", slot="diet", value="vegan")
    assert newer.lineage_id == note.lineage_id and newer.id != note.id
    weather = next(m for m in mem.load_session("trip") if m.content == "What's the weather like then?")
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        page.goto(url + "/#/session/trip/transcript")
        page.wait_for_selector("#transcript")
        target = page.locator(f"#msg-{weather.id}")

        # cancelled: nothing changes
        target.locator("button.pin").click()
        page.wait_for_selector("#confirm-dialog:not([hidden])")
        page.click("#confirm-cancel")
        assert not mem.get_message(weather.id or 0).pinned

        # pin, then unpin
        target.locator("button.pin").click()
        confirm(page)
        expect(page.locator(f"#msg-{weather.id} .badge", has_text="pinned")).to_be_visible()
        assert mem.get_message(weather.id or 0).pinned and mem.get_message(weather.id or 0).importance == 1.0
        expect(page.locator("#toast")).to_contain_text("audit log")
        shot(page, "inspector-action-pinned.png")
        page.locator(f"#msg-{weather.id} button.pin").click()
        confirm(page)
        expect(page.locator(f"#msg-{weather.id} button.pin")).to_have_text("Pin")
        assert not mem.get_message(weather.id or 0).pinned

        # forget one message: gone from the page, the API and search
        page.locator(f"#msg-{weather.id} button.forget").click()
        expect(page.locator("#confirm-text")).to_contain_text("weather like then")
        shot(page, "inspector-action-confirm.png")
        page.click("#confirm-ok")
        expect(page.locator(f"#msg-{weather.id}")).to_have_count(0)
        assert page.request.get(f"{url}/v1/messages/{weather.id}").status == 404
        hits = page.request.post(url + "/v1/search", data={"query": "weather like then"}).json()["hits"]
        assert weather.id not in [h["message"]["id"] for h in hits]

        # notes: current version with slot/value/sources, its history, then removal
        page.click(".tab[data-tab='memory']")
        card = page.locator(f".note[data-note='{newer.id}']")
        expect(card).to_contain_text("Ana is vegan now")
        expect(card.locator(".slot")).to_contain_text("diet = vegan")
        assert page.locator(f".note[data-note='{note.id}']").count() == 0  # superseded: history only
        card.locator("button.history").click()
        expect(card.locator(".note-history li.superseded")).to_contain_text("Ana is vegetarian")
        expect(card.locator(".note-history li.current")).to_contain_text("Ana is vegan now")
        expect(page.locator("#state")).to_contain_text("Open loops")
        shot(page, "inspector-notes-history.png", full_page=True)
        card.locator("button.remove").click()
        confirm(page)
        expect(page.locator(f".note[data-note='{newer.id}']")).to_have_count(0)
        page.wait_for_selector("#notes")
        expect(page.locator("#notes")).not_to_contain_text("Ana is vegan now")
        with pytest.raises(NotFoundError):
            mem.note_history(note.id or 0)
        assert page.request.get(f"{url}/v1/notes/{newer.id}/history").status == 404

        # the audit tab lists every change made here, newest first
        page.click(".tab[data-tab='audit']")
        page.wait_for_selector("#audit")
        actions = [e.action for e in mem.audit_log(session_id="trip")]
        assert actions[:4] == ["forget_note", "forget_message", "unpin_message", "pin_message"]
        assert all(e.actor_id == "loopback" and e.allowed for e in mem.audit_log(session_id="trip"))
        expect(page.locator("#audit")).to_contain_text("forget_message")
        shot(page, "inspector-audit.png")

        # forget the whole session: gone from the list, the API and search
        page.click(".forget-session")
        confirm(page)
        expect(page.locator(".session-item[data-session='trip']")).to_have_count(0)
        expect(page.locator(".empty")).to_be_visible()
        assert page.request.get(f"{url}/v1/sessions/trip").status == 404
        hits = page.request.post(url + "/v1/search", data={"query": "vegetarian Lisbon"}).json()["hits"]
        assert all(h["message"]["session_id"] != "trip" for h in hits)
        assert [e.action for e in mem.audit_log(limit=1)] == ["forget_session"]
        page.close()
    assert errors == []
    mem.close()


def test_action_with_a_key_of_another_tenant_is_refused(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "tenants.db")
    acme, other = new_key(mem, "acme"), new_key(mem, "other")
    TenantView(mem, Caller("acme")).store_interaction("acme secret plan", "noted", session_id="acme-1")
    msg = mem.load_session(session_key("acme", "acme-1"))[0]
    with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/#/session/acme-1/transcript")
        page.fill("#key-input", acme)
        page.click("#key-form button[type=submit]")
        page.wait_for_selector(f"#msg-{msg.id}")
        # the key is swapped for another tenant's (another tab, a pasted key) before acting
        page.evaluate("key => localStorage.setItem('memlane.key', key)", other)
        page.locator(f"#msg-{msg.id} button.forget").click()
        confirm(page)
        expect(page.locator("#toast.bad")).to_contain_text("Refused")
        shot(page, "inspector-action-refused.png")
        assert mem.get_message(msg.id or 0).content == "acme secret plan"
        refused = [e for e in mem.audit_log() if e.action == "forget_message"]
        assert len(refused) == 1 and not refused[0].allowed and refused[0].result == "not_found"
        assert refused[0].tenant_id == "other" and refused[0].session_id is None

        # correcting a note: the same refusal, nothing changed, audited in the caller's tenant
        note = mem.add_note("Acme's launch is in March", session_id=session_key("acme", "acme-1"), slot="launch", value="March")
        page.evaluate("key => localStorage.setItem('memlane.key', key)", acme)
        page.goto(url + "/#/session/acme-1/memory")
        card = page.locator(f".note[data-note='{note.id}']")
        card.locator("button.edit").click()
        card.locator(".edit-text").fill("Acme's launch moved to May")
        page.evaluate("key => localStorage.setItem('memlane.key', key)", other)
        card.locator("button.save").click()
        confirm(page)
        expect(page.locator("#toast.bad")).to_contain_text(f"Refused: note {note.id} does not exist")
        assert [n.text for n in mem.note_history(note.id or 0)] == ["Acme's launch is in March"]
        tried = [e for e in mem.audit_log() if e.action == "correct_note"]
        assert [(e.tenant_id, e.allowed, e.result) for e in tried] == [("other", False, "not_found")]
        page.close()
    mem.close()


def test_people_view_and_search_grouped_filtered(tmp_path: Path, browser: Any) -> None:
    mem = open_memory(tmp_path / "people.db")
    load_data(mem)
    note = mem.add_note("Ana is vegetarian", session_id="trip", user_id="ana", slot="diet", value="vegetarian")
    # two people saying the same thing are two hits from search (a repeat by one speaker is one)
    for sid, who in (("dup-1", "Bob"), ("dup-2", "Maria")):
        mem.create_session(session_id=sid, user_id="bob", title=f"Bob chat {sid}")
        mem.add(sid, "The pasta place on Rua Augusta closes at nine.", role="user", author_name=who)
    mem.flush(30)
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        page.click("#people-link")
        page.wait_for_selector("#people")
        page.click("#people a:text-is('ana')")
        card = page.locator(f".note[data-note='{note.id}']")
        expect(card).to_contain_text("Ana is vegetarian")
        expect(card.locator(".slot")).to_contain_text("diet = vegetarian")
        shot(page, "inspector-people-ana.png", full_page=True)

        # identical texts are one hit naming the other session, by title
        page.fill("#search-input", "pasta place Rua Augusta")
        page.press("#search-input", "Enter")
        page.wait_for_selector("#search-results .hit")
        dup = page.locator("#search-results .hit", has_text="pasta place")
        expect(dup).to_have_count(1)
        expect(dup.locator(".also")).to_contain_text("also said 1× in Bob chat dup-")
        expect(dup.locator(".hit-head a")).to_contain_text("Bob chat dup-")
        # keyboard: arrow down focuses the first hit, Enter opens it
        page.locator("h1").click()
        page.keyboard.press("ArrowDown")
        assert page.evaluate("document.activeElement.dataset.index") == "0"
        shot(page, "inspector-search-grouped.png", full_page=True)

        # filter by person: only ana's sessions
        page.fill("#search-input", "vegetarian")
        page.press("#search-input", "Enter")
        page.wait_for_selector("#search-results .hit")
        page.select_option("#filter-user", "bob")
        expect(page.locator("#search-results")).not_to_contain_text("vegetarian", timeout=10_000)
        page.select_option("#filter-user", "ana")
        expect(page.locator("#search-results .hit").first).to_contain_text("vegetarian")
        sessions = page.locator("#search-results .hit-head a").all_inner_texts()
        assert set(sessions) <= {"Trip planning"}, sessions
        page.select_option("#filter-session", "room-7")
        expect(page.locator("#search-results")).not_to_contain_text("Trip planning")
        page.close()
    assert errors == []
    mem.close()
