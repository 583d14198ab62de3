from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from batcher.hf import HFModel, weights_available
from batcher.model import Encoded, load_model, predict_texts
from batcher.packed import PackedForward
from batcher.settings import ModelSettings
from batcher.simulated import SimulatedModel, count_tokens


def test_simulated_model_reads_sentiment_and_counts_padding() -> None:
    model = SimulatedModel(fixed_ms=0, per_token_ms=0)
    out = predict_texts(model, ["I loved it, great film", "terrible service", "not good"])
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
    out = predict_texts(model, ["great movie", "the film was very very bad and i hated it"])
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
    [long, short] = predict_texts(model, ["good " * 100, "good"]).predictions
    assert long.truncated and long.input_tokens == 32
    assert not short.truncated


def test_auto_backend_falls_back_to_simulated_without_weights(tmp_path: Path) -> None:
    model = load_model(ModelSettings(backend="auto", model_path=str(tmp_path / "missing")))
    assert model.name == "simulated"


def test_auto_backend_takes_the_real_model_when_it_is_on_disk(tiny_distilbert: Path) -> None:
    model = load_model(ModelSettings(backend="auto", model_path=str(tiny_distilbert)))
    assert isinstance(model, HFModel)


# The model's arithmetic on each device this machine has: CUDA runs where a GPU is present.
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]

TEXTS = [
    "great movie",
    "the film was very very bad and i hated it",
    "not good but not terrible",
    "i loved the food and the service was excellent",
]


def test_tokenized_once_encoding_carries_length_and_truncation(tiny_distilbert: Path) -> None:
    model = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu"))
    short, long = model.encode(["good", "good " * 100])
    assert short.tokens == len(short.ids) == 3 and not short.truncated  # [CLS] good [SEP]
    assert long.tokens == len(long.ids) == 32 and long.truncated
    assert long.ids[-1] == model.sep_id


def test_encoding_gives_the_ids_the_transformers_tokenizer_gives(tiny_distilbert: Path) -> None:
    """The Rust tokenizer called directly (the fast path) against the transformers call."""
    model = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu"))
    texts = [*TEXTS, "Great MOVIE!!", "good " * 100, "zzz qqq", "  the  film  "]
    expected = model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
    assert model._rust_tokenizer is not None
    for text, seq, encoded in zip(texts, expected, model.encode(texts), strict=True):
        cut = seq if len(seq) <= model.max_length else [*seq[: model.max_length - 1], model.sep_id]
        assert list(encoded.ids) == cut, text


@pytest.mark.parametrize("device", DEVICES)
def test_the_packed_pass_computes_what_the_padded_pass_computes(tiny_distilbert: Path, device: str) -> None:
    def model(forward: str) -> HFModel:
        settings = ModelSettings(
            backend="hf", model_path=str(tiny_distilbert), device=device, forward=forward
        )
        loaded = HFModel(settings)
        torch.manual_seed(7)  # weights large enough that every token moves the result, the same in both
        with torch.no_grad():
            for weight in loaded.model.parameters():
                weight.normal_(0.0, 0.5)
        return loaded

    packed, padded = model("packed"), model("padded")
    assert packed._packed is not None and padded._packed is None
    batch = packed.encode([*TEXTS, "good " * 100, "bad"])  # mixed lengths, one cut at the limit
    with torch.inference_mode():
        together = packed._packed([e.ids for e in batch])
        reference = padded._padded(batch, max(e.tokens for e in batch))
        alone = torch.cat([packed._packed([e.ids]) for e in batch])
    assert (reference.max(0).values - reference.min(0).values).min() > 0.1  # the inputs tell apart
    torch.testing.assert_close(together, reference, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=1e-4)  # no token sees another sentence
    # Rows rounded up to 16 (as in bf16 on a CPU): the same logits, and every linear map sees a
    # multiple of 16 rows but the last layer's, which reads the [CLS] rows only.
    bucketed = PackedForward(packed.model, row_multiple=16)
    seen: list[int] = []
    hook = packed.model.distilbert.transformer.layer[0].attention.k_lin.register_forward_hook(
        lambda _module, inputs, _output: seen.append(inputs[0].shape[0])
    )
    with torch.inference_mode():
        rounded = bucketed([e.ids for e in batch])
        rounded_alone = torch.cat([bucketed([e.ids]) for e in batch])
    hook.remove()
    assert sum(e.tokens for e in batch) % 16 and all(rows % 16 == 0 for rows in seen)
    torch.testing.assert_close(rounded, together, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(rounded_alone, together, atol=1e-5, rtol=1e-4)
    out = packed.predict(batch)
    assert out.padded_tokens == len(batch) * 32 and out.real_tokens == sum(e.tokens for e in batch)
    # What the batcher fits the pass time to: real tokens, plus the padded attention's small share.
    attention_share = 6 * 32 * 32 / (2 * 32 + 64)  # the tiny model: dim 32, hidden 64
    assert packed.work(6, 32, 100) == pytest.approx(100 + attention_share)
    assert padded.work(6, 32, 100) == 6 * 32


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_probabilities_stay_close_to_fp32(tiny_distilbert: Path, device: str) -> None:
    fp32 = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device=device))
    bf16 = HFModel(
        ModelSettings(backend="hf", model_path=str(tiny_distilbert), device=device, precision="bf16")
    )
    assert fp32.device.type == bf16.device.type == device
    if device == "cuda":  # cuDNN's attention plans each new shape (~50-140 ms): docs/benchmarks/gpu.md
        assert not torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    # fp32 where the CPU has no native bf16; fp16 on a GPU without bf16
    assert bf16.dtype in (
        {torch.bfloat16, torch.float16} if device == "cuda" else {torch.bfloat16, torch.float32}
    )
    assert next(bf16.model.parameters()).dtype == torch.float32  # not yet: its first user converts it
    exact = predict_texts(fp32, TEXTS).predictions
    with ThreadPoolExecutor(1) as model_thread:  # as the batcher runs it
        rounded = model_thread.submit(predict_texts, bf16, TEXTS).result().predictions
    assert next(bf16.model.parameters()).dtype == bf16.dtype
    for a, b in zip(exact, rounded, strict=True):
        probabilities_a, probabilities_b = dict(a.scores), dict(b.scores)
        for label, p in probabilities_a.items():
            assert abs(p - probabilities_b[label]) <= 0.02, (label, p, probabilities_b[label])


def test_warm_up_runs_every_shape_and_reports_timings(tiny_distilbert: Path) -> None:
    model = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu"))
    timings = model.warm_up(max_batch_size=4)
    assert {(size, longest) for size, longest, _ in timings} == {
        (size, longest) for size in (1, 2, 4) for longest in (16, 32)
    }
    assert all(seconds > 0 for _, _, seconds in timings)


def test_warm_up_in_bf16_also_runs_every_length_a_backlog_or_one_job_meets(tiny_distilbert: Path) -> None:
    """bf16 kernels are made per input shape: a full batch and a single job at every length up
    to the model's limit (here 32) are warm before the batcher serves. fp32 keeps the grid."""
    model = HFModel(ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu"))
    seen: list[tuple[int, int]] = []
    real_predict = model.predict

    def recording(batch):  # type: ignore[no-untyped-def]
        seen.append((len(batch), max(e.tokens for e in batch)))
        return real_predict(batch)

    model.predict = recording  # type: ignore[method-assign]
    model.warm_up(max_batch_size=4)
    assert set(seen) == {(size, longest) for size in (1, 2, 4) for longest in (16, 32)}
    seen.clear()
    model.dtype = torch.bfloat16  # as resolved on a CPU with AVX512-BF16 or AMX
    model.warm_up(max_batch_size=4)
    swept = {(size, longest) for size in (1, 4) for longest in range(2, model.max_length + 1)}
    assert swept <= set(seen)
    assert {shape for shape in seen if shape[0] == 2} == {(2, 16), (2, 32)}  # the grid only


def test_two_lanes_compute_what_one_pass_on_every_thread_computes(tiny_distilbert: Path) -> None:
    """Each lane's thread sets its own PyTorch thread count; a pass on one thread, two at once,
    gives the probabilities a pass on two threads gives."""
    settings = ModelSettings(backend="hf", model_path=str(tiny_distilbert), device="cpu", torch_threads=2)
    model = HFModel(settings)
    assert model.threads == 2
    texts = [["great movie", "awful, just awful"], ["the plot was fine", "i would watch it again"]]
    encoded = [model.encode(t) for t in texts]
    wide = [[p.score for p in model.predict(e).predictions] for e in encoded]

    def narrow(batch: list[Encoded]) -> tuple[int, list[float]]:
        model.use_threads(1)
        scores = [p.score for p in model.predict(batch).predictions]
        return torch.get_num_threads(), scores

    with ThreadPoolExecutor(max_workers=2) as lanes:
        results = list(lanes.map(narrow, encoded))
    assert [threads for threads, _ in results] == [1, 1]
    assert torch.get_num_threads() == 2  # this thread's count: untouched by the lanes'
    for (_, scores), expected in zip(results, wide, strict=True):
        assert scores == pytest.approx(expected, abs=1e-5)
