"""The stream service's Prometheus metrics (`batchline_` prefix), served on METRICS_PORT (9103)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

WATCHERS = Gauge("batchline_watchers", "WatchJob streams open now")
EVENTS = Counter("batchline_events", "Job events received from Redis pub/sub")
DELIVERED = Counter("batchline_events_delivered", "Job events handed to watchers")
FANOUT_LAG = Histogram(
    "batchline_fanout_lag_seconds",
    "From a job's state change (its trace timestamp) to the stream service routing the event",
    buckets=LAG_BUCKETS,
)
READ_GROUP_JOBS = Histogram(
    "batchline_watch_read_group_jobs",
    "Jobs whose current state one read fetched for newly opened watches",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
