"""A process's first search makes only the search's own part (recall): state, summaries and
notes are made when first used or before the first write that follows, so their imports
(~0.1-0.2 s) are not on the first search's path and no write is missed by them."""

from __future__ import annotations

from pathlib import Path

from memlane import Memory


def test_first_search_leaves_other_parts_unmade_and_later_writes_reach_them(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hashing") as writer:  # another process wrote before
        sid = writer.create_session()
        writer.add(sid, "How do I enable swap on Ubuntu?")
    with Memory(db, embedder="hashing") as mem:
        hits = mem.search("swap ubuntu")
        assert [h.message.content for h in hits] == ["How do I enable swap on Ubuntu?"]
        assert mem.background_work_started
        assert mem.parts.built("recall")
        assert not mem.parts.built("state") and not mem.parts.built("summaries")

        mem.add(sid, "Which Ubuntu version are you on?", role="assistant")
        assert mem.parts.built("state") and mem.parts.built("summaries")  # before the append was passed on
        mem.flush()
        st = mem.get_state(sid)
        # The state caught up with the message written before (from the log) and saw the one after.
        assert st.open_loops == ["How do I enable swap on Ubuntu?"]
        assert st.pending_clarifications == ["Which Ubuntu version are you on?"]


def test_flush_after_a_search_makes_every_part(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    with Memory(db, embedder="hashing") as writer:
        writer.add(writer.create_session(), "Our deploy uses Kubernetes on GKE.")
    with Memory(db, embedder="hashing") as mem:
        assert [h.message.content for h in mem.search("deploy")] == ["Our deploy uses Kubernetes on GKE."]
        assert not mem.parts.built("notes")
        mem.flush()
        assert mem.parts.built("state") and mem.parts.built("summaries") and mem.parts.built("notes")
