"""LRUCache: the bound on per-session/per-query caches, and Memory after evictions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memlane import Memory
from memlane.lru import LRUCache


def test_evicts_the_least_recently_used() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the newest
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2
    assert cache.pop("a") == 1 and cache.pop("a") is None
    cache.clear()
    assert len(cache) == 0 and cache.get("c") is None


def test_rejects_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LRUCache(0)


def test_stays_bounded_under_concurrent_use() -> None:
    cache: LRUCache[int, int] = LRUCache(50)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(2000):
                cache.put(offset + i % 120, i)
                cache.get(offset + (i * 7) % 120)
                if i % 13 == 0:
                    cache.pop(offset + i % 120)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) <= 50


def test_memory_reads_the_encoding_again_after_an_eviction(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="none", token_model="gpt-4o") as mem:
        mem._count_encodings = LRUCache(2)  # force evictions
        sids = [mem.create_session(user_id="u") for _ in range(5)]
        for sid in sids:
            mem.add(sid, "hello there, how are you doing today?")
        assert len(mem._count_encodings) == 2
        for sid in sids:
            session = mem.get_session(sid)
            assert session is not None
            assert mem.token_encoding_of(session) == "o200k_base"
            window = mem.get_recent_messages(sid, max_tokens=100)
            assert [m.content for m in window] == ["hello there, how are you doing today?"]


def test_summary_locks_do_not_pile_up(tmp_path: Path) -> None:
    import gc

    with Memory(tmp_path / "s.db", embedder="none") as mem:
        summaries = mem.parts.summaries
        held = summaries.lock("kept")
        for i in range(200):
            with summaries.lock(f"s{i}"):
                pass
        gc.collect()
        assert summaries.lock("kept") is held  # a lock someone holds is the one handed out
        assert len(summaries._locks) < 10
