"""memlane for LangGraph: a checkpointer and a long-term ``BaseStore``
(``pip install 'memlane[langgraph]'``).

    from memlane import Memory
    from memlane.integrations.langgraph import MemlaneSaver, MemlaneStore

    mem = Memory("memory.db")                       # or a postgresql:// URL
    graph = builder.compile(checkpointer=MemlaneSaver(mem), store=MemlaneStore(mem))

``MemlaneSaver`` keeps checkpoints, channel blobs and pending writes as opaque records in
memlane's store (one transaction per ``put``), sync and async, and passes LangGraph's own
conformance suite (``langgraph-checkpoint-conformance``). ``MemlaneStore`` keeps
namespaced JSON values and indexes their text in memlane, so ``store.search(ns, query=...)``
is memlane's hybrid (BM25 + vector) search.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from memlane.aio import AsyncMemory
from memlane.errors import InvalidInputError, SessionNotFoundError
from memlane.integrations._support import as_sync, require
from memlane.memory import Memory

require("langgraph.checkpoint.base", "the LangGraph checkpointer and store", "langgraph")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import (  # noqa: E402
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["MemlaneSaver", "MemlaneStore"]

_SEP = "\x1f"  # between key parts; record keys may not hold NUL (store/records.py)
_THREADS = "langgraph:thread:"


def _pack(*parts: bytes) -> bytes:
    """Several byte strings as one record value, each length-prefixed."""
    return b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def _unpack(data: bytes) -> list[bytes]:
    parts, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at : at + 8], "big")
        parts.append(data[at + 8 : at + 8 + size])
        at += 8 + size
    return parts


def _key(*parts: str) -> str:
    for p in parts:
        if _SEP in p or "\x00" in p:
            raise InvalidInputError(f"LangGraph ids may not contain control characters \\x1f or NUL: {p!r}")
    return _SEP.join(parts)


class MemlaneSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer on memlane's store (SQLite or PostgreSQL)."""

    def __init__(self, memory: Memory | AsyncMemory, *, serde: Any = None) -> None:
        super().__init__(serde=serde)
        self.memory = as_sync(memory)
        self._store = self.memory.store

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _ns(thread_id: object) -> str:
        return _THREADS + str(thread_id)

    def _typed(self, value: Any) -> bytes:
        kind, data = self.serde.dumps_typed(value)
        return _pack(kind.encode(), data)

    def _untyped(self, packed: bytes) -> Any:
        kind, data = _unpack(packed)
        return self.serde.loads_typed((kind.decode(), data))

    def _blobs(self, ns: str, cns: str, versions: ChannelVersions) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for channel, version in versions.items():
            raw = self._store.get_record(ns, _key("b", cns, channel, str(version)))
            if raw is None:
                continue
            kind, data = _unpack(raw)
            if kind != b"empty":
                values[channel] = self.serde.loads_typed((kind.decode(), data))
        return values

    def _writes(self, ns: str, cns: str, checkpoint_id: str) -> builtins.list[tuple[str, str, Any]]:
        rows = []
        for _, raw in self._store.list_records(ns, prefix=_key("w", cns, checkpoint_id) + _SEP):
            task_id, channel, kind, data, task_path, idx = _unpack(raw)
            rows.append((task_path.decode(), task_id.decode(), int(idx), channel.decode(), kind.decode(), data))
        rows.sort(key=lambda r: writes_sort_key(r[0], r[1], r[2]))
        return [(r[1], r[3], self.serde.loads_typed((r[4], r[5]))) for r in rows]

    def _tuple(self, thread_id: str, cns: str, checkpoint_id: str, raw: bytes, metadata: Any = None) -> CheckpointTuple:
        ns = self._ns(thread_id)
        ckpt_b, meta_b, parent_b = _unpack(raw)
        checkpoint: Checkpoint = self._untyped(ckpt_b)
        parent = parent_b.decode()
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": cns, "checkpoint_id": checkpoint_id}},
            checkpoint={**checkpoint, "channel_values": self._blobs(ns, cns, checkpoint["channel_versions"])},
            metadata=metadata if metadata is not None else self._untyped(meta_b),
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": cns, "checkpoint_id": parent}}
                if parent else None
            ),
            pending_writes=self._writes(ns, cns, checkpoint_id),
        )

    # ------------------------------------------------------------ sync API

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id, cns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        ns = self._ns(thread_id)
        if checkpoint_id := get_checkpoint_id(config):
            raw = self._store.get_record(ns, _key("c", cns, checkpoint_id))
            if raw is None:
                return None
            found = self._tuple(thread_id, cns, checkpoint_id, raw)
            return found._replace(config=config)
        newest = self._store.list_records(ns, prefix=_key("c", cns) + _SEP, descending=True)
        if not newest:
            return None
        key, raw = newest[0]
        return self._tuple(thread_id, cns, key.rsplit(_SEP, 1)[1], raw)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        conf = config["configurable"] if config else {}
        threads = (
            [str(conf["thread_id"])] if conf.get("thread_id") is not None
            else [ns[len(_THREADS):] for ns in self._store.record_namespaces(_THREADS)]
        )
        wanted_ns = conf.get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in threads:
            rows: dict[str, list[tuple[str, bytes]]] = {}
            for cns, checkpoint_id, raw in self._checkpoints(self._ns(thread_id)):
                rows.setdefault(cns, []).append((checkpoint_id, raw))
            for cns, found in rows.items():
                if wanted_ns is not None and cns != wanted_ns:
                    continue
                for checkpoint_id, raw in found:
                    if (wanted_id and checkpoint_id != wanted_id) or (before_id and checkpoint_id >= before_id):
                        continue
                    metadata = self._untyped(_unpack(raw)[1])
                    if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                    if left is not None:
                        if left <= 0:
                            return
                        left -= 1
                    yield self._tuple(thread_id, cns, checkpoint_id, raw, metadata)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, cns = str(conf["thread_id"]), conf["checkpoint_ns"]
        saved = checkpoint.copy()
        values: dict[str, Any] = saved.pop("channel_values")  # type: ignore[misc]
        records = [
            (_key("b", cns, channel, str(version)),
             self._typed(values[channel]) if channel in values else _pack(b"empty", b""))
            for channel, version in new_versions.items()
        ]
        meta = self._typed(get_checkpoint_metadata(config, metadata))
        parent = (conf.get("checkpoint_id") or "").encode()
        records.append((_key("c", cns, checkpoint["id"]), _pack(self._typed(saved), meta, parent)))
        self._store.put_records(self._ns(thread_id), records)  # one transaction
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": cns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        conf = config["configurable"]
        ns, cns, checkpoint_id = self._ns(conf["thread_id"]), conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        prefix = _key("w", cns, checkpoint_id, task_id) + _SEP
        have = {k for k, _ in self._store.list_records(ns, prefix=prefix)}
        records = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            key = prefix + str(idx)
            if idx >= 0 and key in have:  # regular writes are written once; special ones replace
                continue
            kind, data = self.serde.dumps_typed(value)
            records.append((key, _pack(task_id.encode(), channel.encode(), kind.encode(), data,
                                       task_path.encode(), str(idx).encode())))
        self._store.put_records(ns, records)

    def delete_thread(self, thread_id: str) -> None:
        """Every checkpoint, blob and write of the thread, gone from disk."""
        self._store.delete_records(self._ns(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._store.put_records(self._ns(target_thread_id), self._store.list_records(self._ns(source_thread_id)))

    def _drop_checkpoints(self, ns: str, doomed: Sequence[tuple[str, str]]) -> None:
        """Delete checkpoints (checkpoint_ns, id) with their pending writes."""
        for cns, checkpoint_id in doomed:
            self._store.delete_records(ns, [_key("c", cns, checkpoint_id)])
            self._store.delete_records(ns, prefix=_key("w", cns, checkpoint_id) + _SEP)

    def _checkpoints(self, ns: str) -> builtins.list[tuple[str, str, bytes]]:
        """(checkpoint_ns, checkpoint_id, raw) of a thread, newest first per namespace."""
        out = []
        for key, raw in self._store.list_records(ns, prefix="c" + _SEP, descending=True):
            _, cns, checkpoint_id = key.split(_SEP)
            out.append((cns, checkpoint_id, raw))
        return out

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: only each namespace's newest checkpoint (and the blobs it uses)
        stays; ``delete``: the threads go whole."""
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInputError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            ns = self._ns(thread_id)
            if strategy == "delete":
                self._store.delete_records(ns)
                continue
            kept: dict[str, bytes] = {}
            doomed = []
            for cns, checkpoint_id, raw in self._checkpoints(ns):
                if cns in kept:
                    doomed.append((cns, checkpoint_id))
                else:
                    kept[cns] = raw
            self._drop_checkpoints(ns, doomed)
            used = {
                _key("b", cns, ch, str(v))
                for cns, raw in kept.items()
                for ch, v in self._untyped(_unpack(raw)[0])["channel_versions"].items()
            }
            blobs = [k for k, _ in self._store.list_records(ns, prefix="b" + _SEP) if k not in used]
            self._store.delete_records(ns, blobs)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Every checkpoint (and its writes) whose metadata names one of ``run_ids``."""
        wanted = set(run_ids)
        for ns in self._store.record_namespaces(_THREADS):
            doomed = [
                (cns, checkpoint_id) for cns, checkpoint_id, raw in self._checkpoints(ns)
                if self._untyped(_unpack(raw)[1]).get("run_id") in wanted
            ]
            self._drop_checkpoints(ns, doomed)

    def get_next_version(self, current: str | None, channel: None) -> str:
        # The same scheme as LangGraph's own savers: a zero-padded counter (ordered as
        # text) plus a random fraction, so concurrent branches never collide.
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # ------------------------------------------------------------ async API (same code on a thread)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(lambda: [*self.list(config, filter=filter, before=before, limit=limit)])
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)


# ---------------------------------------------------------------------------- BaseStore

_STORE = "langgraph:store:"  # record namespace prefix; the item namespace follows, joined by _SEP
_AGENT = "langgraph-store"  # agent_id of the memlane sessions that index store items


def _text_of(value: Any, fields: Sequence[str] | None) -> str:
    """The text memlane indexes for a value: the named top-level fields, or every string."""
    if fields is not None:
        picked = [value.get(f) for f in fields if f != "$"] if "$" not in fields else [value]
        value = picked
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)

    walk(value)
    return "\n".join(t for t in out if t.strip())


class MemlaneStore(BaseStore):
    """LangGraph's long-term store on memlane: values as records, their text in memlane's
    search (hybrid BM25 + vectors). ``index_fields`` names the top-level fields to index
    by default (None: every string in the value)."""

    supports_ttl = False

    def __init__(self, memory: Memory | AsyncMemory, *, index_fields: Sequence[str] | None = None) -> None:
        self.memory = as_sync(memory)
        self._store = self.memory.store
        self.index_fields = list(index_fields) if index_fields is not None else None

    @staticmethod
    def _ns(namespace: tuple[str, ...]) -> str:
        if not namespace:
            raise InvalidInputError("a LangGraph store namespace needs at least one label")
        return _STORE + _key(*namespace)

    @staticmethod
    def _session(namespace: tuple[str, ...]) -> str:
        return "langgraph-store/" + "/".join(namespace)

    def _read(self, namespace: tuple[str, ...], key: str, raw: bytes, score: float | None = None) -> SearchItem:
        doc = json.loads(raw)
        return SearchItem(
            namespace=namespace, key=key, value=doc["value"], score=score,
            created_at=datetime.fromisoformat(doc["created_at"]),
            updated_at=datetime.fromisoformat(doc["updated_at"]),
        )

    def _unindex(self, doc: dict[str, Any] | None) -> None:
        if doc and doc.get("message_id"):
            self.memory.forget_messages([int(doc["message_id"])])

    def _put(self, op: PutOp) -> None:
        ns = self._ns(op.namespace)
        old_raw = self._store.get_record(ns, op.key)
        old = json.loads(old_raw) if old_raw is not None else None
        if op.value is None:
            self._unindex(old)
            self._store.delete_records(ns, [op.key])
            return
        now = datetime.now(UTC).isoformat()
        fields = None if op.index is None else op.index
        text = "" if fields is False else _text_of(op.value, fields if fields is not None else self.index_fields)
        message_id = None
        if text:
            session = self._session(op.namespace)
            self.memory.ensure_session(session, agent_id=_AGENT)
            stored = self.memory.add(session, {"role": "user", "content": text, "metadata": {"key": op.key}})
            message_id = stored.id
        doc = {"value": op.value, "created_at": old["created_at"] if old else now, "updated_at": now,
               "message_id": message_id}
        self._store.put_records(ns, [(op.key, json.dumps(doc, ensure_ascii=False).encode())])
        self._unindex(old)

    def _namespaces(self, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        start = _STORE + (_key(*prefix) if prefix else "")
        found = []
        for ns in self._store.record_namespaces(start):
            labels = tuple(ns[len(_STORE):].split(_SEP))
            if labels[: len(prefix)] == prefix:
                found.append(labels)
        return found

    def _search(self, op: SearchOp) -> list[SearchItem]:
        def matches(item: SearchItem) -> bool:
            return all(item.value.get(k) == v for k, v in (op.filter or {}).items())

        if not op.query:
            items = [
                self._read(labels, key, raw)
                for labels in self._namespaces(op.namespace_prefix)
                for key, raw in self._store.list_records(self._ns(labels))
            ]
            items = [i for i in items if matches(i)]
            items.sort(key=lambda i: i.updated_at, reverse=True)
            return items[op.offset : op.offset + op.limit]
        wanted = op.offset + op.limit
        results: list[SearchItem] = []
        seen: set[tuple[tuple[str, ...], str]] = set()
        top_k = max(10, 4 * wanted)
        hits = self.memory.search(op.query, agent_id=_AGENT, top_k=top_k)
        for hit in hits:
            labels = self._labels_of(hit.message.session_id)
            key = hit.message.metadata.get("key")
            if labels is None or not isinstance(key, str) or labels[: len(op.namespace_prefix)] != op.namespace_prefix:
                continue
            raw = self._store.get_record(self._ns(labels), key)
            if raw is None or (labels, key) in seen:
                continue
            doc = json.loads(raw)
            if doc.get("message_id") != hit.message.id:  # an older version's text
                continue
            item = self._read(labels, key, raw, score=hit.score)
            if matches(item):
                seen.add((labels, key))
                results.append(item)
        return results[op.offset : wanted]

    def _labels_of(self, session_id: str) -> tuple[str, ...] | None:
        prefix = "langgraph-store/"
        if not session_id.startswith(prefix):
            return None
        try:
            session = self.memory.get_session(session_id)
        except SessionNotFoundError:
            return None
        if session.agent_id != _AGENT:
            return None
        return tuple(session_id[len(prefix):].split("/"))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = self._namespaces()
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            found = [
                ns for ns in found
                if len(ns) >= len(path) and all(
                    p == "*" or p == label
                    for p, label in zip(path, ns[: len(path)] if cond.match_type == "prefix" else ns[-len(path):], strict=True)
                )
            ]
        if op.max_depth is not None:
            found = sorted({ns[: op.max_depth] for ns in found})
        return found[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                raw = self._store.get_record(self._ns(op.namespace), op.key)
                got = self._read(op.namespace, op.key, raw) if raw is not None else None
                results.append(
                    Item(namespace=got.namespace, key=got.key, value=got.value,
                         created_at=got.created_at, updated_at=got.updated_at) if got else None
                )
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise InvalidInputError(f"unknown LangGraph store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))
