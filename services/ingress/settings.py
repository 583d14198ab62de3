"""Ingress knobs, read once from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchline import names
from batchline.access import KeyRing
from batchline.settings import BrokerSettings, StoreSettings, env_float, env_int, env_str


@dataclass(frozen=True)
class IngressSettings:
    host: str = "0.0.0.0"
    port: int = names.INGRESS_PORT
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    # Submit/SubmitBatch calls in progress at once; past it, RESOURCE_EXHAUSTED at once.
    # Raising it lets more calls wait on Redis and RabbitMQ; lowering it sheds load sooner.
    max_inflight: int = 2048
    # After RabbitMQ refuses a publish (queue full), refuse new jobs at once for this long,
    # without a round trip to Redis or RabbitMQ: under overload a refusal then costs next to
    # nothing instead of two round trips. Longer sheds load more cheaply; a full queue loses
    # nothing by it (it holds far more than drains in this time). After it one call asks again,
    # and the others are refused at once until RabbitMQ answers it. 0 turns both off.
    queue_full_hold_s: float = 0.1
    # Longest text accepted, in characters after trimming.
    max_text_chars: int = 2000
    # Most texts in one SubmitBatch.
    max_batch_items: int = 256
    # On SIGTERM, how long running calls may finish before they are cancelled.
    shutdown_grace_s: float = 10.0
    # Prometheus /metrics port (0 = do not serve metrics).
    metrics_port: int = 0
    # API_KEYS / API_KEYS_FILE: when set, every call needs one of these keys (batchline.access).
    keys: KeyRing | None = None
    # INGRESS_PROCESSES: processes serving the port together (ingress/processes.py); one
    # Python process computes on one core.
    processes: int = 1
    # INGRESS_REUSE_PORT: listen with SO_REUSEPORT, beside other ingress processes (set for
    # the processes INGRESS_PROCESSES starts; a taken port is otherwise an error).
    reuse_port: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> IngressSettings:
        return cls(
            host=env_str(env, "HOST", "0.0.0.0"),
            port=env_int(env, "INGRESS_PORT", names.INGRESS_PORT, minimum=0),
            broker=BrokerSettings.from_env(env),
            store=StoreSettings.from_env(env),
            max_inflight=env_int(env, "MAX_INFLIGHT", 2048, minimum=1),
            queue_full_hold_s=env_float(env, "QUEUE_FULL_HOLD_MS", 100.0, minimum=0) / 1000,
            max_text_chars=env_int(env, "MAX_TEXT_CHARS", 2000, minimum=1),
            max_batch_items=env_int(env, "MAX_BATCH_ITEMS", 256, minimum=1),
            shutdown_grace_s=env_float(env, "SHUTDOWN_GRACE_S", 10.0, minimum=0),
            keys=KeyRing.from_env(env),
            metrics_port=env_int(env, "METRICS_PORT", 9101, minimum=0),
            processes=env_int(env, "INGRESS_PROCESSES", 1, minimum=1),
            reuse_port=env_int(env, "INGRESS_REUSE_PORT", 0, minimum=0) > 0,
        )
