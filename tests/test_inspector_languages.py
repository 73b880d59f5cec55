"""The language facet: which languages messages are in (``messages.lang``, judged when each
message is written), over the API on both stores and in a real browser: the session list's
language filter and the transcript's language chips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.inspector_support import expect, load_data, offline, ready_page, shot
from tests.server_support import auth, client_for, new_key, running_server

GERMAN = [
    {"role": "user", "content": "Ich möchte nächste Woche mit dem Zug nach Berlin fahren."},
    {"role": "assistant", "content": "Gerne! Der Zug fährt jeden Morgen um acht Uhr ab Hamburg."},
]
ENGLISH = {"role": "user", "content": "Can you also tell me which platform the train leaves from?"}


def _bilingual(mem: Memory, sid: str, user: str, tenant: str = "default") -> None:
    session = TenantView(mem, Caller(None)).create_session(session_id=sid, user_id=user, tenant_id=tenant,
                                                           title="Zugreise nach Berlin")
    mem.add_messages(session.id, [*GERMAN, ENGLISH])  # the stored key: session ids are per tenant


def test_languages_per_session_and_message_on_both_stores(empty_mem: Memory) -> None:
    mem = empty_mem
    _bilingual(mem, "zug", "ana")
    TenantView(mem, Caller(None)).create_session(session_id="en-only", user_id="bob")
    mem.add("en-only", "What a lovely morning for a walk in the park.")
    _bilingual(mem, "other-tenant", "eve", tenant="acme")
    with client_for(mem) as c:
        everyone = c.get("/v1/languages").json()
        by_lang = {x["lang"]: x for x in everyone["languages"]}
        assert by_lang == {"de": {"lang": "de", "messages": 4, "sessions": 2},
                           "en": {"lang": "en", "messages": 3, "sessions": 3}}
        # most messages first
        assert [x["lang"] for x in everyone["languages"]] == ["de", "en"]
        sessions = {x["session_id"]: x["languages"] for x in everyone["sessions"]}
        assert sessions["zug"] == [{"lang": "de", "messages": 2, "sessions": None},
                                   {"lang": "en", "messages": 1, "sessions": None}]
        assert sessions["en-only"] == [{"lang": "en", "messages": 1, "sessions": None}]

        ana = c.get("/v1/languages", params={"user_id": "ana"}).json()
        assert [x["session_id"] for x in ana["sessions"]] == ["zug"] and ana["user_id"] == "ana"

        one = c.get("/v1/sessions/zug/languages").json()
        assert [(x["lang"], x["messages"]) for x in one["languages"]] == [("de", 2), ("en", 1)]
        ids = [m.id for m in mem.load_session("zug")]
        assert one["messages"] == [{"id": ids[0], "lang": "de"}, {"id": ids[1], "lang": "de"},
                                   {"id": ids[2], "lang": "en"}]
        assert c.get("/v1/sessions/nope/languages").status_code == 404

    # a tenant's key sees its own messages' languages only
    key = new_key(mem, "acme")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as c:
        acme = c.get("/v1/languages", headers=auth(key)).json()
        assert [x["session_id"] for x in acme["sessions"]] == ["other-tenant"]
        assert c.get("/v1/sessions/zug/languages", headers=auth(key)).status_code == 404


@pytest.mark.browser
def test_language_facets_in_the_browser(tmp_path: Path, browser: Any) -> None:
    mem = Memory(tmp_path / "langs.db", embedder="hashing")
    load_data(mem)
    _bilingual(mem, "zug", "ana")
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        refused = offline(page, url)
        total = page.locator(".session-item").count()
        # the session list: every session has English; only the train trip has German
        assert "German (1)" in page.locator("#lang-filter").inner_text()
        assert f"English ({total})" in page.locator("#lang-filter").inner_text()
        page.select_option("#lang-filter", "de")
        expect(page.locator(".session-item")).to_have_count(1)
        assert page.locator(".session-item").get_attribute("data-session") == "zug"
        shot(page, "inspector-lang-filter.png")
        page.select_option("#lang-filter", "")
        expect(page.locator(".session-item")).to_have_count(total)

        # the transcript: a chip per language, a click shows only those messages
        page.goto(url + "/#/session/zug/transcript")
        page.wait_for_selector("#transcript-facets")
        expect(page.locator("#transcript-facets .chip[data-facet='lang'][data-value='de']")).to_have_text("German 2")
        page.locator("#transcript-facets .chip[data-facet='lang'][data-value='en']").click()
        expect(page.locator("#transcript .msg:visible")).to_have_count(1)
        expect(page.locator("#transcript .msg:visible")).to_contain_text("platform")
        page.locator("#transcript-facets .chip[data-facet='lang'][data-value='de']").click()
        expect(page.locator("#transcript .msg:visible")).to_have_count(2)
        shot(page, "inspector-lang-transcript.png", full_page=True)
        assert refused == []
        page.close()
    assert errors == []
    mem.close()
