"""The routes behind the inspector's pictures and note editing: correcting a note (audited,
tenant-checked, with the reason in its history), why a version was superseded, a session's
timeline (per-day counts, summary coverage, checkpoint) and the memory overview."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from memlane import Memory
from memlane.client import MemoryClient
from memlane.models import MessageFilter, SessionFilter
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from memlane.server.tenancy import Caller, TenantView
from tests.server_support import auth, client_for, new_key, running_server
from tests.test_cli import run


def _two_days(mem: Memory, sid: str, *, tenant: str = "default") -> None:
    """Three exchanges two days ago and two today, in one session of ``tenant``."""
    sid = mem.create_session(session_id=sid, user_id="ana", tenant_id=tenant, title="Diet talk")
    old = datetime.now(UTC) - timedelta(days=2)
    for i in range(3):
        mem.add_messages(sid, [
            {"role": "user", "content": f"Question {i} about Lisbon food", "created_at": old.isoformat()},
            {"role": "assistant", "content": f"Answer {i}", "created_at": old.isoformat()},
        ])
    for i in range(2):
        mem.store_interaction(f"Today question {i}", f"Today answer {i}", session_id=sid)


def test_per_day_counts_on_both_stores(any_mem: Memory) -> None:
    mem = any_mem
    _two_days(mem, "days-1", tenant="acme")
    days_2 = mem.create_session(session_id="days-2", tenant_id="other")
    mem.add(days_2, "not acme's")
    rows = mem.store.messages_per_day(MessageFilter(tenant_id="acme", include_hidden=True))  # type: ignore[attr-defined]
    today = datetime.now(UTC).date()
    before = today - timedelta(days=2)
    assert rows == [(before, "assistant", 3), (before, "user", 3), (today, "assistant", 2), (today, "user", 2)]
    assert mem.store.messages_per_day(MessageFilter(session_id=days_2)) == [(today, "user", 1)]  # type: ignore[attr-defined]
    sessions = mem.store.sessions_per_day(SessionFilter(tenant_id="acme"))  # type: ignore[attr-defined]
    assert sessions == [(today, 1)] and isinstance(sessions[0][0], date)


def test_correct_a_note_audited_with_why_in_history(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "n.db", embedder="none")
    TenantView(mem, Caller(None)).create_session(session_id="s1", user_id="ana")
    first = mem.add_note("Ana is vegetarian", session_id="s1", user_id="ana", slot="diet", value="vegetarian")
    with client_for(mem) as c:
        r = c.patch(f"/v1/notes/{first.id}", json={"text": "Ana is vegan", "value": "vegan",
                                                    "reason": "she told us on the phone"})
        assert r.status_code == 200, r.text
        new = r.json()
        assert new["text"] == "Ana is vegan" and new["value"] == "vegan" and new["current"]
        assert new["lineage_id"] == first.lineage_id and new["supersedes"] == first.id

        history = c.get(f"/v1/notes/{new['id']}/history").json()["notes"]
        assert [h["id"] for h in history] == [first.id, new["id"]]
        old = history[0]
        assert old["superseded_by"] == new["id"] and old["superseded_by_text"] == "Ana is vegan"
        assert old["superseded_why"] == "corrected by hand by loopback: she told us on the phone"
        assert history[1]["superseded_why"] is None

        # a change of mind said in conversation explains itself from the two versions
        later = mem.add_note("Ana eats fish again", session_id="s1", user_id="ana", slot="diet", value="pescatarian")
        history = c.get(f"/v1/notes/{later.id}/history").json()["notes"]
        assert history[1]["superseded_why"] == "a newer statement about diet changed it from 'vegan' to 'pescatarian'"

        # only the current version can be corrected; bad input says what is wrong
        stale = c.patch(f"/v1/notes/{first.id}", json={"text": "again"})
        assert stale.status_code == 409 and "correct the current version" in stale.json()["error"]["message"]
        assert c.patch(f"/v1/notes/{later.id}", json={"text": ""}).status_code == 422
        assert c.patch(f"/v1/notes/{later.id}", json={"text": "x", "colour": 1}).status_code == 422
        assert c.patch("/v1/notes/999999", json={"text": "x"}).status_code == 404

    entries = [e for e in mem.audit_log(session_id="s1") if e.action == "correct_note"]
    assert len(entries) == 1 and entries[0].allowed and entries[0].actor_id == "loopback"
    assert entries[0].detail == {"note_id": first.id, "reason": "she told us on the phone", "new_note_id": new["id"]}
    mem.close()


def test_correcting_another_tenants_note_is_refused_and_audited(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "t.db", embedder="none")
    acme, other = new_key(mem, "acme"), new_key(mem, "other")
    TenantView(mem, Caller("acme")).create_session(session_id="acme-1", user_id="ana")
    note = mem.add_note("Ana's door code is 1234", session_id=session_key("acme", "acme-1"), user_id="ana",
                        slot="door")
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as c:
        refused = c.patch(f"/v1/notes/{note.id}", json={"text": "leaked"}, headers=auth(other))
        assert refused.status_code == 404
        assert c.get(f"/v1/notes/{note.id}/history", headers=auth(other)).status_code == 404
        ok = c.patch(f"/v1/notes/{note.id}", json={"text": "Ana's door code changed"}, headers=auth(acme))
        assert ok.status_code == 200, ok.text
    assert [n.text for n in mem.note_history(note.id or 0)] == ["Ana's door code is 1234", "Ana's door code changed"]
    tried = [e for e in mem.audit_log() if e.action == "correct_note"]
    assert [(e.tenant_id, e.allowed, e.result) for e in tried] == [("acme", True, "ok"), ("other", False, "not_found")]
    mem.close()


def test_client_corrects_a_note_through_the_server(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "c.db", embedder="none")
    TenantView(mem, Caller(None)).create_session(session_id="s1", user_id="ana")
    note = mem.add_note("Ana lives in Porto", session_id="s1", user_id="ana", slot="home", value="Porto")
    with running_server(mem) as url, MemoryClient(url) as client:
        new = client.correct_note(note.id or 0, "Ana lives in Lisbon", value="Lisbon", reason="moved")
    assert new.text == "Ana lives in Lisbon" and new.value == "Lisbon" and new.current
    assert not mem.note_history(note.id or 0)[0].current
    mem.close()


def test_timeline_counts_days_summary_coverage_and_checkpoint(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "tl.db", embedder="none", summarize_every=2, keep_raw_turns=1)
    _two_days(mem, "tl")
    mem.flush(60)
    today = datetime.now(UTC).date()
    with client_for(mem) as c:
        t = c.get("/v1/sessions/tl/timeline").json()
        assert c.get("/v1/sessions/nope/timeline").status_code == 404
    assert t["messages"] == 10
    assert [(d["day"], d["messages"], d["user"], d["assistant"], d["other"]) for d in t["days"]] == [
        ((today - timedelta(days=2)).isoformat(), 6, 3, 3, 0), (today.isoformat(), 4, 2, 2, 0)]
    ids = [m.id for m in mem.load_session("tl", include_hidden=True)]
    blocks = t["summary"]["blocks"]
    assert blocks, t["summary"]  # 5 turns, a block every 2, the last one kept raw
    for b in blocks:
        assert ids[b["first_position"]] == b["first_message_id"] and ids[b["last_position"]] == b["last_message_id"]
    assert blocks[0]["first_position"] == 0
    assert t["summary"]["summarized_messages"] == blocks[-1]["last_position"] + 1 < 10
    cp = t["checkpoint"]
    assert cp["state"] == "fresh" and cp["last_message_id"] == ids[-1] and cp["position"] == 9
    mem.close()


def test_overview_figures_admin_and_tenant(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "ov.db", embedder="hashing")
    acme = new_key(mem, "acme")
    _two_days(mem, "acme-1", tenant="acme")
    other_1 = mem.create_session(session_id="other-1", tenant_id="other", user_id="zoe")
    mem.add(other_1, "Zoe's message")
    mem.add_note("Ana likes trams", session_id=session_key("acme", "acme-1"), user_id="ana", slot="pref:trams",
                 value="trams")
    mem.flush(60)
    with client_for(mem) as c:
        admin = c.get("/v1/overview").json()
    f = admin["figures"]
    assert (f["sessions"], f["messages"], f["notes"]) == (2, 11, 1)
    assert f["database_bytes"] > 0 and f["index_backlog"] == 0  # flushed: every message has its vector
    assert sum(d["messages"] for d in admin["messages_per_day"]) == 11
    assert admin["sessions_per_day"] == [{"day": datetime.now(UTC).date().isoformat(), "sessions": 2}]
    with client_for(mem, keys=key_store_for(mem.store), require_auth=True) as c:
        mine = c.get("/v1/overview", headers=auth(acme)).json()
    f = mine["figures"]
    assert mine["tenant_id"] == "acme" and (f["sessions"], f["messages"], f["notes"]) == (1, 10, 1)
    assert f["database_bytes"] is None and f["index_backlog"] is None  # they span every tenant
    mem.close()


def test_cli_corrects_a_note_and_history_says_why(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with Memory(db, embedder="none") as mem:
        mem.create_session(session_id="s1", user_id="ana")
        note = mem.add_note("Ana lives in Porto", session_id="s1", user_id="ana", slot="home", value="Porto")
    out = run("--store", str(db), "notes", "correct", str(note.id), "Ana lives in Lisbon", "--value", "Lisbon",
              "--reason", "moved in May", env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "now says: Ana lives in Lisbon" in out.stdout
    history = run("--store", str(db), "notes", "history", str(note.id), env={"COLUMNS": "200"})
    assert "corrected by hand by cli: moved in May" in history.stdout, history.stdout
    as_json = json.loads(run("--store", str(db), "notes", "history", str(note.id), "--json").stdout)
    assert [v["superseded_why"] for v in as_json] == ["corrected by hand by cli: moved in May", None]
    again = run("--store", str(db), "notes", "correct", str(note.id), "Ana lives in Faro")
    assert again.returncode != 0 and "correct the current version" in again.stderr
    with Memory(db, embedder="none") as mem:
        entry = mem.audit_log(session_id="s1")[0]
    assert (entry.action, entry.actor_id, entry.detail["reason"]) == ("correct_note", "cli", "moved in May")
