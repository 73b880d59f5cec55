"""GET /v1/events: change events as Server-Sent Events, tenant-scoped, resumable.

Each SSE message carries ``id:`` (the event id), ``event:`` (its kind) and ``data:`` (the
event as JSON: ids, kind, time, tenant; never content). A client that reconnects sends
the last id it saw as ``Last-Event-ID`` (browsers' EventSource do this themselves) and
gets everything after it, so a disconnect loses nothing. The stream reads the outbox
when the Memory's event bus rings (a commit here, PostgreSQL NOTIFY, SQLite
``data_version`` or Redis), so one write in any instance reaches every stream at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from memlane.errors import InvalidInputError
from memlane.server.routes import View
from memlane.server.tenancy import public_ids
from memlane.store.events import ChangeEvent, EventSource, lost_since

router = APIRouter(prefix="/v1")

#: Longest wait for the event bus's doorbell before the stream looks at the outbox anyway
#: (and checks that the client is still there); keep-alive comments between idle spells.
WAKE_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0
#: Event ids are 64-bit database integers; a larger id can name no event and would
#: overflow the driver, so it is refused as bad input instead of failing with a 500.
MAX_EVENT_ID = 2**63 - 1


def _frame(event: ChangeEvent, tenant: str | None) -> str:
    data = json.dumps(public_ids(event.to_dict(), tenant))  # the tenant's own session ids
    return f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"


@router.get(
    "/events", tags=["events"], response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}},
)
async def events(
    request: Request,
    v: View,
    since: Annotated[int | None, Query(ge=0, le=MAX_EVENT_ID, description="Replay events after this id (0: all kept).")] = None,
    follow: Annotated[bool, Query(description="Keep the stream open for new events.")] = True,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Change events of the caller's tenant as they happen (SSE); resume with Last-Event-ID.

    Without ``since`` or ``Last-Event-ID`` the stream starts at now. ``follow=false`` ends
    the response once caught up (for scripts that poll).
    """
    store = v.mem.store
    if not isinstance(store, EventSource):
        raise InvalidInputError("this store keeps no change events")
    start = since
    if last_event_id is not None:
        if not last_event_id.strip().isdigit() or int(last_event_id) > MAX_EVENT_ID:
            raise InvalidInputError(
                f"Last-Event-ID must be an event id (0 to {MAX_EVENT_ID}), got {last_event_id!r}")
        start = int(last_event_id)
    tenant = v.caller.tenant
    after = await anyio.to_thread.run_sync(store.last_event_id) if start is None else start
    bus = v.mem.bus
    if follow:
        await anyio.to_thread.run_sync(bus.start)

    async def stream() -> AsyncIterator[str]:
        nonlocal after
        loop = asyncio.get_running_loop()
        rung = asyncio.Event()
        # The bell rings on another thread (a commit, NOTIFY, data_version, Redis): hand it over.

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed under a late ring
                loop.call_soon_threadsafe(rung.set)

        cancel = bus.bell.on_ring(wake)
        idle = 0.0
        try:
            with bus.following(after, tenant) as me:  # counted in the bus's lag figures
                yield ": memlane change events\n\n"  # sends the headers at once
                lost = await anyio.to_thread.run_sync(lost_since, store, after)
                if lost is not None:  # what it had not read was pruned: drop every cache
                    yield _frame(lost, tenant)
                while True:
                    rung.clear()  # before the read: a ring during it makes the wait below return
                    found = await anyio.to_thread.run_sync(partial(store.events_after, after, tenant_id=tenant))
                    for event in found:
                        me.position = event.id
                        yield _frame(event, tenant)
                    if found:
                        after, idle = found[-1].id, 0.0
                        continue
                    if not follow or await request.is_disconnected():
                        return
                    with anyio.move_on_after(WAKE_SECONDS):
                        await rung.wait()
                    idle = 0.0 if rung.is_set() else idle + WAKE_SECONDS
                    if idle >= KEEPALIVE_SECONDS:
                        idle = 0.0
                        yield ": keep-alive\n\n"
        finally:
            cancel()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
