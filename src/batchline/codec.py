"""The job record and the messages around it: building, ranking and (de)serialising them."""

from __future__ import annotations

import uuid

from google.protobuf.timestamp_pb2 import Timestamp

from batchline import names
from batchline.errors import InvalidArgument
from batchline.v1 import job_pb2

Job = job_pb2.Job
JobStatus = job_pb2.JobStatus

QUEUED = job_pb2.JOB_STATUS_QUEUED
RUNNING = job_pb2.JOB_STATUS_RUNNING
DONE = job_pb2.JOB_STATUS_DONE
FAILED = job_pb2.JOB_STATUS_FAILED
CANCELLED = job_pb2.JOB_STATUS_CANCELLED
TERMINAL = frozenset({DONE, FAILED, CANCELLED})


def rank(status: int) -> int:
    """Order of states for the forward-only rule: QUEUED 1 < RUNNING 2 < any terminal 3.

    The Lua scripts in `redis_store` encode the same rule as `math.min(status, 3)`.
    """
    return min(int(status), 3)


# The Job.sequence of a job whose Submit returned: it was stored QUEUED. A watcher that saw the
# Submit succeed asks WatchJob for what comes after it (after_sequence) and skips one message.
ACCEPTED_SEQUENCE = rank(QUEUED)


def is_terminal(status: int) -> bool:
    return status in TERMINAL


def status_key(status: int) -> str:
    """'JOB_STATUS_DONE' for JOB_STATUS_DONE: the key of per-status counters."""
    return job_pb2.JobStatus.Name(status)  # type: ignore[arg-type]


def status_name(status: int) -> str:
    """'DONE' for JOB_STATUS_DONE, for logs and people."""
    return job_pb2.JobStatus.Name(status).removeprefix("JOB_STATUS_")  # type: ignore[arg-type]


def new_job_id() -> str:
    return str(uuid.uuid4())


def check_job_id(job_id: str) -> None:
    """Job ids are UUIDs; anything else cannot name a job."""
    if not job_id:
        raise InvalidArgument.field("job_id", "is required")
    if len(job_id) > 64:
        raise InvalidArgument.field("job_id", "is not a job id (too long)")


def now_ts() -> Timestamp:
    ts = Timestamp()
    ts.GetCurrentTime()
    return ts


def ts_from_seconds(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def seconds(ts: Timestamp) -> float:
    """Unix time in seconds of a Timestamp (0.0 when unset)."""
    return ts.seconds + ts.nanos / 1e9


def queued_job(task: job_pb2.InferenceTask) -> Job:
    """The record ingress stores before publishing `task`."""
    job = Job(
        job_id=task.job_id,
        status=QUEUED,
        priority=task.priority,
        text_chars=len(task.text),
        owner=task.owner,
    )
    job.trace.accepted_at.CopyFrom(task.accepted_at)
    if task.HasField("deadline"):
        job.deadline.CopyFrom(task.deadline)
    return job


def status_url(job_id: str) -> str:
    return names.STATUS_URL.format(job_id=job_id)


def watch_url(job_id: str) -> str:
    return names.WATCH_URL.format(job_id=job_id)


def encode_record(job: Job) -> bytes:
    """The bytes a store keeps for `job`, after stamping its sequence (its state's rank)."""
    job.sequence = rank(job.status)
    return job.SerializeToString()


def encode_event(job: Job) -> bytes:
    """One job's change as a JobEvents message; several of these, concatenated, are one."""
    return job_pb2.JobEvents(jobs=[job]).SerializeToString()


def decode_events(data: bytes) -> list[Job]:
    return list(job_pb2.JobEvents.FromString(data).jobs)
