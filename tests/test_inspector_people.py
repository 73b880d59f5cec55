"""The People view: one person's session state (topics, open loops) and facets summed over
their sessions, over the API on both stores (tenant-scoped) and in a real browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlane import Memory
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.inspector_support import expect, offline, ready_page, shot
from tests.server_support import auth, client_for, new_key, running_server


def _ana(mem: Memory, tenant: str = "default") -> None:
    """Two sessions of Ana's that share a topic (Lisbon) and each leave a loop open."""
    view = TenantView(mem, Caller(None))
    trip = view.create_session(session_id="trip", user_id="ana", title="Trip", tenant_id=tenant).id
    mem.store_interaction("I'm planning a trip to Lisbon in May. Can you check train times to Sintra?",
                          "Sure, trains to Sintra leave every 20 minutes from Rossio.", session_id=trip)
    mem.store_interaction("Remind me to book the Sintra train tomorrow.", "I'll remind you.", session_id=trip)
    food = view.create_session(session_id="food", user_id="ana", title="Food", tenant_id=tenant).id
    mem.store_interaction("Which restaurants in Lisbon serve vegetarian food? I visit Sintra too.",
                          "Try Ao 26 in Lisbon.", session_id=food)
    mem.store_interaction("Can you send me the address of Ao 26 later?", "I will send it later.", session_id=food)
    bob = view.create_session(session_id="bob-1", user_id="bob", title="Bob's", tenant_id=tenant).id
    mem.store_interaction("Tell me about Porto wine.", "Port is fortified.", session_id=bob)
    mem.flush()


def test_a_persons_state_and_facets_summed_over_sessions(empty_mem: Memory) -> None:
    mem = empty_mem
    _ana(mem)
    with client_for(mem) as c:
        out = c.get("/v1/people/ana").json()
    assert {x["session_id"] for x in out["sessions"]} == {"trip", "food"} and not out["truncated"]
    topics = {t["topic"]: sorted(t["session_ids"]) for t in out["state"]["topics"]}
    assert topics["Lisbon"] == ["food", "trip"]
    assert out["state"]["topics"][0]["topic"] == "Lisbon"  # in most sessions first
    loops = {x["text"]: x["session_ids"] for x in out["state"]["open_loops"]}
    assert loops["Can you send me the address of Ao 26 later?"] == ["food"]
    assert any(ids == ["trip"] for ids in loops.values())
    facets = {(f["kind"], f["value"]): f for f in out["facets"]}
    sintra = facets[("entity", "Sintra")]
    assert sorted(sintra["session_ids"]) == ["food", "trip"] and sintra["count"] >= 3
    first = min(m.id or 0 for sid in ("trip", "food") for m in mem.load_session(sid) if "Sintra" in m.content)
    assert sintra["first"] == {"session_id": "trip", "message_id": first}
    assert ("entity", "Porto") not in facets  # Bob's
    assert ("time", "tomorrow") in facets


def test_a_person_of_another_tenant_is_not_seen(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "t.db", embedder="hashing")
    _ana(mem, tenant="acme")
    acme, other = new_key(mem, "acme"), new_key(mem, "other")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as c:
        mine = c.get("/v1/people/ana", headers=auth(acme)).json()
        assert sorted(x["session_id"] for x in mine["sessions"]) == ["food", "trip"]  # the tenant's own ids
        assert mine["facets"] and all(f["first"]["session_id"] in ("food", "trip") for f in mine["facets"])
        theirs = c.get("/v1/people/ana", headers=auth(other)).json()
        assert theirs["sessions"] == [] and theirs["facets"] == [] and theirs["state"]["topics"] == []
    mem.close()


@pytest.mark.browser
def test_people_view_sums_sessions_in_the_browser(tmp_path: Path, browser: Any) -> None:
    mem = Memory(tmp_path / "pv.db", embedder="hashing")
    _ana(mem)
    errors: list[str] = []
    with running_server(mem) as url:
        page = ready_page(browser, url, errors)
        refused = offline(page, url)
        page.goto(url + "/#/people/ana")
        page.wait_for_selector("#person-state")
        expect(page.locator("#person-state li[data-item='Lisbon']")).to_contain_text("Food")
        expect(page.locator("#person-state li[data-item='Lisbon']")).to_contain_text("Trip")
        expect(page.locator("#person-state li[data-item='Can you send me the address of Ao 26 later?']")) \
            .to_contain_text("Food")
        expect(page.locator("#person-facets [data-facet-kind='entity'] .chip[data-facet='Sintra']")).to_be_visible()
        assert page.locator("#person-facets .chip[data-facet='Porto']").count() == 0
        shot(page, "inspector-people-summary.png", full_page=True)
        page.locator("#person-facets .chip[data-facet='Sintra']").click()
        expect(page.locator("#transcript .msg.highlight")).to_contain_text("Sintra")
        assert refused == []
        page.close()
    assert errors == []
    mem.close()
