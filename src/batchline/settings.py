"""Typed settings pieces read once from the environment by each service's `__main__`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from batchline import names


class SettingsError(ValueError):
    """A knob in the environment has a value we cannot use."""


def env_str(env: Mapping[str, str], name: str, default: str) -> str:
    """A string knob; empty counts as unset."""
    return env.get(name) or default


def env_int(env: Mapping[str, str], name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer knob, optionally bounded below."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={value} must be >= {minimum}")
    return value


def env_float(env: Mapping[str, str], name: str, default: float, *, minimum: float | None = None) -> float:
    """A number knob, optionally bounded below."""
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={raw!r} is not a number") from exc
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}={value} must be >= {minimum}")
    return value


def redact_url(url: str) -> str:
    """The URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class BrokerSettings:
    """RabbitMQ: where, which queue, and how the queue is bounded."""

    # amqp://user:pass@host:port/vhost. Empty selects the in-memory queue (embedded mode).
    amqp_url: str = ""
    # Work queue name; the dead-letter queue is this name + ".dead".
    queue: str = names.REQUEST_QUEUE
    # Ready messages the queue holds before publishes are refused (RESOURCE_EXHAUSTED), kept
    # exactly by the publisher's own count (batchline/room.py). Raising it absorbs longer
    # bursts at the cost of broker memory and older backlogs.
    max_length: int = 10_000
    # Deliveries of one message before RabbitMQ dead-letters it (a worker-killing input).
    delivery_limit: int = 5
    # How long Submit waits for RabbitMQ's confirm before answering UNAVAILABLE.
    publish_timeout_s: float = 5.0

    @property
    def dead_letter_queue(self) -> str:
        return self.queue + names.DEAD_LETTER_SUFFIX

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> BrokerSettings:
        return cls(
            amqp_url=env.get("AMQP_URL", ""),
            queue=env_str(env, "QUEUE_NAME", names.REQUEST_QUEUE),
            max_length=env_int(env, "QUEUE_MAX_LENGTH", 10_000, minimum=1),
            delivery_limit=env_int(env, "DELIVERY_LIMIT", 5, minimum=1),
            publish_timeout_s=env_float(env, "PUBLISH_TIMEOUT_S", 5.0, minimum=0.1),
        )


@dataclass(frozen=True)
class StoreSettings:
    """Redis: where, under which key prefix, and how long job records live."""

    # redis://[:password@]host:port/db. Empty selects the in-memory store (embedded mode).
    redis_url: str = ""
    # Every key and the event channel start with this; tests use a unique one each.
    key_prefix: str = names.KEY_PREFIX
    # Job records (and idempotency keys) expire this long after their last change.
    job_ttl_s: int = 24 * 3600
    # Per-command socket timeout: how fast a dead Redis turns into UNAVAILABLE.
    timeout_s: float = 2.0
    # Redis connections per process, for each of the store's two paths: the job commands
    # (create, move, read a job) on connections of their own, the rest through redis-py's pool.
    # Past it a command waits (up to timeout_s) for a free one, never fails at once: a burst of
    # calls queues instead of reading as "Redis is down".
    max_connections: int = 64

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> StoreSettings:
        return cls(
            redis_url=env.get("REDIS_URL", ""),
            key_prefix=env_str(env, "KEY_PREFIX", names.KEY_PREFIX),
            job_ttl_s=env_int(env, "JOB_TTL_S", 24 * 3600, minimum=1),
            timeout_s=env_float(env, "REDIS_TIMEOUT_S", 2.0, minimum=0.05),
            max_connections=env_int(env, "REDIS_MAX_CONNECTIONS", 64, minimum=1),
        )


def require_distributed(broker: BrokerSettings, store: StoreSettings, service: str) -> None:
    """A standalone service needs both RabbitMQ and Redis; say which is missing."""
    missing = [n for n, v in (("AMQP_URL", broker.amqp_url), ("REDIS_URL", store.redis_url)) if not v]
    if missing:
        raise SettingsError(
            f"{service} runs against RabbitMQ and Redis: set {' and '.join(missing)} "
            "(or run `python -m embedded` for the all-in-one process)"
        )
