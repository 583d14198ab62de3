"""Stream knobs, read once from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchline import names
from batchline.access import KeyRing
from batchline.settings import StoreSettings, env_float, env_int, env_str


@dataclass(frozen=True)
class StreamSettings:
    host: str = "0.0.0.0"
    port: int = names.STREAM_PORT
    store: StoreSettings = field(default_factory=StoreSettings)
    # Events buffered per watcher; a watcher further behind is ended (RESOURCE_EXHAUSTED).
    # A job has at most 3 changes, so a small buffer is plenty for a healthy client.
    watcher_buffer: int = 16
    # Heartbeat on an idle stream; keep well inside the proxy's stream idle timeout.
    heartbeat_s: float = 10.0
    # Most watchers at once; past it, WatchJob answers RESOURCE_EXHAUSTED.
    max_watchers: int = 10_000
    shutdown_grace_s: float = 5.0
    # Prometheus /metrics port (0 = do not serve metrics).
    metrics_port: int = 0
    # API_KEYS / API_KEYS_FILE: when set, every call needs one of these keys (batchline.access).
    keys: KeyRing | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> StreamSettings:
        return cls(
            host=env_str(env, "HOST", "0.0.0.0"),
            port=env_int(env, "STREAM_PORT", names.STREAM_PORT, minimum=0),
            store=StoreSettings.from_env(env),
            watcher_buffer=env_int(env, "WATCHER_BUFFER", 16, minimum=1),
            heartbeat_s=env_float(env, "HEARTBEAT_S", 10.0, minimum=0.05),
            max_watchers=env_int(env, "MAX_WATCHERS", 10_000, minimum=1),
            shutdown_grace_s=env_float(env, "SHUTDOWN_GRACE_S", 5.0, minimum=0),
            keys=KeyRing.from_env(env),
            metrics_port=env_int(env, "METRICS_PORT", 9103, minimum=0),
        )
