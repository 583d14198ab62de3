"""Overload and a short soak on a fresh local stack, driven by batchline-bench (the same code as
`python -m bench.reliability`, whose full versions run 60 s and 10 min: docs/benchmarks/)."""

from __future__ import annotations

import pytest

from bench import reliability

pytestmark = pytest.mark.timeout(300)
SHORT_BOUND = 500


def test_five_times_capacity_is_refused_fast_and_nothing_accepted_is_lost() -> None:
    # A bound the flood fills in about two seconds, so most of the 8 s is spent refusing (the
    # full run, 60 s against a bound of 2,000, is `make overload`).
    result = reliability.overload(seconds=8, queue_bound=SHORT_BOUND)
    assert result["accepted"] > 0 and result["refused_resource_exhausted"] > 0  # it was overloaded
    assert result["other_errors"] == {}  # only OK or RESOURCE_EXHAUSTED, nothing else
    # Refusals are fast (the call deadline is 20 s). Latencies count from each call's due time,
    # so the message says whether the load generator fell behind or the ingress answered late.
    refuse, accept = result["refuse_ms"], result["accept_ms"]
    assert refuse["p99"] < 250, (
        f"refusals p50 {refuse['p50']:.1f} p99 {refuse['p99']:.1f} max {refuse['max']:.1f} ms; "
        f"accepts p99 {accept['p99']:.1f} ms; send lag p99 {result['send_lag_p99_ms'] or 0:.1f} ms"
    )
    # The bound held exactly: one ingress process counts the room itself (batchline/room.py);
    # RabbitMQ alone lets groups of Submits already on their way land past it (a group of 256
    # written into a queue at 380 of 500 all landed: tests/integration/test_rabbit.py).
    assert result["queue_depth_peak"] <= SHORT_BOUND
    assert result["accepted_total"] == result["done_total"]  # lost: 0
    after = result["after"]
    assert after["done"] == after["accepted"] > 0  # and it serves normally afterwards
    for name in ("ingress", "stream", "batcher"):
        values = [s[f"rss_{name}_mb"] for s in result["samples"]]
        assert max(values) < 1.5 * values[0], f"{name} memory grew from {values[0]} to {max(values)} MiB"


def test_a_short_soak_keeps_memory_keys_tasks_and_watchers_flat() -> None:
    result = reliability.soak(seconds=20, ttl_s=5)  # records expire 5 s after their last change
    e2e = result["e2e"]
    assert e2e["done"] == e2e["accepted"] > 0 and e2e["unfinished"] == 0
    for name in ("ingress", "stream", "batcher"):
        assert reliability.growth(result["samples"], f"rss_{name}_mb") < 1.15, name
    # Keys plateau at rate x TTL (plus the records still in flight) instead of growing with time.
    peak_keys = max(s["job_keys"] for s in result["samples"])
    assert peak_keys <= result["rate_per_s"] * (result["job_ttl_s"] + 3)
    assert result["seconds"] * result["rate_per_s"] > 2 * peak_keys  # so expiry was seen
    # Every call and stream gives its task back: idle after the load as idle before it.
    samples = result["samples"]
    first, last = samples[0], samples[-1]
    assert max(s["watchers"] for s in samples) > 0 and last["watchers"] == first["watchers"] == 0
    for name in ("ingress", "stream", "batcher"):
        key = f"tasks_{name}"
        assert max(s[key] for s in samples) > first[key] or name == "batcher", f"{name} never busier"
        assert last[key] <= first[key] + 1, f"{name} left tasks behind: {first[key]} -> {last[key]}"
