"""`memlane reindex`: rebuild keyword and vector indexes from the log, switch embedders."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import EmbedderMismatchError, Memory
from memlane.cli.main import main
from memlane.search.embedders import HashingEmbedder
from memlane.search.recall import vector_index_for
from memlane.search.reindex import reindex
from memlane.search.vectors import SQLiteVectorIndex
from memlane.store import SQLiteStore

WORDS = (
    "apple banana cherry dragon eagle falcon guitar harbor island jungle kettle lantern meadow "
    "nectar orchid pepper quartz river saddle tulip umbrella violin walnut xylophone yogurt zebra "
    "anchor bishop candle dolphin"
).split()


def _write(path: Path, embedder: str) -> None:
    with Memory(path, embedder=embedder) as mem:
        for i, word in enumerate(WORDS):
            mem.add("s1" if i % 2 else "s2", f"a note about the {word} on the kayak trip")
        mem.add_messages("s1", [{"role": "assistant", "content": ""}])  # nothing to embed
        mem.flush()


def test_reindex_rebuilds_vectors_and_keyword_index(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    _write(path, "hashing")
    store = SQLiteStore(path)
    try:
        store.write(lambda c: c.execute("DELETE FROM message_vectors WHERE message_id % 3 = 0"))
        store.write(lambda c: c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')"))
        assert store.keyword_search("kayak", __import__("memlane").models.MessageFilter()) == []
        seen: list[tuple[str, int, int]] = []
        result = reindex(store, vector_index_for(store), HashingEmbedder(), progress=lambda *a: seen.append(a))
        assert result.messages == 31 and result.embedded == 30
        assert SQLiteVectorIndex(store).count() == 30
        assert seen and seen[-1][1] == seen[-1][2] == 31
    finally:
        store.close()
    with Memory(path, embedder="hashing") as mem:
        assert "orchid" in mem.search("orchid")[0].message.content


def test_switching_embedders_via_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli.db"
    _write(path, "none")  # an old database without vectors: reindex is the backfill
    main(["--store", str(path), "reindex", "--embedder", "hashing"])
    assert "30 vectors" in capsys.readouterr().out
    with Memory(path, embedder="hashing") as mem:
        assert mem.parts.recall.index.count() == 30
    store = SQLiteStore(path)
    try:  # pretend the vectors came from another model: memlane refuses until reindex
        store.write(lambda c: c.execute("UPDATE vector_meta SET value = 'x' WHERE key = 'recipe'"))
    finally:
        store.close()
    with pytest.raises(EmbedderMismatchError):
        Memory(path, embedder="hashing")
    main(["--store", str(path), "reindex", "--embedder", "hashing"])
    with Memory(path, embedder="hashing") as mem:
        assert mem.search("kayak")


def test_reindex_without_embedder_drops_vectors(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    _write(path, "hashing")
    store = SQLiteStore(path)
    try:
        result = reindex(store, vector_index_for(store), None)
        assert result.embedded == 0 and SQLiteVectorIndex(store).count() == 0
        assert SQLiteVectorIndex(store).model_info() is None
    finally:
        store.close()
