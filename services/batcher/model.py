"""The model interface, and the choice of backend."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from batcher.settings import ModelSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prediction:
    label: str
    score: float
    scores: list[tuple[str, float]]  # every label, most probable first
    input_tokens: int
    truncated: bool


@dataclass(frozen=True)
class Encoded:
    """One input, tokenized once when it arrives: the batch policy reads its length, the
    forward pass its ids."""

    text: str
    ids: Sequence[int]  # token ids after truncation (empty for a backend with no tokenizer)
    tokens: int  # length in tokens, special tokens included, after truncation
    truncated: bool  # cut at the model's limit


@dataclass(frozen=True)
class BatchOutput:
    predictions: list[Prediction]  # one per input, in order
    real_tokens: int  # non-padding tokens in the batch
    padded_tokens: int  # batch size x longest sequence (a packed pass pads only its attention)


class Model(Protocol):
    name: str
    # CPU threads one pass may use; 0 when its passes do not run on CPU threads (CUDA, the
    # simulated model). The batcher runs that many threads' worth of passes (batcher/lanes.py).
    threads: int

    def use_threads(self, threads: int) -> None:
        """Compute the passes the calling thread runs from now on with `threads` threads."""

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        """Tokenize (fast, about 1% of a pass): once per job, on arrival."""

    def work(self, size: int, longest: int, real: int) -> float:
        """What a pass over `size` inputs, the longest `longest` tokens and `real` tokens in all,
        computes, in tokens (size x longest for a padded pass; about `real` for a packed one).
        The batcher fits the pass time to this, and the batch policy weighs cuts by it."""

    def predict(self, batch: Sequence[Encoded]) -> BatchOutput:
        """One forward pass over `batch` (padded to its longest, or packed). Blocking: runs in
        a model lane's thread (batcher/lanes.py), never on the event loop; two lanes may call it
        at once."""

    def warm_up(self, max_batch_size: int) -> list[tuple[int, int, float]]:
        """Run the shapes traffic will use once (the first call at a new shape is slow), before
        health turns SERVING; returns the (size, longest, seconds) measured after warming."""


def padded_work(size: int, longest: int, real: int) -> float:
    """`Model.work` of a pass padded to its longest: every padded token is computed."""
    return size * longest


def packed_work(size: int, longest: int, real: int, dim: int, hidden: int) -> float:
    """`Model.work` of a packed pass (batcher/packed.py) of a transformer of width `dim` and
    feed-forward width `hidden`, in token-passes of the linear maps: the real tokens, plus the
    padded attention (per sentence of L tokens and each layer, 4 L^2 d multiply-adds against a
    token's 8 d^2 + 4 d h in the linear maps)."""
    return real + size * longest * longest / (2 * dim + hidden)


def predict_texts(model: Model, texts: Sequence[str]) -> BatchOutput:
    """Encode and run in one call (tests, benchmarks)."""
    return model.predict(model.encode(texts))


class ModelError(RuntimeError):
    """The forward pass failed for this batch."""


def load_model(settings: ModelSettings) -> Model:
    """The configured backend; with `auto`, the real model when it can run offline here."""
    backend = settings.backend
    if backend == "auto":
        backend, why = _auto_backend(settings)
        log.warning("MODEL_BACKEND=auto chose %s: %s", backend, why)
    if backend == "hf":
        from batcher.hf import HFModel

        return HFModel(settings)
    from batcher.simulated import SimulatedModel

    return SimulatedModel(settings.sim_fixed_ms, settings.sim_per_token_ms)


def _auto_backend(settings: ModelSettings) -> tuple[str, str]:
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        return "simulated", f"{', '.join(missing)} not installed"
    from batcher.hf import weights_available

    source = settings.model_path or settings.model_id
    if weights_available(settings):
        return "hf", f"weights of {source} found on disk"
    return "simulated", (
        f"no weights for {source} on disk; set MODEL_PATH to a local model directory "
        f"or fetch {settings.model_id} once into the Hugging Face cache"
    )
