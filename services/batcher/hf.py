"""DistilBERT (or any sequence classifier) through transformers, offline.

Tokenize once without padding, cut at the model's limit (and say so), pad to the longest in
the batch (never to 512), one forward pass under inference_mode.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never fetch at run time

import torch
import transformers
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from batcher.model import BatchOutput, Prediction
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


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


class HFModel:
    def __init__(self, settings: ModelSettings) -> None:
        source = settings.model_path or settings.model_id
        if settings.torch_threads:
            torch.set_num_threads(settings.torch_threads)
        self.device = resolve_device(settings.device)
        self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
        model = AutoModelForSequenceClassification.from_pretrained(source, local_files_only=True)
        self.model = model.to(self.device).eval()
        config = self.model.config
        self.labels = [config.id2label[i] for i in range(config.num_labels)]
        self.max_length = min(int(self.tokenizer.model_max_length), int(config.max_position_embeddings))
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self.sep_id = self.tokenizer.sep_token_id
        self.name = Path(settings.model_path).name if settings.model_path else settings.model_id
        log.info(
            "loaded %s on %s (%d threads, max %d tokens, labels %s)",
            source,
            self.device,
            torch.get_num_threads(),
            self.max_length,
            self.labels,
        )

    def _encode(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        ids: list[list[int]] = self.tokenizer(list(texts), add_special_tokens=True, truncation=False)[
            "input_ids"
        ]
        truncated = [len(seq) > self.max_length for seq in ids]
        cut = [
            seq
            if not t
            else seq[: self.max_length - 1] + ([self.sep_id] if self.sep_id is not None else seq[-1:])
            for seq, t in zip(ids, truncated, strict=True)
        ]
        return cut, truncated

    def predict(self, texts: Sequence[str]) -> BatchOutput:
        ids, truncated = self._encode(texts)
        lengths = [len(seq) for seq in ids]
        longest = max(lengths)
        input_ids = torch.full((len(ids), longest), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(ids), longest), dtype=torch.long)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attention[row, : len(seq)] = 1
        with torch.inference_mode():
            logits = self.model(
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)
            ).logits
            probabilities = logits.float().softmax(dim=-1).cpu().tolist()
        predictions = []
        for probs, n, cut in zip(probabilities, lengths, truncated, strict=True):
            scores = sorted(zip(self.labels, probs, strict=True), key=lambda s: -s[1])
            predictions.append(Prediction(scores[0][0], scores[0][1], scores, n, cut))
        return BatchOutput(predictions, sum(lengths), longest * len(ids))

    def warm_up(self) -> None:
        for size in (1, 4, 16):
            self.predict(["warming up the model before traffic arrives"] * size)
