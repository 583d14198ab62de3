"""The batcher's Prometheus metrics (`batchline_` prefix), served on METRICS_PORT.

Module-level, so every Batcher in a process shares them (Prometheus adds the instance label).
Buckets cover what a batch really takes: sub-millisecond queue waits on an idle system up to
tens of seconds under a backlog; passes from a millisecond (simulated) to seconds (long inputs).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
SIZE_BUCKETS = (1, 2, 4, 6, 8, 10, 12, 14, 16, 24, 32, 48, 64)
TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)

BATCHES = Counter("batchline_batches", "Batches run, by why they closed", ["close_reason"])
PASSES = Counter(
    "batchline_passes",
    "Forward passes, by where they ran: wide (alone, on all the model's threads) or a lane (its share)",
    ["width"],
)
BATCH_SIZE = Histogram("batchline_batch_size", "Jobs per forward pass", buckets=SIZE_BUCKETS)
BATCH_PADDED_TOKENS = Histogram(
    "batchline_batch_padded_tokens", "Padded tokens per forward pass (size x longest)", buckets=TOKEN_BUCKETS
)
REAL_TOKENS = Counter("batchline_real_tokens", "Non-padding tokens computed")
PADDED_TOKENS = Counter("batchline_padded_tokens", "Tokens computed including padding")
INFERENCE_SECONDS = Histogram(
    "batchline_inference_seconds", "Forward-pass time per batch", buckets=LATENCY_BUCKETS
)
QUEUE_WAIT_SECONDS = Histogram(
    "batchline_queue_wait_seconds",
    "Per job: accepted by ingress -> its batch started",
    buckets=LATENCY_BUCKETS,
)
JOB_SECONDS = Histogram(
    "batchline_job_seconds",
    "Per job computed: accepted by ingress -> result stored (what a watcher waits, less fan-out)",
    buckets=LATENCY_BUCKETS,
)
JOBS = Counter(
    "batchline_batcher_jobs",
    "Jobs the batcher finished, by outcome (done, failed, expired, skipped, poison)",
    ["outcome"],
)
REDELIVERIES = Counter("batchline_redeliveries", "Deliveries that were not a task's first")
