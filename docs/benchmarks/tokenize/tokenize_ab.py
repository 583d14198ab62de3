"""What tokenizing one review costs on the batcher's event loop, three ways, in turns:

- `broken vocab`: the benchmark tokenizer as `bench.workload` built it before (the fast tokenizer
  constructed with `vocab_file=`, which under transformers 5 holds only the special tokens, so
  every word is [UNK]), through the transformers call;
- `transformers call`: the benchmark vocabulary as it is built now, through the transformers call
  (`tokenizer([text])["input_ids"]`, what `HFModel.encode` did);
- `Rust directly`: the same tokenizer's own `tokenizers.Tokenizer.encode(text).ids` (what
  `HFModel.encode` does now).

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/tokenize/tokenize_ab.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from transformers import DistilBertTokenizerFast

from batcher.hf import bare_rust_tokenizer
from bench import machine, workload


def per_text_us(encode: Callable[[str], object], texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        encode(text)
    return (time.perf_counter() - started) / len(texts) * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    texts = workload.sentences(2000, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        fixed_dir, broken_dir = Path(tmp) / "fixed", Path(tmp) / "broken"
        workload.build_tokenizer(fixed_dir)
        broken_dir.mkdir()
        (broken_dir / "vocab.txt").write_text((fixed_dir / "vocab.txt").read_text())
        broken = DistilBertTokenizerFast(vocab_file=str(broken_dir / "vocab.txt"), do_lower_case=True)
        fixed = DistilBertTokenizerFast.from_pretrained(str(fixed_dir))
        rust = bare_rust_tokenizer(fixed)
        assert rust is not None
        ways: dict[str, Callable[[str], object]] = {
            "broken vocab": lambda t: broken([t], add_special_tokens=True, truncation=False)["input_ids"],
            "transformers call": lambda t: fixed([t], add_special_tokens=True, truncation=False)["input_ids"],
            "Rust directly": lambda t: rust.encode(t).ids,
        }
        print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {machine.describe()}")
        sizes = broken.backend_tokenizer.get_vocab_size(), rust.get_vocab_size()
        print(f"# broken vocab: {sizes[0]} tokens; fixed: {sizes[1]}")
        times: dict[str, list[float]] = {name: [] for name in ways}
        for round_ in range(rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for name in order:
                times[name].append(per_text_us(ways[name], texts))
        for name, each in times.items():
            rounds_us = ", ".join(f"{t:.1f}" for t in each)
            print(f"{name:>18}: median {statistics.median(each):6.1f} us per text  ({rounds_us})")


if __name__ == "__main__":
    main()
