"""Every queue, key, channel, header and port name in one place."""

from typing import Final

# RabbitMQ
REQUEST_QUEUE: Final = "inference.requests"
DEAD_LETTER_SUFFIX: Final = ".dead"  # inference.requests -> inference.requests.dead
DELIVERY_COUNT_HEADER: Final = "x-delivery-count"  # set by quorum queues on redelivery
TASK_CONTENT_TYPE: Final = "application/x-protobuf"
TASK_TYPE: Final = "batchline.v1.InferenceTask"

# Redis: every key starts with the configured prefix (KEY_PREFIX by default).
KEY_PREFIX: Final = "batchline:"
JOB_KEY: Final = "job:"  # hash {s: status number, d: Job bytes, t: place in the queue's order}
IDEMPOTENCY_KEY: Final = "idem:"  # string -> job id
EVENTS_CHANNEL: Final = "job-events"  # pub/sub, carries JobEvents bytes
STATS_WORKERS: Final = "stats:workers"  # set of worker names
STATS_WORKER: Final = "stats:worker:"  # hash per worker: batches, jobs, tokens, inference_ms
STATS_BATCH_SIZES: Final = "stats:batch-sizes"  # hash size -> batches
STATS_CLOSE_REASONS: Final = "stats:close-reasons"  # hash reason name -> batches
STATS_FINISHED: Final = "stats:finished"  # hash status name -> jobs
QUEUE_ENTERED: Final = "queue:entered"  # counter: jobs stored QUEUED; each record keeps its number (t)
QUEUE_LEFT: Final = "queue:left"  # counter: jobs that left QUEUED (started, finished, discarded)
QUEUE_WAITING: Final = "queue:waiting"  # sorted set: queued job id -> accepted at (unix seconds)

# Default ports
INGRESS_PORT: Final = 50051
STREAM_PORT: Final = 50052
EMBEDDED_PORT: Final = 50051

# REST paths that answers point to (served through Envoy)
STATUS_URL: Final = "/v1/jobs/{job_id}"
WATCH_URL: Final = "/v1/jobs/{job_id}:watch"
