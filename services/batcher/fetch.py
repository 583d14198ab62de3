"""`python -m batcher.fetch --to DIR`: download the model once, for offline runs.

The only place Batchline touches the Hugging Face hub. The batcher image runs it at build time
(weights baked into the image); on a workstation it fills a directory for MODEL_PATH. The
batcher itself never downloads (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batcher.settings import ModelSettings

FILES = ["config.json", "*.safetensors", "tokenizer*.json", "vocab.txt", "special_tokens_map.json"]


def fetch(model_id: str, to: Path) -> Path:
    """Download `model_id`'s config, tokenizer and safetensors weights into `to`."""
    from huggingface_hub import snapshot_download

    snapshot_download(repo_id=model_id, local_dir=to, allow_patterns=FILES)
    if not (to / "config.json").is_file():
        raise FileNotFoundError(f"{model_id} has no config.json")
    return to


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m batcher.fetch", description=__doc__.splitlines()[0])
    parser.add_argument("--model-id", default=ModelSettings.model_id, help="Hugging Face model id")
    parser.add_argument("--to", type=Path, required=True, help="directory to fill (then MODEL_PATH=DIR)")
    args = parser.parse_args(argv)
    try:
        path = fetch(args.model_id, args.to)
    except Exception as exc:
        print(f"batcher.fetch: could not download {args.model_id}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.model_id} -> {path} (set MODEL_PATH={path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
