"""One subscription to the event channel, routed in memory to the watchers of each job."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.trace import SpanKind

from batchline import codec, tracing
from batchline.codec import Job
from batchline.errors import QueueFull
from batchline.store import JobStore
from stream import metrics

log = logging.getLogger(__name__)

RESYNC_READ = 256  # jobs re-read per Redis command after a resubscription


class Watcher:
    """A bounded mailbox of one WatchJob call."""

    def __init__(self, job_id: str, capacity: int) -> None:
        self.job_id = job_id
        self.events: asyncio.Queue[Job] = asyncio.Queue(maxsize=capacity)
        self.overflowed = False

    def offer(self, job: Job) -> None:
        try:
            self.events.put_nowait(job)
        except asyncio.QueueFull:
            # Never grow: mark it, and the servicer ends this stream with a clear status.
            if not self.overflowed:
                log.warning("watcher too slow; its stream will be ended", extra={"job_id": self.job_id})
            self.overflowed = True


class Fanout:
    def __init__(self, store: JobStore, watcher_buffer: int, max_watchers: int) -> None:
        self._store = store
        self._capacity = watcher_buffer
        self._max_watchers = max_watchers
        self._watchers: dict[str, set[Watcher]] = defaultdict(set)
        self.count = 0
        self.subscribed = asyncio.Event()

    @contextmanager
    def watch(self, job_id: str) -> Iterator[Watcher]:
        """Register interest; do this before reading the current state so nothing slips by."""
        if self.count >= self._max_watchers:
            raise QueueFull("too many watchers on this stream instance", retry_after_s=1.0)
        watcher = Watcher(job_id, self._capacity)
        self._watchers[job_id].add(watcher)
        self.count += 1
        metrics.WATCHERS.inc()
        try:
            yield watcher
        finally:
            self.count -= 1
            metrics.WATCHERS.dec()
            watchers = self._watchers[job_id]
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[job_id]

    async def run(self) -> None:
        """Route every event to its job's watchers, forever."""
        async for job in self._store.events(on_subscribed=self._resync):
            metrics.EVENTS.inc()
            changed = _changed_at(job)
            if changed:
                metrics.FANOUT_LAG.observe(max(0.0, time.time() - changed))
            watchers = self._watchers.get(job.job_id, ())
            # The job's trace goes on here: this state handed to its watchers on this instance.
            with tracing.span(
                "deliver",
                SpanKind.CONSUMER,
                parent={"traceparent": job.trace.traceparent},
                attributes={"batchline.job_id": job.job_id, "batchline.watchers": len(watchers)},
            ):
                for watcher in watchers:
                    watcher.offer(job)
                    metrics.DELIVERED.inc()

    async def _resync(self) -> None:
        """After (re)subscribing, re-read every watched job: events published while we were
        not subscribed would otherwise be lost. Watchers drop what they have already seen."""
        self.subscribed.set()
        watched = list(self._watchers)
        for start in range(0, len(watched), RESYNC_READ):
            for job in await self._store.get_many(watched[start : start + RESYNC_READ]):
                if job is not None:
                    for watcher in self._watchers.get(job.job_id, ()):
                        watcher.offer(job)


def _changed_at(job: Job) -> float:
    """When the job reached its current state, from its own trace (0 if unknown)."""
    trace = job.trace
    for stamp in (trace.finished_at, trace.started_at, trace.accepted_at):
        if stamp.seconds:
            return codec.seconds(stamp)
    return 0.0
