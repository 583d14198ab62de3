"""The one-line machine description the benchmark reports carry."""

from __future__ import annotations

import os
from pathlib import Path

from bench import machine


def test_it_names_the_cpu_and_the_features_that_set_the_models_speed(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu avx512f amx_bf16 avx512_bf16\n"
    )
    line = machine.describe(cpuinfo)
    assert line.startswith("Example CPU 9000, ")
    assert "avx512_bf16 amx_bf16" in line
    assert f"{os.cpu_count()} CPUs" in line


def test_a_cpu_without_them_says_so(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Plain CPU\nflags\t\t: fpu sse2 avx2\n")
    assert "no avx512_bf16/amx_bf16" in machine.describe(cpuinfo)


def test_no_cpuinfo_still_gives_a_line(tmp_path: Path) -> None:
    assert "CPUs" in machine.describe(tmp_path / "missing")
