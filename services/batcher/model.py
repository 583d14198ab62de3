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
class BatchOutput:
    predictions: list[Prediction]  # one per input, in order
    real_tokens: int  # non-padding tokens in the batch
    padded_tokens: int  # batch size x longest sequence


class Model(Protocol):
    name: str

    def predict(self, texts: Sequence[str]) -> BatchOutput:
        """One forward pass over `texts`. Blocking: runs in the model thread, never on the loop."""

    def warm_up(self) -> None:
        """Run the shapes traffic will use once, so the first real batch is not the slow one."""


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
