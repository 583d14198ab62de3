"""Load harness: open-loop Submit load with end-to-end latency, written under docs/benchmarks/."""
