"""Sum up the lone-pass log `decisions.patch` writes (one JSON line per probe, per width
decision and per lone pass timed; WIDTH_LOG, default /tmp/width.log): per batcher, in the order
they started, the probe's ratios, how many lone passes ran on each width and their median time,
how many the rule itself sent to one core, and the two widths' scales at the last decision.

    python docs/benchmarks/width-compare-ab/decisions.py [/tmp/width.log]
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any


def batchers(lines: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The log split at each probe line: (the probe's ratios, the lines after it)."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for line in lines:
        if line["kind"] == "probe":
            out.append((line["ratios"], []))
        elif out:
            out[-1][1].append(line)
    return out


def summary(ratios: str, lines: list[dict[str, Any]]) -> str:
    decisions = [x for x in lines if x["kind"] == "decide"]
    passes = [x for x in lines if x["kind"] == "pass"]
    parts = [f"probe {ratios}"]
    for wide, name in ((True, "wide"), (False, "narrow")):
        ms = [x["s"] * 1000 for x in passes if x["wide"] == wide]
        parts.append(f"{name} {len(ms)}" + (f" (p50 {statistics.median(ms):.1f} ms)" if ms else ""))
    parts.append(f"rule said narrow {sum(not x['rule'] for x in decisions)}")
    if decisions:
        last = decisions[-1]
        parts.append(f"last scales wide {last['sc_w']:.2f}, narrow {last['sc_n']:.2f}")
    return "; ".join(parts)


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/width.log"
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for i, (ratios, after) in enumerate(batchers(lines), 1):
        print(f"batcher {i}: {summary(ratios, after)}")


if __name__ == "__main__":
    main()
