"""The benchmarks' workload: review-like sentences and a DistilBERT-shaped model to run them.

The model has DistilBERT's architecture and size with random weights (the same compute as the
real one), built once under .run/ and never committed. Imports no gRPC: scripts that measure the
model alone (`docs/benchmarks/gpu/`) run where only PyTorch and transformers are installed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / ".run" / "bench-model" / "distilbert-random"
LABELS = {0: "NEGATIVE", 1: "POSITIVE"}
WORDS = (
    "the a this that it was is were very really quite so too not never always food service staff "
    "room hotel film movie story acting plot music price value delivery order package app phone "
    "battery screen camera support team waiter table menu dinner lunch breakfast coffee pizza "
    "great good excellent amazing awesome lovely nice friendly fast clean fresh tasty perfect "
    "bad terrible awful horrible poor slow rude dirty cold broken boring disappointing cheap "
    "expensive late early long short loud quiet small big new old and but or because although "
    "while after before again ever just only also still even we i they he she you our my their "
    "loved hated liked enjoyed recommend returned waited ordered bought watched stayed tried "
    "will would could should might must can did does had has have be been being get got make "
    "made take took give gave go went come came see saw know knew think thought feel felt "
    "hour hours minutes day days week night time times year place people thing things way "
    "experience quality size color design update version feature problem issue refund "
    "manager owner family friends kids everyone nobody someone something nothing everything"
).split()
PUNCTUATION = [",", ".", "!", "'"]


def sentences(n: int, seed: int) -> list[str]:
    """Review-like sentences: 5-30 words, lengths spread evenly, then +-20% noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = max(3, round(rng.randint(5, 30) * rng.uniform(0.8, 1.2)))
        text = " ".join(rng.choice(WORDS) for _ in range(words))
        out.append(text + rng.choice([".", "!", ""]))
    return out


def build_model(path: Path = MODEL_DIR) -> Path:
    """A DistilBERT with the real architecture and size and random weights, with a WordPiece
    vocabulary in which every benchmark word is one token. Built once, reused; a directory
    whose tokenizer does not know the benchmark's words is rebuilt."""
    if (path / "config.json").exists() and _knows_every_word(path):
        return path
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    build_tokenizer(path)
    config = DistilBertConfig(num_labels=2, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})  # type: ignore[call-arg]
    model = DistilBertForSequenceClassification(config)
    model.eval()  # type: ignore[no-untyped-call]
    model.save_pretrained(path)
    return path


def build_tokenizer(path: Path) -> None:
    """The benchmark model's tokenizer files at `path`: BERT's 30,522-entry vocabulary size,
    holding every benchmark word, so a review tokenizes as a real model's would."""
    from transformers import AutoTokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *PUNCTUATION, *sorted(set(WORDS))]
    vocab += [f"[unused{i}]" for i in range(30522 - len(vocab))]
    for stale in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (path / stale).unlink(missing_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # From the directory, as a saved BERT vocabulary loads: built with `vocab_file=` the fast
    # tokenizer held only the 5 special tokens (transformers 5), and every word was [UNK].
    tokenizer = AutoTokenizer.from_pretrained(str(path), tokenizer_type="distilbert", do_lower_case=True)
    tokenizer.model_max_length = 512
    tokenizer.save_pretrained(path)
    if not _knows_every_word(path):
        raise RuntimeError(f"the benchmark tokenizer at {path} does not know the benchmark's words")


def _knows_every_word(path: Path) -> bool:
    """Whether the tokenizer saved at `path` makes each benchmark word one token of its own."""
    from tokenizers import Tokenizer

    if not (path / "tokenizer.json").is_file():
        return False
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    unknown = tokenizer.token_to_id("[UNK]")
    return all(
        len(ids := tokenizer.encode(word, add_special_tokens=False).ids) == 1 and ids[0] != unknown
        for word in WORDS
    )


def warm_model(path: Path, precision: str, threads: int) -> tuple[Any, list[Any]]:
    """The model in this process, warmed as the batcher warms it, and 4,000 benchmark sentences
    encoded for it."""
    from batcher.hf import HFModel
    from batcher.settings import ModelSettings

    model = HFModel(
        ModelSettings(backend="hf", model_path=str(path), torch_threads=threads, precision=precision)
    )
    model.warm_up(16)
    return model, model.encode(sentences(4000, seed=7))
