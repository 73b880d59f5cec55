"""The async API: :class:`AsyncMemory` and :class:`AsyncMemoryClient`.

Both share the engine with the sync classes rather than copying it: each method runs
the sync method of the same name on a worker thread (``asyncio.to_thread``), so the
event loop never waits on SQLite, PostgreSQL, an embedding or an HTTP round trip, and
there is one implementation of every rule. memlane's stores are thread-safe (SQLite
keeps a connection per thread; PostgreSQL a pool), which is what makes this sound.

    async with AsyncMemory("memory.db") as mem:
        sid = await mem.create_session()
        await mem.add(sid, "hello")
        packet = await mem.context(sid, "hello", max_tokens=2000)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from memlane.client import MemoryClient
from memlane.memory import Memory

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


@overload
def _off_loop(fn: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...
@overload
def _off_loop(fn: Callable[..., R]) -> Callable[..., Coroutine[Any, Any, R]]: ...  # type: ignore[overload-cannot-match]


def _off_loop(fn: Callable[..., R]) -> Callable[..., Coroutine[Any, Any, R]]:
    # The second overload types methods taking **fields: mypy cannot split their named
    # ``self`` off a ParamSpec, so their arguments go unchecked; results stay typed.
    """An async method running the sync method of the same name on ``self.sync``."""
    name = fn.__name__

    async def method(self: Any, *args: Any, **kwargs: Any) -> R:
        bound: Callable[..., R] = getattr(self.sync, name)
        return await asyncio.to_thread(bound, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    return method


class _OffLoop(Generic[S]):
    """Construction and ``async with`` shared by both async classes."""

    sync: S
    _opens: Callable[..., S]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sync = type(self)._opens(*args, **kwargs)

    @classmethod
    def wrap(cls, sync: S) -> Self:
        """An async view of an open sync object (both see the same data)."""
        made = cls.__new__(cls)
        made.sync = sync
        return made

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.sync.close)  # type: ignore[attr-defined]


class AsyncMemory(_OffLoop[Memory]):
    """:class:`~memlane.Memory` for asyncio code: the same methods, awaited.

    Construct it like ``Memory`` (same arguments) or wrap an open one with
    :meth:`wrap`; ``sync`` is the Memory underneath, for the rare synchronous need.
    """

    _opens = Memory

    @property
    def anchor_id(self) -> str:
        return self.sync.anchor_id

    def is_anchor(self, author_id: str | None) -> bool:
        return self.sync.is_anchor(author_id)

    close = _off_loop(Memory.close)
    # sessions
    create_session = _off_loop(Memory.create_session)
    get_session = _off_loop(Memory.get_session)
    ensure_session = _off_loop(Memory.ensure_session)
    load_session = _off_loop(Memory.load_session)
    list_sessions = _off_loop(Memory.list_sessions)
    update_session = _off_loop(Memory.update_session)
    end_session = _off_loop(Memory.end_session)
    delete_session = _off_loop(Memory.delete_session)
    clear_session = _off_loop(Memory.clear_session)
    inactive_sessions = _off_loop(Memory.inactive_sessions)
    prune_old_sessions = _off_loop(Memory.prune_old_sessions)
    archive_session = _off_loop(Memory.archive_session)
    unarchive_session = _off_loop(Memory.unarchive_session)
    active_session_for = _off_loop(Memory.active_session_for)
    get_active_session = _off_loop(Memory.get_active_session)
    auto_expire_sessions = _off_loop(Memory.auto_expire_sessions)
    detect_topic_change = _off_loop(Memory.detect_topic_change)
    # writing
    save_message = _off_loop(Memory.save_message)
    add = _off_loop(Memory.add)
    add_messages = _off_loop(Memory.add_messages)
    store_interaction = _off_loop(Memory.store_interaction)
    mark_important = _off_loop(Memory.mark_important)
    forget_messages = _off_loop(Memory.forget_messages)
    erase = _off_loop(Memory.erase)
    # items (framework sessions)
    items = _off_loop(Memory.items)
    pop = _off_loop(Memory.pop)
    forget_at = _off_loop(Memory.forget_at)
    forget_history = _off_loop(Memory.forget_history)
    replace_history = _off_loop(Memory.replace_history)
    # reading and context
    window = _off_loop(Memory.window)
    get_recent_messages = _off_loop(Memory.get_recent_messages)
    get_conversation_context = _off_loop(Memory.get_conversation_context)
    list_turns = _off_loop(Memory.list_turns)
    get_message = _off_loop(Memory.get_message)
    context = _off_loop(Memory.context)
    cached_response = _off_loop(Memory.cached_response)
    cache_response = _off_loop(Memory.cache_response)
    sync_caches = _off_loop(Memory.sync_caches)
    get_state = _off_loop(Memory.get_state)
    resolve_references = _off_loop(Memory.resolve_references)
    hydrate = _off_loop(Memory.hydrate)
    shutdown = _off_loop(Memory.shutdown)
    # search
    search = _off_loop(Memory.search)
    search_history = _off_loop(Memory.search_history)
    get_relevant_context = _off_loop(Memory.get_relevant_context)
    # notes and rooms
    handle_command = _off_loop(Memory.handle_command)
    notes = _off_loop(Memory.notes)
    add_note = _off_loop(Memory.add_note)
    note_history = _off_loop(Memory.note_history)
    forget_note = _off_loop(Memory.forget_note)
    correct_note = _off_loop(Memory.correct_note)
    audit = _off_loop(Memory.audit)
    audit_log = _off_loop(Memory.audit_log)
    facets = _off_loop(Memory.facets)
    # admin
    maintain = _off_loop(Memory.maintain)
    export_session = _off_loop(Memory.export_session)
    import_sessions = _off_loop(Memory.import_sessions)
    flush = _off_loop(Memory.flush)
    stats = _off_loop(Memory.stats)
    backlog = _off_loop(Memory.backlog)
    start_background_work = _off_loop(Memory.start_background_work)


class AsyncMemoryClient(_OffLoop[MemoryClient]):
    """:class:`~memlane.client.MemoryClient` for asyncio code: the same methods, awaited."""

    _opens = MemoryClient

    close = _off_loop(MemoryClient.close)
    health = _off_loop(MemoryClient.health)
    create_session = _off_loop(MemoryClient.create_session)
    get_session = _off_loop(MemoryClient.get_session)
    ensure_session = _off_loop(MemoryClient.ensure_session)
    list_sessions = _off_loop(MemoryClient.list_sessions)
    update_session = _off_loop(MemoryClient.update_session)
    end_session = _off_loop(MemoryClient.end_session)
    delete_session = _off_loop(MemoryClient.delete_session)
    clear_session = _off_loop(MemoryClient.clear_session)
    load_session = _off_loop(MemoryClient.load_session)
    save_message = _off_loop(MemoryClient.save_message)
    add = _off_loop(MemoryClient.add)
    add_messages = _off_loop(MemoryClient.add_messages)
    items = _off_loop(MemoryClient.items)
    pop = _off_loop(MemoryClient.pop)
    forget_at = _off_loop(MemoryClient.forget_at)
    forget_history = _off_loop(MemoryClient.forget_history)
    replace_history = _off_loop(MemoryClient.replace_history)
    store_interaction = _off_loop(MemoryClient.store_interaction)
    mark_important = _off_loop(MemoryClient.mark_important)
    forget_messages = _off_loop(MemoryClient.forget_messages)
    window = _off_loop(MemoryClient.window)
    get_recent_messages = _off_loop(MemoryClient.get_recent_messages)
    list_turns = _off_loop(MemoryClient.list_turns)
    get_conversation_context = _off_loop(MemoryClient.get_conversation_context)
    get_message = _off_loop(MemoryClient.get_message)
    search = _off_loop(MemoryClient.search)
    search_history = _off_loop(MemoryClient.search_history)
    get_relevant_context = _off_loop(MemoryClient.get_relevant_context)
    context = _off_loop(MemoryClient.context)
    cached_response = _off_loop(MemoryClient.cached_response)
    cache_response = _off_loop(MemoryClient.cache_response)
    get_state = _off_loop(MemoryClient.get_state)
    notes = _off_loop(MemoryClient.notes)
    add_note = _off_loop(MemoryClient.add_note)
    facets = _off_loop(MemoryClient.facets)
    handle_command = _off_loop(MemoryClient.handle_command)
    export_session = _off_loop(MemoryClient.export_session)
    import_sessions = _off_loop(MemoryClient.import_sessions)
    flush = _off_loop(MemoryClient.flush)
    note_history = _off_loop(MemoryClient.note_history)
    forget_note = _off_loop(MemoryClient.forget_note)
    correct_note = _off_loop(MemoryClient.correct_note)
    audit_log = _off_loop(MemoryClient.audit_log)
    archive_session = _off_loop(MemoryClient.archive_session)
    unarchive_session = _off_loop(MemoryClient.unarchive_session)
    active_session_for = _off_loop(MemoryClient.active_session_for)
    get_active_session = _off_loop(MemoryClient.get_active_session)
    auto_expire_sessions = _off_loop(MemoryClient.auto_expire_sessions)
    detect_topic_change = _off_loop(MemoryClient.detect_topic_change)
    resolve_references = _off_loop(MemoryClient.resolve_references)
    hydrate = _off_loop(MemoryClient.hydrate)
    shutdown = _off_loop(MemoryClient.shutdown)
    stats = _off_loop(MemoryClient.stats)
    maintain = _off_loop(MemoryClient.maintain)
    prune_old_sessions = _off_loop(MemoryClient.prune_old_sessions)

    @property
    def anchor_id(self) -> str:
        """The server's Anchor (one short request, made on this thread)."""
        return self.sync.anchor_id

    def is_anchor(self, author_id: str | None) -> bool:
        return self.sync.is_anchor(author_id)
