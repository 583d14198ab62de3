"""Replay the unit test's slow moment on any version of `LoneWidths`: 300 lone jobs spaced
wider than their pass (the rule's hold-up 0), a narrow pass 1.4 x a wide one as the warm-up
said, and five wide passes in a row (140-144) 1.6 x slower. Prints how many lone passes ran
narrow in all and after the moment.

    git show b8f7428:services/batcher/lanes.py > /tmp/old_lanes.py
    cd docs/benchmarks/width-compare-ab
    PYTHONPATH=../../../services ../../../.venv/bin/python slow_moment.py /tmp/old_lanes.py
    PYTHONPATH=../../../services ../../../.venv/bin/python slow_moment.py ../../../services/batcher/lanes.py
"""

from __future__ import annotations

import importlib.util
import sys


def main() -> None:
    spec = importlib.util.spec_from_file_location("lanes_under_test", sys.argv[1])
    assert spec is not None and spec.loader is not None
    lanes = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = lanes  # its dataclasses look their module up
    spec.loader.exec_module(lanes)
    widths, chosen = lanes.LoneWidths(), []
    for i in range(300):
        narrow_s, wide_s = 0.028 * widths.scale(False), 0.020 * widths.scale(True)
        wide = widths.choose(lanes.runs_wide(1, narrow_s, wide_s, arrival_rate=10, held_up_s=0.0))
        chosen.append(wide)
        slow = 1.6 if 140 <= i < 145 else 1.0
        widths.add(wide, slow * (0.020 if wide else 0.028), 0.020 if wide else 0.028)
    after = chosen[145:]
    print(f"narrow: {chosen.count(False)} of 300; after the moment {after.count(False)} of {len(after)}")


if __name__ == "__main__":
    main()
