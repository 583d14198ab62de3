"""What refitting the forward-time line costs the event loop per pass: `ForwardTime.add` with
the warm-up's 40 passes anchored and a full ring of 256 recent ones (as a batcher holds them after
a few minutes' traffic); best of `rounds` rounds of 50 adds.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/event-loop-cpu/forward_fit_cpu.py [rounds]
"""

from __future__ import annotations

import random
import sys
import time

from batcher.forecast import ForwardTime


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    shapes = random.Random(7)
    forward = ForwardTime()
    for anchor, count in ((True, 40), (False, 300)):
        for _ in range(count):
            size, longest = shapes.randint(1, 16), shapes.randint(5, 60)
            forward.add(size, longest, size * longest, 0.012 + 4e-5 * size * longest, anchor=anchor)
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(50):
            forward.add(4, 30, 120, 0.017)
        best = min(best, (time.perf_counter() - started) / 50)
    fit = f"fixed {forward.fixed_s * 1e3:.2f} ms, {forward.per_token_s * 1e6:.2f} us/token"
    print(f"{best * 1e6:6.1f} us per add ({fit})")


if __name__ == "__main__":
    main()
