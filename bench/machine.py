"""What a benchmark ran on, in one line for its report: the same code runs 2 x faster on one
2-core machine than another, so a number is only read beside the machine it came from."""

from __future__ import annotations

import os
import platform
from pathlib import Path

# CPU features that change the model's speed here: bf16 in AVX-512, and AMX tiles.
FEATURES = ("avx512_bf16", "amx_bf16")


def describe(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """E.g. 'Intel(R) Xeon(R) Processor, x86_64, 2 CPUs, avx512_bf16 amx_bf16, Python 3.11.7'."""
    name, flags = "unknown CPU", set[str]()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    present = " ".join(f for f in FEATURES if f in flags) or f"no {'/'.join(FEATURES)}"
    return (
        f"{name}, {platform.machine()}, {os.cpu_count()} CPUs, {present}, Python {platform.python_version()}"
    )
