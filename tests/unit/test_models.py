from __future__ import annotations

from pathlib import Path

import pytest

from batcher.hf import HFModel, weights_available
from batcher.model import load_model
from batcher.settings import ModelSettings
from batcher.simulated import SimulatedModel, count_tokens


def test_simulated_model_reads_sentiment_and_counts_padding() -> None:
    model = SimulatedModel(fixed_ms=0, per_token_ms=0)
    out = model.predict(["I loved it, great film", "terrible service", "not good"])
    assert [p.label for p in out.predictions] == ["POSITIVE", "NEGATIVE", "NEGATIVE"]
    assert out.real_tokens == sum(p.input_tokens for p in out.predictions)
    assert out.padded_tokens == 3 * max(p.input_tokens for p in out.predictions)
    assert all(abs(sum(s for _, s in p.scores) - 1) < 1e-6 for p in out.predictions)


def test_simulated_model_truncates_at_512() -> None:
    assert count_tokens("word " * 600) == (512, True)


def test_hf_model_loads_a_local_distilbert_and_pads_to_the_longest(tiny_distilbert: Path) -> None:
    settings = ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu", torch_threads=1)
    assert weights_available(settings)
    model = load_model(settings)
    assert isinstance(model, HFModel)
    out = model.predict(["great movie", "the film was very very bad and i hated it"])
    assert len(out.predictions) == 2
    lengths = [p.input_tokens for p in out.predictions]
    assert out.padded_tokens == 2 * max(lengths) < 2 * 32
    assert out.real_tokens == sum(lengths)
    for prediction in out.predictions:
        assert prediction.label in {"POSITIVE", "NEGATIVE"}
        assert prediction.scores[0][0] == prediction.label
        assert sum(s for _, s in prediction.scores) == pytest.approx(1, abs=1e-5)
    assert model.name == tiny_distilbert.name


def test_hf_model_truncates_at_the_model_limit_and_says_so(tiny_distilbert: Path) -> None:
    model = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu"))
    [long, short] = model.predict(["good " * 100, "good"]).predictions
    assert long.truncated and long.input_tokens == 32
    assert not short.truncated


def test_auto_backend_falls_back_to_simulated_without_weights(tmp_path: Path) -> None:
    model = load_model(ModelSettings(backend="auto", model_path=str(tmp_path / "missing")))
    assert model.name == "simulated"


def test_auto_backend_takes_the_real_model_when_it_is_on_disk(tiny_distilbert: Path) -> None:
    model = load_model(ModelSettings(backend="auto", model_path=str(tiny_distilbert)))
    assert isinstance(model, HFModel)
