"""Medians per tree and scenario of `results.jsonl` (from scenarios.py), as markdown rows."""

import json
import statistics
import sys
from collections import defaultdict

with open(sys.argv[1] if len(sys.argv) > 1 else "results.jsonl") as lines:
    rows = [json.loads(line) for line in lines]
cells: dict[tuple[str, str], list[dict]] = defaultdict(list)
for row in rows:
    cells[(row["scenario"], row["tree"])].append(row)


def spread(values: list[float], digits: int) -> str:
    med = statistics.median(values)
    fmt = f"{{:,.{digits}f}}"
    return f"**{fmt.format(med)}** ({', '.join(fmt.format(v) for v in values)})"


for (scenario, tree), runs in sorted(cells.items()):
    if scenario == "machine":
        print(f"| machine | {tree} | 5M-addition loop s: {spread([r['loop_5m_s'] for r in runs], 3)} |")
        continue
    cpu = [r["cpu_ms_per_job"] for r in runs]
    parts = [
        f"achieved/s {spread([r['achieved_per_s'] for r in runs], 0)}",
        f"p99 ms {spread([r['p99_ms'] for r in runs], 1)}",
        f"ingress CPU ms/job {spread([c['ingress'] for c in cpu], 3)}",
    ]
    if scenario.startswith("pipeline"):
        if all("done_per_s" in r for r in runs):
            parts.append(f"done/s {spread([r['done_per_s'] for r in runs], 0)}")
            parts.append(f"lost {max(r['lost'] for r in runs)}")
        for name in ("stream", "batcher", "rabbitmq", "redis"):
            parts.append(f"{name} {spread([c[name] for c in cpu], 3)}")
    parts.append(f"all processes ms/job {spread([sum(c.values()) for c in cpu], 3)}")
    print(f"| {scenario} | {tree} | {'; '.join(parts)} |")
