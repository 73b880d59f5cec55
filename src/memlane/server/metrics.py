"""Prometheus metrics for one server instance.

Each app gets its own registry (not the process-global one) so several apps in
one process, as in the tests, never collide on metric names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memlane.memory import Memory
from memlane.models import Message as MemMessage
from memlane.models import Session
from memlane.store.events import EventSource

CONTENT_TYPE = CONTENT_TYPE_LATEST


def _queue_depth_reader(mem: Memory) -> Callable[[], float]:
    """The embedder's queue depth if the recall component exposes one, else 0."""

    def read() -> float:
        indexer = mem.parts.indexer
        return float(indexer.pending()) if indexer is not None else 0.0

    return read


class ResponseCacheCollector(Collector):
    """The response cache's lookups, hits and savings, read from the database at each scrape:
    the counts are durable and shared, so every instance reports the same totals."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        repository = self.mem.store.response_cache() if self.mem.enabled else None
        if repository is None:
            return
        counts = repository.response_cache_counts()
        yield GaugeMetricFamily("memlane_response_cache_entries", "Answers kept by the response cache.",
                                value=counts["entries"])
        for name, what in (("lookups", "Response cache lookups."), ("hits", "Response cache hits."),
                           ("saved_seconds", "Model time saved by response cache hits."),
                           ("saved_tokens", "Packet tokens not sent to a model thanks to cache hits.")):
            yield CounterMetricFamily(f"memlane_response_cache_{name}", what, value=counts[name])
class HotCacheCollector(Collector):
    """This instance's window reads and context packets through the shared hot cache
    (``redis_url``), by outcome."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("memlane_hot_cache_windows",
                                     "Window reads through the shared hot cache, by outcome.",
                                     labels=["outcome"])
        for outcome, count in self.mem.hot_window_counts.items():
            family.add_metric([outcome], count)
        yield family
        packets = CounterMetricFamily("memlane_hot_cache_packets",
                                      "Context packets through the shared hot cache: hits, misses, "
                                      "and misses whose packet was kept for every instance.",
                                      labels=["outcome"])
        for outcome, count in self.mem.hot_packet_counts.items():
            packets.add_metric([outcome], count)
        yield packets


class BusCollector(Collector):
    """The change-event bus: its kind, this instance's published commits, the outbox's
    newest event id, how far this instance's followers got and how far behind they are."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        if not self.mem.enabled or not isinstance(self.mem.store, EventSource):
            return
        figures = self.mem.bus.figures()
        info = GaugeMetricFamily("memlane_bus_info", "The change-event bus in use (1, labelled by kind).",
                                 labels=["kind"])
        info.add_metric([figures["kind"]], 1)
        yield info
        yield CounterMetricFamily("memlane_bus_published", "Commits this instance announced on the bus.",
                                  value=figures["published"])
        for name, what in (
            ("last_event_id", "The newest change event id in the outbox."),
            ("seen_event_id", "The furthest event id this instance's followers handed out."),
            ("followers", "Readers following the outbox in this instance (SSE streams, subscriptions)."),
            ("lag_events", "Event ids the slowest follower is behind the outbox."),
            ("lag_seconds", "Age of the oldest event a follower has not handed out yet."),
        ):
            yield GaugeMetricFamily(f"memlane_bus_{name}", what, value=float(figures[name] or 0))


def _backlog_reader(mem: Memory, kind: str) -> Callable[[], float]:
    """One kind of ``mem.backlog()``: counted when scraped (an indexed range count each)."""

    def read() -> float:
        return float(mem.backlog().get(kind, 0))

    return read


class Metrics:
    def __init__(self, mem: Memory) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "memlane_http_requests", "HTTP requests served.", ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memlane_http_request_duration_seconds", "Time to answer an HTTP request.",
            ["method", "route"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        self.messages = Counter(
            "memlane_messages_stored", "Messages durably stored through this server.", registry=self.registry
        )
        self.queue = Gauge(
            "memlane_embedder_queue_depth", "Messages waiting to be embedded.", registry=self.registry
        )
        self.queue.set_function(_queue_depth_reader(mem))
        self.pending = Gauge(
            "memlane_pending_writes", "Messages held in memory while storage fails (fail-open mode).",
            registry=self.registry,
        )
        self.pending.set_function(lambda: float(mem.pending_writes))
        self.backlog = Gauge(
            "memlane_backlog_vectors", "Stored messages whose vector background work has not made yet.",
            registry=self.registry,
        )
        self.backlog.set_function(_backlog_reader(mem, "vectors"))
        self.keyword_backlog = Gauge(
            "memlane_backlog_keywords", "Stored messages not yet in the keyword index (SQLite writes "
            "their keyword row just after them).", registry=self.registry,
        )
        self.keyword_backlog.set_function(_backlog_reader(mem, "keywords"))
        mem.add_observer(self._on_stored)
        self.registry.register(ResponseCacheCollector(mem))
        self.registry.register(HotCacheCollector(mem))
        self.registry.register(BusCollector(mem))

    def _on_stored(self, session: Session, stored: list[MemMessage]) -> None:
        self.messages.inc(len(stored))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts and times every request by route template (not raw path: ids would explode labels)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = [500]

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = _route_label(scope)
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, route, str(status[0])).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)


def _route_label(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    raw = str(scope.get("path", ""))
    if raw.startswith(("/static/", "/static-docs/")):
        return raw[: raw.index("/", 1)]
    if raw.startswith("/mcp"):
        return "/mcp"
    return "unmatched"
