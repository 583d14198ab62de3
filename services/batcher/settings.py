"""Batcher knobs, read once from the environment."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchline.settings import (
    BrokerSettings,
    SettingsError,
    StoreSettings,
    env_float,
    env_int,
    env_str,
)


@dataclass(frozen=True)
class ModelSettings:
    # hf: DistilBERT through transformers; simulated: no weights, a calibrated cost model;
    # auto: hf when torch, transformers and the weights are on this machine, else simulated.
    backend: str = "auto"
    # Hugging Face model id, used from the local cache only (HF_HUB_OFFLINE at run time).
    model_id: str = "distilbert-base-uncased-finetuned-sst-2-english"
    # A local directory with config, weights and tokenizer; wins over model_id when set.
    model_path: str = ""
    # auto picks cuda when available, else cpu.
    device: str = "auto"
    # Threads for PyTorch's intra-op pool; 0 leaves PyTorch's default (all cores).
    torch_threads: int = 0
    # simulated: fixed cost of a forward pass, and cost per padded token, milliseconds.
    # 0 and 0 make a zero-cost model for measuring the pipeline itself.
    sim_fixed_ms: float = 6.0
    sim_per_token_ms: float = 0.12

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ModelSettings:
        backend = env_str(env, "MODEL_BACKEND", "auto")
        if backend not in {"auto", "hf", "simulated"}:
            raise SettingsError(f"MODEL_BACKEND={backend!r}: choose auto, hf or simulated")
        device = env_str(env, "DEVICE", "auto")
        if device not in {"auto", "cpu", "cuda"}:
            raise SettingsError(f"DEVICE={device!r}: choose auto, cpu or cuda")
        return cls(
            backend=backend,
            model_id=env_str(env, "MODEL_ID", cls.model_id),
            model_path=env.get("MODEL_PATH", ""),
            device=device,
            torch_threads=env_int(env, "TORCH_THREADS", 0, minimum=0),
            sim_fixed_ms=env_float(env, "SIM_FIXED_MS", 6.0, minimum=0),
            sim_per_token_ms=env_float(env, "SIM_PER_TOKEN_MS", 0.12, minimum=0),
        )


@dataclass(frozen=True)
class BatcherSettings:
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    # Most jobs in one forward pass. Larger amortises more per pass but each pass takes longer.
    max_batch_size: int = 16
    # How long a batch may wait for more jobs after its oldest arrived. 0 = greedy: run at once
    # with whatever arrived while the previous batch computed (best at light and heavy load).
    max_wait_ms: float = 0.0
    # Unsettled deliveries RabbitMQ hands this batcher; at least 4 x max_batch_size or
    # batches never fill.
    prefetch: int = 64
    # Name in traces and statistics; unique per replica.
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    # gRPC health port (0 = do not serve health).
    health_port: int = 0

    def __post_init__(self) -> None:
        if self.prefetch < 4 * self.max_batch_size:
            raise SettingsError(
                f"PREFETCH={self.prefetch} must be >= 4 x MAX_BATCH_SIZE ({4 * self.max_batch_size}) "
                "or batches never fill"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> BatcherSettings:
        max_batch_size = env_int(env, "MAX_BATCH_SIZE", 16, minimum=1)
        return cls(
            broker=BrokerSettings.from_env(env),
            store=StoreSettings.from_env(env),
            model=ModelSettings.from_env(env),
            max_batch_size=max_batch_size,
            max_wait_ms=env_float(env, "MAX_WAIT_MS", 0.0, minimum=0),
            prefetch=env_int(env, "PREFETCH", 4 * max_batch_size, minimum=1),
            worker=env_str(env, "WORKER_NAME", f"{socket.gethostname()}-{os.getpid()}"),
            health_port=env_int(env, "BATCHER_HEALTH_PORT", 0, minimum=0),
        )
