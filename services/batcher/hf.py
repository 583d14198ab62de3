"""DistilBERT (or any sequence classifier) through transformers, offline.

Tokenize once without padding, cut at the model's limit (and say so), one forward pass under
inference_mode: for DistilBERT over the real tokens only (`batcher.packed`), for any other
model (or FORWARD=padded) padded to the longest in the batch (never to 512).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never fetch at run time

import tokenizers
import torch
import transformers
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from batcher import packed
from batcher.model import BatchOutput, Encoded, Prediction, padded_work
from batcher.settings import ModelSettings

log = logging.getLogger(__name__)
transformers.logging.set_verbosity_error()  # type: ignore[no-untyped-call]


def weights_available(settings: ModelSettings) -> bool:
    """True when the model loads from this machine alone."""
    if settings.model_path:
        return (Path(settings.model_path) / "config.json").is_file()
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(settings.model_id, "config.json")
    except Exception:
        return False
    return isinstance(found, str)


def bare_rust_tokenizer(tokenizer: object) -> tokenizers.Tokenizer | None:
    """The fast tokenizer's own Rust tokenizer, with no truncation or padding of its own, or
    None for a tokenizer that has none. Called directly it gives the ids the transformers call
    gives for 38% less CPU (a benchmark review: 50 against 81 us, docs/benchmarks/tokenize/),
    spent on the event loop once per job, as each delivery arrives."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not isinstance(backend, tokenizers.Tokenizer):
        return None
    bare = tokenizers.Tokenizer.from_str(backend.to_str())  # a copy: transformers keeps its own settings
    bare.no_truncation()
    bare.no_padding()
    return bare


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """fp32, or bf16 where the hardware computes it natively: CUDA, or a CPU with AVX512-BF16
    or AMX (elsewhere bf16 is emulated and slower than fp32). Weights are converted, not
    autocast: converting measured faster here."""
    if precision == "fp32":
        return torch.float32
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported():
        return torch.bfloat16
    log.warning("PRECISION=bf16 asked for, but this CPU has no native bf16: running fp32")
    return torch.float32


class HFModel:
    def __init__(self, settings: ModelSettings) -> None:
        source = settings.model_path or settings.model_id
        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        self.device = resolve_device(settings.device)
        self.dtype = resolve_dtype(settings.precision, self.device)
        if self.device.type == "cuda":
            # cuDNN's attention (bf16/fp16) builds a plan the first time it meets an input shape,
            # 42-141 ms on an H200, and every batch brings new lengths: use the attention kernels
            # that need no plan (docs/benchmarks/gpu.md).
            torch.backends.cuda.enable_cudnn_sdp(False)
        # Each lane's thread sets its own count (PyTorch's intra-op setting is per thread).
        self.threads = torch.get_num_threads() if self.device.type == "cpu" else 0
        self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        self._rust_tokenizer = bare_rust_tokenizer(self.tokenizer)
        model = AutoModelForSequenceClassification.from_pretrained(source, local_files_only=True)
        self.model = model.to(device=self.device).eval()
        self._in_precision = self.dtype == torch.float32  # else converted on first use
        config = self.model.config
        self.labels = [config.id2label[i] for i in range(config.num_labels)]
        self.max_length = min(int(self.tokenizer.model_max_length), int(config.max_position_embeddings))
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self.sep_id = self.tokenizer.sep_token_id
        self.name = Path(settings.model_path).name if settings.model_path else settings.model_id
        self._packed: packed.PackedForward | None = None
        if settings.forward == "packed":
            if packed.supports(self.model):
                # Rows in groups of 16 where kernels are generated per shape (not fp32 on a CPU).
                generated = self.dtype != torch.float32 and self.device.type == "cpu"
                self._packed = packed.PackedForward(self.model, row_multiple=16 if generated else 1)
            else:
                log.warning("FORWARD=packed knows DistilBERT only, not %s: padding", config.model_type)
        log.info(
            "loaded %s on %s in %s (%d threads, %s forward, max %d tokens, labels %s)",
            source,
            self.device,
            str(self.dtype).removeprefix("torch."),
            torch.get_num_threads(),
            "packed" if self._packed else "padded",
            self.max_length,
            self.labels,
        )

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        if self._rust_tokenizer is not None:
            ids = [self._rust_tokenizer.encode(text).ids for text in texts]
        else:
            ids = self.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        encoded = []
        for text, seq in zip(texts, ids, strict=True):
            truncated = len(seq) > self.max_length
            if truncated:  # keep [CLS] ... and end with [SEP], as the model was trained
                seq = seq[: self.max_length - 1] + ([self.sep_id] if self.sep_id is not None else seq[-1:])
            encoded.append(Encoded(text, seq, len(seq), truncated))
        return encoded

    def use_threads(self, threads: int) -> None:
        torch.set_num_threads(threads)

    def _convert(self) -> None:
        """The weights in the run precision, converted on first use by a thread that runs the
        model (the first model lane's, in the batcher's warm-up): a bf16 copy made by a thread
        that never ran the model ran its passes ~20% slower here (batch 16 of reviews on 2 AMX
        cores: 69 against 56 ms)."""
        if not self._in_precision:
            self.model = self.model.to(dtype=self.dtype)
            self._in_precision = True

    def work(self, size: int, longest: int, real: int) -> float:
        """What a pass of this shape computes, in tokens: the batcher fits its time to this."""
        return (self._packed.work if self._packed else padded_work)(size, longest, real)

    def predict(self, batch: Sequence[Encoded]) -> BatchOutput:
        self._convert()
        longest = max(e.tokens for e in batch)
        with torch.inference_mode():
            logits = self._packed([e.ids for e in batch]) if self._packed else self._padded(batch, longest)
            probabilities = logits.float().softmax(dim=-1).cpu().tolist()
        predictions = []
        for probs, e in zip(probabilities, batch, strict=True):
            scores = sorted(zip(self.labels, probs, strict=True), key=lambda s: -s[1])
            predictions.append(Prediction(scores[0][0], scores[0][1], scores, e.tokens, e.truncated))
        return BatchOutput(predictions, sum(e.tokens for e in batch), longest * len(batch))

    def _padded(self, batch: Sequence[Encoded], longest: int) -> torch.Tensor:
        input_ids = torch.full((len(batch), longest), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, e in enumerate(batch):
            input_ids[row, : e.tokens] = torch.tensor(e.ids, dtype=torch.long)
            attention[row, : e.tokens] = 1
        logits: torch.Tensor = self.model(
            input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)
        ).logits
        return logits

    def warm_up(self, max_batch_size: int) -> list[tuple[int, int, float]]:
        """Every batch size up to the largest at the lengths reviews and chat messages have, each
        run once to warm and once to time (one and two jobs three times: a short pass varies
        most, and the batcher decides from them whether a lone pass takes every core). In
        bf16/fp16 the kernels are generated per input shape (a first pass at a new shape took
        1.28x a warm one at the median here, against 1.03x in fp32), so there a full batch and a
        single job are also run once at every length up to 64 tokens: the shapes a backlog and
        light load meet first."""
        sizes = sorted({1, 2, 4, 8, max_batch_size} & set(range(1, max_batch_size + 1)))
        timings = []
        for longest in [n for n in (16, 32, 64) if n <= self.max_length]:
            for size in sizes:
                batch = [Encoded("", [self.pad_id] * longest, longest, False)] * size
                self.predict(batch)
                for _ in range(3 if size <= 2 else 1):  # the short passes, noisiest, thrice
                    started = time.perf_counter()
                    self.predict(batch)
                    timings.append((size, longest, time.perf_counter() - started))
        if self.dtype != torch.float32:
            for longest in range(2, min(64, self.max_length) + 1):
                for size in {1, max_batch_size}:
                    self.predict([Encoded("", [self.pad_id] * longest, longest, False)] * size)
        return timings
