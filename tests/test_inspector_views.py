"""The inspector's pictures, facets and note editing in a real browser: the session
timeline (messages per day, summary coverage, checkpoint), the memory overview, facets of
the session list and of a conversation, correcting a note (confirmed, audited, the reason
shown in its history). Everything loads from the server itself (offline)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.models import Session
from tests.inspector_support import confirm, expect, load_data, offline, ready_page, shot
from tests.server_support import running_server

pytestmark = pytest.mark.browser


def _timeline_data(mem: Memory) -> None:
    """A session with turns two days ago and today, summarized in blocks, with a checkpoint."""
    mem.create_session(session_id="tl", title="Week of tram talk", user_id="ana", agent_id="guide-bot")
    old = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    for i in range(4):
        mem.add_messages("tl", [
            {"role": "user", "content": f"Which tram goes to stop {i}?", "created_at": old},
            {"role": "assistant", "content": f"Tram 28 goes to stop {i}.", "created_at": old},
        ])
    for i in range(2):
        mem.store_interaction(f"And the funicular {i}?", f"Funicular {i} leaves hourly.", session_id="tl")
    # a session nobody touched for a month: the activity facet leaves it out
    stale = datetime.now(UTC) - timedelta(days=40)
    mem.store.create_session(Session(id="stale", title="Old chat", user_id="zoe", created_at=stale,
                                     last_active_at=stale))


def test_timeline_overview_and_facets(tmp_path: Path, browser: Any) -> None:
    mem = Memory(tmp_path / "views.db", embedder="hashing", summarize_every=2, keep_raw_turns=1)
    load_data(mem)
    _timeline_data(mem)
    mem.flush(60)
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        refused = offline(page, url)
        total = page.locator(".session-item").count()

        # facets of the session list: person, agent, recent activity
        page.select_option("#user-filter", "ana")
        assert {x for x in page.locator(".session-item").evaluate_all("els => els.map(e => e.dataset.session)")} \
            == {"trip", "tl"}
        assert "ana (2)" in page.locator("#user-filter").inner_text()
        page.select_option("#user-filter", "")
        page.select_option("#agent-filter", "guide-bot")
        expect(page.locator(".session-item")).to_have_count(1)
        page.select_option("#agent-filter", "")
        page.select_option("#active-filter", "30")
        expect(page.locator(".session-item")).to_have_count(total - 1)
        assert page.locator(".session-item[data-session='stale']").count() == 0
        page.select_option("#active-filter", "")
        expect(page.locator(".session-item")).to_have_count(total)

        # facets of one transcript: by role, by speaker
        page.goto(url + "/#/session/room-7/transcript")
        page.wait_for_selector("#transcript-facets")
        page.locator("#transcript-facets .chip[data-facet='author'][data-value='Maria']").click()
        expect(page.locator("#transcript .msg:visible")).to_have_count(1)
        expect(page.locator("#transcript .msg:visible")).to_contain_text("endless halls")
        page.goto(url + "/#/session/trip/transcript")
        page.wait_for_selector("#transcript-facets")
        page.locator("#transcript-facets .chip[data-facet='role'][data-value='tool']").click()
        expect(page.locator("#transcript .msg:visible")).to_have_count(1)
        expect(page.locator("#transcript .msg:visible")).to_contain_text("22C and sunny")
        page.locator("#transcript-facets .chip[data-facet='']").click()
        expect(page.locator("#transcript .msg[data-role]:visible")).to_have_count(len(mem.load_session("trip")))

        # the timeline: bars per day, the numbers, the summary strip and the checkpoint
        page.goto(url + "/#/session/tl/timeline")
        page.wait_for_selector("#timeline")
        chart = page.locator("#chart-session-days")
        expect(chart.locator("canvas")).to_have_count(1)
        rows = chart.locator("tr[data-day]")
        assert rows.count() == 2
        today = datetime.now(UTC).date()
        assert rows.nth(0).get_attribute("data-day") == (today - timedelta(days=2)).isoformat()
        assert rows.nth(0).locator("td").all_text_contents() == [(today - timedelta(days=2)).isoformat(), "4", "4", "0"]
        timeline = page.request.get(url + "/v1/sessions/tl/timeline").json()
        blocks = timeline["summary"]["blocks"]
        assert blocks and page.locator("#log-strip .seg.summary").count() == len(blocks)
        expect(page.locator("#log-strip .seg.raw")).to_have_count(1)
        expect(page.locator("#log-strip .strip .checkpoint")).to_have_count(1)
        expect(page.locator("#log-strip .cp-text")).to_contain_text("checkpoint fresh")
        expect(page.locator("#log-strip .blocks li").first).to_contain_text("turns 1–2")
        shot(page, "inspector-timeline.png", full_page=True)
        page.locator("#log-strip .blocks li a").first.click()
        page.wait_for_selector("#transcript .msg.highlight")
        assert page.locator("#transcript .msg.highlight").get_attribute("id") == f"msg-{blocks[0]['first_message_id']}"

        # facets of one conversation: names and tool calls, each leading to its message
        page.goto(url + "/#/session/trip/memory")
        page.wait_for_selector("#facets")
        expect(page.locator("#facets [data-facet-kind='action']")).to_contain_text("get_weather")
        expect(page.locator("#facets [data-facet-kind='entity']")).to_contain_text("Sintra")
        page.locator("#facets .chip[data-facet='Sintra']").click()
        expect(page.locator("#transcript .msg.highlight")).to_contain_text("Sintra")

        # the overview: figures and per-day charts of the whole memory
        page.click("#overview-link")
        page.wait_for_selector("#figures")
        stats = mem.stats()
        expect(page.locator("[data-figure='sessions'] b")).to_have_text(str(stats["sessions"]))
        expect(page.locator("[data-figure='messages'] b")).to_have_text(str(stats["messages"]))
        expect(page.locator("[data-figure='index_backlog'] b")).to_have_text("0")
        assert "iB" in page.locator("[data-figure='database_bytes'] b").inner_text()
        expect(page.locator("#chart-messages canvas")).to_have_count(1)
        expect(page.locator("#chart-sessions canvas")).to_have_count(1)
        days = page.locator("#chart-messages tr[data-day]").count()
        assert days == len({d["day"] for d in page.request.get(url + "/v1/overview").json()["messages_per_day"]}) >= 2
        shot(page, "inspector-overview.png", full_page=True)
        # the charts follow the window's width
        wide = page.locator("#chart-messages .uplot").bounding_box()["width"]
        page.set_viewport_size({"width": 1000, "height": 1000})
        page.wait_for_function("w => document.querySelector('#chart-messages .uplot').getBoundingClientRect().width < w",
                               arg=wide - 50)
        box = page.locator("#chart-messages .plot").bounding_box()
        assert page.locator("#chart-messages .uplot").bounding_box()["width"] <= box["width"] + 1
        page.close()

        # both pictures fit a 420 px screen
        for view, ready in (("#/overview", "#chart-messages canvas"), ("#/session/tl/timeline", "#log-strip")):
            narrow = ready_page(browser, url, errors, width=420, height=900)
            narrow.goto(f"{url}/{view}")
            narrow.wait_for_selector(ready)
            assert narrow.evaluate("document.documentElement.scrollWidth") <= 420, view
            shot(narrow, f"inspector-420-{view.split('/')[-1]}.png", full_page=True)
            narrow.close()
        assert refused == [], f"the inspector reached outside the server: {refused}"
    assert errors == []
    mem.close()


def test_correct_a_note_and_see_why_it_was_superseded(tmp_path: Path, browser: Any) -> None:
    mem = Memory(tmp_path / "edit.db", embedder="hashing")
    load_data(mem)
    diet = mem.add_note("Ana is vegetarian", session_id="trip", user_id="ana", slot="diet", value="vegetarian")
    mem.add_note("Ana prefers window seats", session_id="trip", user_id="ana", kind="preference", slot="pref:seat",
                 value="window")
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        page.goto(url + "/#/session/trip/memory")
        card = page.locator(f".note[data-note='{diet.id}']")
        expect(card).to_contain_text("Ana is vegetarian")

        # the kind facet shows one kind of note at a time
        notes = page.request.get(url + "/v1/notes?session_id=trip&limit=200").json()["notes"]
        prefs = [n["id"] for n in notes if n["kind"] == "preference"]
        assert len(prefs) < len(notes)
        page.locator(".note-kinds .chip[data-kind='preference']").click()
        expect(page.locator("#notes .note")).to_have_count(len(prefs))
        assert page.locator("#notes .note").evaluate_all("els => els.map(e => Number(e.dataset.note))") == prefs
        expect(page.locator("#notes")).to_contain_text("window seats")
        page.locator(".note-kinds .chip[data-kind='']").click()
        expect(page.locator("#notes .note")).to_have_count(len(notes))

        # cancelling the confirmation changes nothing
        card.locator("button.edit").click()
        card.locator(".edit-text").fill("Ana is vegan")
        card.locator(".edit-value").fill("vegan")
        card.locator(".edit-reason").fill("she said so on the phone")
        card.locator("button.save").click()
        expect(page.locator("#confirm-text")).to_contain_text("becomes “Ana is vegan”")
        page.click("#confirm-cancel")
        assert [n.text for n in mem.note_history(diet.id or 0)] == ["Ana is vegetarian"]

        card.locator("button.save").click()
        confirm(page)
        expect(page.locator("#toast")).to_contain_text("audit log")
        new = mem.note_history(diet.id or 0)[-1]
        assert (new.text, new.value, new.current) == ("Ana is vegan", "vegan", True)
        fresh = page.locator(f".note[data-note='{new.id}']")
        expect(fresh).to_contain_text("Ana is vegan")
        expect(fresh.locator(".slot")).to_contain_text("diet = vegan")
        assert page.locator(f".note[data-note='{diet.id}']").count() == 0

        # its history says what replaced the old version, and why
        fresh.locator("button.history").click()
        old = fresh.locator(f".note-history li[data-version='{diet.id}']")
        expect(old.locator(".why")).to_contain_text("corrected by hand by loopback: she said so on the phone")
        expect(old.locator(".why")).to_contain_text(f"by #{new.id}: “Ana is vegan”")
        shot(page, "inspector-note-corrected.png", full_page=True)

        # a change of mind said later explains itself the same way
        later = mem.add_note("Ana eats fish again", session_id="trip", user_id="ana", slot="diet", value="pescatarian")
        page.reload()
        page.wait_for_selector(f".note[data-note='{later.id}']")
        page.locator(f".note[data-note='{later.id}'] button.history").click()
        expect(page.locator(f".note-history li[data-version='{new.id}'] .why")).to_contain_text(
            "a newer statement about diet changed it from 'vegan' to 'pescatarian'")

        # the audit tab lists the correction with its reason
        page.click(".tab[data-tab='audit']")
        page.wait_for_selector("#audit")
        expect(page.locator("#audit")).to_contain_text("correct_note")
        expect(page.locator("#audit")).to_contain_text("she said so on the phone")
        page.close()
    assert errors == []
    mem.close()
