"""The wide-pass rule in use against "wide only if the pass should end before the next job
arrives", side by side: `git apply docs/benchmarks/wide-rule-ab/arrival-bound.patch`
(`AB_OLD_WIDE=1` keeps the rule in use), then
`PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/wide-rule-ab/wide_rule_ab.py 3 8 24 40`
(rounds, then rates; about 8 minutes)."""

from pathlib import Path

from bench.batching import ab_main

if __name__ == "__main__":
    ab_main({"old rule": {"AB_OLD_WIDE": "1"}, "new rule": {}}, [8.0, 24.0, 40.0], 3, Path(__file__).parent)
