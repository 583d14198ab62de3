"""A model with no weights: a calibrated cost (fixed + per padded token) and a small lexicon,
so the demo reads sensibly. Every result it makes is labelled `simulated`."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence

from batcher.model import BatchOutput, Encoded, Prediction, padded_work

TOKEN = re.compile(r"\w+|[^\w\s]")
MAX_TOKENS = 512
POSITIVE = frozenset(
    "good great excellent amazing awesome love loved lovely like liked best "
    "wonderful fantastic nice happy perfect brilliant enjoy enjoyed superb "
    "delightful pleasant recommend fast friendly beautiful outstanding helpful ".split()
)
NEGATIVE = frozenset(
    "bad terrible awful horrible hate hated worst poor boring slow rude broken "
    "disappointing disappointed useless waste annoying ugly sad angry dirty wrong "
    "fail failed never refund ".split()
)
NEGATORS = frozenset({"not", "no", "n't", "hardly", "isn", "wasn", "don", "didn"})


def count_tokens(text: str) -> tuple[int, bool]:
    """Word-piece-like count with [CLS] and [SEP], cut at the model's limit."""
    n = len(TOKEN.findall(text)) + 2
    return min(n, MAX_TOKENS), n > MAX_TOKENS


def sentiment(text: str) -> float:
    """Lexicon score: > 0 positive, < 0 negative; a negator flips the next sentiment word."""
    score, flip = 0.0, False
    for word in TOKEN.findall(text.lower()):
        if word in NEGATORS:
            flip = True
            continue
        value = 1.0 if word in POSITIVE else -1.0 if word in NEGATIVE else 0.0
        if value:
            score += -value if flip else value
            flip = False
    return score


class SimulatedModel:
    name = "simulated"
    threads = 0  # sleeps; one lane

    def use_threads(self, threads: int) -> None:
        pass

    def __init__(self, fixed_ms: float, per_token_ms: float) -> None:
        self._fixed_s = fixed_ms / 1000
        self._per_token_s = per_token_ms / 1000

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        return [Encoded(text, (), *count_tokens(text)) for text in texts]

    work = staticmethod(padded_work)  # its cost is per padded token

    def predict(self, batch: Sequence[Encoded]) -> BatchOutput:
        longest = max(e.tokens for e in batch)
        padded = longest * len(batch)
        cost_s = self._fixed_s + self._per_token_s * padded
        if cost_s > 0:
            time.sleep(cost_s)
        predictions = []
        for e in batch:
            positive = 1 / (1 + math.exp(-1.5 * sentiment(e.text) - 0.1))
            scores = sorted([("POSITIVE", positive), ("NEGATIVE", 1 - positive)], key=lambda s: -s[1])
            label, score = scores[0]
            predictions.append(Prediction(label, score, scores, e.tokens, e.truncated))
        return BatchOutput(predictions, sum(e.tokens for e in batch), padded)

    def warm_up(self, max_batch_size: int) -> list[tuple[int, int, float]]:
        # Nothing to warm; report the cost model so the batcher's forecast starts calibrated.
        return [(n, 32, self._fixed_s + self._per_token_s * n * 32) for n in (1, max_batch_size)]
