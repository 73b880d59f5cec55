"""The recent window reads pages sized by what is left of its budget: the same window as
fixed 64-row pages, with far fewer rows decoded and round trips made."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memlane.context.window import recent_window
from memlane.models import Message, Session
from memlane.store import SQLiteStore
from memlane.tokens import get_counter


class CountingStore(SQLiteStore):
    """The real SQLite store, counting what recent_messages hands out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rows = 0
        self.calls = 0

    def recent_messages(self, session_id: str, limit: int, **kwargs: Any) -> list[Message]:
        page = super().recent_messages(session_id, limit, **kwargs)
        self.rows += len(page)
        self.calls += 1
        return page


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    st = CountingStore(str(tmp_path / "w.db"))
    st.create_session(Session(id="s"))
    rng = random.Random(4)
    counter = get_counter("gpt-4o")
    msgs = []
    for i in range(3000):
        text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "kayak", "river"]) for _ in range(rng.randint(3, 60)))
        msg = Message(role="user" if i % 2 == 0 else "assistant", content=f"{text} #{i}")
        msgs.append(msg.with_(token_count=counter.count_message(msg)))
    st.append("s", msgs)
    return st


def _ids(messages: Sequence[Message]) -> list[int | None]:
    return [m.id for m in messages]


@pytest.mark.parametrize("budget", [300, 700, 4096, 20_000])
def test_adaptive_pages_give_the_same_window_with_fewer_rows(store: CountingStore, budget: int) -> None:
    counter = get_counter("gpt-4o")
    window = recent_window(store, "s", budget, counter)
    rows, calls = store.rows, store.calls
    # The reference: every message, newest first, cut where the budget ends.
    every = store.recent_messages("s", 10_000)
    used, expected = 3, []
    for msg in every:
        if used + (msg.token_count or 0) > budget:
            break
        used += msg.token_count or 0
        expected.append(msg)
    assert _ids(window.messages) == _ids(list(reversed(expected)))
    assert window.tokens == used
    n = len(window.messages)
    assert rows <= max(64, int(n * 1.3) + 16), (rows, n)
    assert calls <= 3 + n // 1000, calls


def test_max_messages_caps_the_page(store: CountingStore) -> None:
    window = recent_window(store, "s", 100_000, get_counter("gpt-4o"), max_messages=70)
    assert len(window.messages) == 70
    assert store.rows <= 64 + 6 + 8
