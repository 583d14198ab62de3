"""The ingress's Prometheus metrics (`batchline_` prefix), served on METRICS_PORT (9101)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from batchline import lifecycle
from batchline.broker import Broker
from batchline.errors import BatchlineError, InvalidArgument, QueueFull, Unavailable
from ingress.backlog import Backlog

SUBMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

SUBMITS = Counter(
    "batchline_submits",
    "Jobs submitted, by RPC and outcome (accepted, deduplicated, invalid, queue_full, unavailable, ...)",
    ["rpc", "outcome"],
)
SUBMIT_SECONDS = Histogram(
    "batchline_submit_seconds",
    "Submit and SubmitBatch handling time, by RPC",
    ["rpc"],
    buckets=SUBMIT_BUCKETS,
)
SUBMIT_GROUP_JOBS = Histogram(
    "batchline_submit_group_jobs",
    "Single Submits stored and published together (one group commit)",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
CANCELLED = Counter(
    "batchline_jobs_cancelled",
    "Jobs cancelled by a client before they finished (the batcher counts the rest)",
)
QUEUE_DEPTH = Gauge("batchline_queue_depth", "Messages ready in the request queue (sampled)")
DEAD_LETTER_DEPTH = Gauge("batchline_dead_letter_depth", "Messages in the dead-letter queue (sampled)")
DRAIN_RATE = Gauge("batchline_queue_drain_rate", "Jobs leaving the queue per second, over the last 30 s")
OLDEST_QUEUED_SECONDS = Gauge(
    "batchline_queue_oldest_age_seconds", "How long the oldest job still QUEUED has waited (sampled)"
)
DRAIN_SECONDS = Gauge(
    "batchline_queue_drain_seconds", "Time to empty the queue at the measured drain rate (-1: none measured)"
)

OUTCOMES: dict[type[BatchlineError], str] = {
    InvalidArgument: "invalid",
    QueueFull: "queue_full",
    Unavailable: "unavailable",
}


@dataclass
class Outcome:
    name: str = "accepted"
    jobs: int = 1


@contextmanager
def measured(rpc: str) -> Iterator[Outcome]:
    """Count the call's jobs by outcome and time it; the caller may rename a success."""
    outcome = Outcome()
    started = time.perf_counter()
    try:
        yield outcome
    except BatchlineError as exc:
        outcome.name = OUTCOMES.get(type(exc), exc.code.name.lower())
        raise
    finally:
        SUBMITS.labels(rpc, outcome.name).inc(outcome.jobs)
        SUBMIT_SECONDS.labels(rpc).observe(time.perf_counter() - started)


async def sample_queue(broker: Broker, backlog: Backlog, stop: asyncio.Event, every_s: float = 5.0) -> None:
    """Keep the queue gauges fresh (one passive declare per interval)."""
    while not stop.is_set():
        with contextlib.suppress(BatchlineError):
            ready, dead = await broker.depth()
            oldest_s = await backlog.oldest_age_s()
            drain = backlog.drain_s(ready)
            # Set together, with no await between, so a scrape never sees half a sample.
            QUEUE_DEPTH.set(ready)
            DEAD_LETTER_DEPTH.set(dead)
            OLDEST_QUEUED_SECONDS.set(oldest_s)
            DRAIN_RATE.set(backlog.rate() or 0.0)
            DRAIN_SECONDS.set(-1.0 if drain is None else drain)
        await lifecycle.pause(stop, every_s)
