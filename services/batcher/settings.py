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
    # fp32, or bf16 (weights converted; on CUDA, or a CPU with native bf16; else fp32).
    precision: str = "fp32"
    # packed: DistilBERT computes the real tokens only, no padding (batcher/packed.py);
    # padded: every model's own forward over the batch padded to its longest.
    forward: str = "packed"
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
        precision = env_str(env, "PRECISION", "fp32")
        if precision not in {"fp32", "bf16"}:
            raise SettingsError(f"PRECISION={precision!r}: choose fp32 or bf16")
        forward = env_str(env, "FORWARD", "packed")
        if forward not in {"packed", "padded"}:
            raise SettingsError(f"FORWARD={forward!r}: choose packed or padded")
        return cls(
            backend=backend,
            precision=precision,
            forward=forward,
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
    # with whatever arrived while the previous batch computed. MAX_WAIT_MS=auto (the default):
    # wait only when the forward-time model and the arrival rate say waiting finishes the jobs
    # sooner in total (a pass's fixed cost dominating, as on a GPU), never past MAX_WAIT_CAP_MS.
    max_wait_ms: float = 50.0
    adaptive_wait: bool = True
    # Budget for one pass in padded tokens (size x longest): long inputs ride in smaller
    # batches so one pass stays short. 0 = no budget.
    max_batch_tokens: int = 4096
    # Batch jobs with neighbours of similar token length (less padding); the oldest job always
    # seeds the next batch, so long inputs are never starved.
    length_aware: bool = True
    # ...but only when grouping saves at least this share of the forward time of FIFO's batches
    # of the same jobs (urgency order: priority, deadline, arrival), since a job grouping leaves
    # behind waits a pass longer. The packed pass saves 0.3-0.5% by grouping reviews, so it keeps
    # their order and FIFO's tail; a padded pass (20-33%), or long inputs whose attention pads,
    # groups (docs/benchmarks/group-saving/results.txt). 0 = group whatever it saves.
    group_min_saving: float = 0.02
    # Waiting this long raises a job's priority by one level, so low priority cannot starve.
    priority_aging_ms: float = 100.0
    # Unsettled deliveries RabbitMQ hands this batcher, and the pool a batch is chosen from;
    # at least 4 x max_batch_size or batches never fill. The default, 8 x, leaves a backlog's
    # batch about 7 x max_batch_size jobs to choose neighbours in length from (the finished
    # batch is still held while it is stored): padding 0.84-0.91 -> 0.92-0.95 at saturation
    # against 4 x (docs/benchmarks/prefetch-ab.md).
    prefetch: int = 128
    # Forward passes that may run at once, each on its share of the model's CPU threads; a pass
    # that runs alone at light load takes them all (batcher/lanes.py). 0 = auto: two when the
    # model computes on two CPU threads or more, else one (CUDA, the simulated model).
    model_lanes: int = 0
    # Name in traces and statistics; unique per replica.
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    # gRPC health port (0 = do not serve health).
    health_port: int = 0
    # Prometheus /metrics port (0 = do not serve metrics).
    metrics_port: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.group_min_saving < 1:
            raise SettingsError(
                f"GROUP_MIN_SAVING={self.group_min_saving} must be a share of the time, >= 0 and < 1"
            )
        if self.prefetch < 4 * self.max_batch_size:
            raise SettingsError(
                f"PREFETCH={self.prefetch} must be >= 4 x MAX_BATCH_SIZE ({4 * self.max_batch_size}) "
                "or batches never fill"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> BatcherSettings:
        max_batch_size = env_int(env, "MAX_BATCH_SIZE", 16, minimum=1)
        wait = env_str(env, "MAX_WAIT_MS", "auto")
        adaptive = wait == "auto"
        max_wait_ms = (
            env_float(env, "MAX_WAIT_CAP_MS", 50.0, minimum=0)
            if adaptive
            else env_float(env, "MAX_WAIT_MS", 0.0, minimum=0)
        )
        return cls(
            broker=BrokerSettings.from_env(env),
            store=StoreSettings.from_env(env),
            model=ModelSettings.from_env(env),
            max_batch_size=max_batch_size,
            max_wait_ms=max_wait_ms,
            adaptive_wait=adaptive,
            max_batch_tokens=env_int(env, "MAX_BATCH_TOKENS", 4096, minimum=0),
            length_aware=env_str(env, "LENGTH_AWARE", "1") not in {"0", "false", "no"},
            group_min_saving=env_float(env, "GROUP_MIN_SAVING", 0.02, minimum=0),
            priority_aging_ms=env_float(env, "PRIORITY_AGING_MS", 100.0, minimum=0),
            prefetch=env_int(env, "PREFETCH", 8 * max_batch_size, minimum=1),
            model_lanes=_lanes(env),
            worker=env_str(env, "WORKER_NAME", f"{socket.gethostname()}-{os.getpid()}"),
            health_port=env_int(env, "BATCHER_HEALTH_PORT", 0, minimum=0),
            metrics_port=env_int(env, "METRICS_PORT", 9102, minimum=0),
        )


def _lanes(env: Mapping[str, str]) -> int:
    if env_str(env, "MODEL_LANES", "auto") == "auto":
        return 0
    try:
        return env_int(env, "MODEL_LANES", 0, minimum=1)
    except SettingsError as exc:
        raise SettingsError(f"{exc}; MODEL_LANES is auto or a number of lanes >= 1") from exc
