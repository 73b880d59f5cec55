"""The background indexer: how it batches queued messages and backlog, on a real SQLite file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memlane import Memory
from memlane.models import Message, Session
from memlane.search.documents import document_text
from memlane.search.embedders import Embedder, HashingEmbedder, Vectors
from memlane.search.indexer import DEFAULT_BATCH, Indexer
from memlane.search.recall import model_info
from memlane.search.vectors import SQLiteVectorIndex, check_model
from memlane.store import SQLiteStore


class GatedEmbedder(Embedder):
    """The hashing embedder, recording each call's size; the first call waits for a gate so
    a test can pile up a queue behind it."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.calls: list[int] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        self.started.set()
        assert self.gate.wait(30), "test never opened the gate"
        return self.inner.embed(texts)


def _write_messages(path: Path, turns: int) -> list[int]:
    with Memory(path, embedder="none") as mem:
        for i in range(turns):
            mem.add_messages(
                "s1",
                [
                    {"role": "user", "content": f"turn {i}: planting tomatoes and roses", "author_name": "Ann"},
                    {"role": "assistant", "content": f"reply {i}: water them at dawn", "author_name": "Bot"},
                ],
            )
    store = SQLiteStore(path)
    try:
        return [m.id for m in store.recent_messages("s1", 10 * turns) if m.id is not None]
    finally:
        store.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteVectorIndex, list[int]]]:
    path = tmp_path / "idx.db"
    ids = sorted(_write_messages(path, 160))  # 320 messages: more than one DEFAULT_BATCH
    store = SQLiteStore(path)
    index = SQLiteVectorIndex(store)
    yield store, index, ids
    store.close()


def _assert_vectors_match_documents(store: SQLiteStore, index: SQLiteVectorIndex, ids: list[int]) -> None:
    # Each stored vector must be its own message's document (with its previous turn),
    # whatever batch it was embedded in.
    messages = store.get_messages(ids)
    by_id = {m.id: m for m in messages}
    reference = HashingEmbedder()
    for position, msg_id in enumerate(ids):
        previous = by_id[ids[position - 1]] if position else None
        expected = reference.embed_query(document_text(by_id[msg_id], previous))
        assert index.similarities(expected, [msg_id])[msg_id] == pytest.approx(1.0, abs=1e-5)


def _index_everything(store: SQLiteStore, index: SQLiteVectorIndex, embedder: Embedder) -> None:
    """Claim the index for ``embedder``, then embed the whole backlog with a fresh indexer."""
    check_model(index, model_info(embedder))
    indexer = Indexer(store, index, embedder)
    try:
        assert indexer.flush()
    finally:
        indexer.close()


def test_backlog_is_embedded_in_chunks_of_the_batch_size(
    db: tuple[SQLiteStore, SQLiteVectorIndex, list[int]],
) -> None:
    store, index, ids = db
    embedder = GatedEmbedder()
    embedder.gate.set()
    _index_everything(store, index, embedder)
    assert embedder.calls == [DEFAULT_BATCH, len(ids) - DEFAULT_BATCH]
    assert index.count() == len(ids)
    _assert_vectors_match_documents(store, index, ids)


def _gated_indexer(
    store: SQLiteStore, index: SQLiteVectorIndex, ids: list[int]
) -> tuple[GatedEmbedder, Session, list[Message], Indexer]:
    """A gated embedder, session s1, its messages and an indexer taking 100 at a time."""
    embedder = GatedEmbedder()
    check_model(index, model_info(embedder))
    session = store.get_session("s1")
    assert session is not None
    return embedder, session, store.get_messages(ids), Indexer(store, index, embedder, batch_size=100)


def test_messages_queued_while_busy_go_to_the_model_together(
    db: tuple[SQLiteStore, SQLiteVectorIndex, list[int]],
) -> None:
    # Writes outpacing the model pile up; the worker must then take the whole pile (up to
    # its batch size) in one call, so the embedder can sort it by length and pad little.
    store, index, ids = db
    embedder, session, messages, indexer = _gated_indexer(store, index, ids)
    try:
        embedder.gate.set()  # the start-up backlog scan embeds everything once ...
        assert indexer.flush()
        # ... then the same messages are queued again (upsert overwrites their vectors).
        embedder.calls.clear()
        embedder.gate.clear()
        embedder.started.clear()
        indexer.observe(session, messages[:2])
        assert embedder.started.wait(30)  # the worker is inside the model with 2 messages
        for start in range(2, len(messages), 2):  # ... while the writer queues the rest
            indexer.observe(session, messages[start : start + 2])
        embedder.gate.set()
        assert indexer.flush()
    finally:
        indexer.close()
    rest = len(messages) - 2
    assert embedder.calls[0] == 2
    assert embedder.calls[1:] == [100] * (rest // 100) + ([rest % 100] if rest % 100 else [])
    _assert_vectors_match_documents(store, index, ids)


_DIES_MID_BATCH = """
import os, sys, time
from pathlib import Path
from memlane.search.embedders import HashingEmbedder
from memlane.search.indexer import Indexer
from memlane.search.recall import model_info
from memlane.search.vectors import SQLiteVectorIndex, check_model
from memlane.store import SQLiteStore

class StallsOnSecondBatch(HashingEmbedder):
    calls = 0
    def embed(self, texts):
        StallsOnSecondBatch.calls += 1
        if StallsOnSecondBatch.calls == 2:  # the first batch's vectors are stored by now
            # whole or absent: the test reads it the moment it appears
            Path(sys.argv[2] + '.tmp').write_text(str(len(texts)))
            os.replace(sys.argv[2] + '.tmp', sys.argv[2])
            time.sleep(600)  # killed here, in the middle of the second batch
        return super().embed(texts)

store = SQLiteStore(sys.argv[1])
index = SQLiteVectorIndex(store)
embedder = StallsOnSecondBatch()
check_model(index, model_info(embedder))
Indexer(store, index, embedder, batch_size=100).flush()
"""


def test_a_process_killed_mid_batch_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    ids = sorted(_write_messages(path, 160))
    marker = tmp_path / "in-second-batch"
    script = tmp_path / "dies.py"
    script.write_text(_DIES_MID_BATCH)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(marker)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the indexer never reached its second batch"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert marker.read_text() == "100"

    store = SQLiteStore(path)
    try:
        index = SQLiteVectorIndex(store)
        assert index.count() == 100  # the first batch survived the kill whole
        # The next process finds the rest in the log and embeds exactly what was missing.
        embedder = GatedEmbedder()
        embedder.gate.set()
        indexer = Indexer(store, index, embedder, batch_size=100)
        try:
            assert indexer.flush()
        finally:
            indexer.close()
        assert sum(embedder.calls) == len(ids) - 100
        assert index.count() == len(ids)
        _assert_vectors_match_documents(store, index, ids)
    finally:
        store.close()


def test_messages_written_during_a_backlog_scan_are_embedded_once(
    db: tuple[SQLiteStore, SQLiteVectorIndex, list[int]],
) -> None:
    # The scan finds every message without a vector; those written while it runs are also
    # queued by observe(). Each must reach the model once, not once per route.
    store, index, ids = db
    embedder, session, messages, indexer = _gated_indexer(store, index, ids)
    try:
        indexer.start()
        assert embedder.started.wait(30)  # the start-up scan is inside the model with its first chunk
        for start in range(0, len(messages), 2):  # meanwhile the writer's messages are queued
            indexer.observe(session, messages[start : start + 2])
        embedder.gate.set()
        assert indexer.flush()
    finally:
        indexer.close()
    assert sum(embedder.calls) == len(ids), embedder.calls
    assert index.count() == len(ids)
    _assert_vectors_match_documents(store, index, ids)


class LoadingEmbedder(GatedEmbedder):
    """Records when load() runs relative to embed(); ``fail`` makes load() raise."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.gate.set()
        self.fail = fail
        self.events: list[str] = []

    def load(self) -> None:
        self.events.append("load")
        if self.fail:
            raise OSError("model file unreadable")

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.events.append("embed")
        return super().embed(texts)


@pytest.mark.parametrize("fail", [False, True])
def test_the_worker_loads_the_model_before_its_first_batch(
    db: tuple[SQLiteStore, SQLiteVectorIndex, list[int]], fail: bool,
) -> None:
    # The model starts on the worker as soon as background work starts (while a first
    # search reads keywords), once; a load that fails leaves embedding to report it.
    store, index, ids = db
    embedder = LoadingEmbedder(fail=fail)
    _index_everything(store, index, embedder)
    assert embedder.events == ["load", "embed", "embed"]
    assert index.count() == len(ids)


def test_an_embedder_without_load_still_indexes(db: tuple[SQLiteStore, SQLiteVectorIndex, list[int]]) -> None:
    # Embedders written before load() existed (duck-typed, not subclassing the port).
    store, index, ids = db

    class Bare:
        model_id = HashingEmbedder().model_id
        dimension = HashingEmbedder().dimension

        def embed(self, texts: Sequence[str]) -> Vectors:
            return HashingEmbedder().embed(texts)

    _index_everything(store, index, Bare())  # type: ignore[arg-type]
    assert index.count() == len(ids)
