"""When each request is due: ghz's const, step and line load schedules, as send offsets.

Open loop: request i is due at offsets[i] seconds after the start whether or not earlier
requests have answered, and its latency counts from that moment.
"""

from __future__ import annotations

import math

from bench.load.options import OptionError, Options

MAX_REQUESTS = 5_000_000


def rate_at(options: Options, t: float) -> float:
    """Requests per second due at `t` seconds into the run."""
    if options.load_schedule == "const":
        return float(options.rps)
    ramp = min(t, options.load_max_duration) if options.load_max_duration > 0 else t
    rate: float
    if options.load_schedule == "step":
        rate = options.load_start + options.load_step * math.floor(ramp / options.load_step_duration)
    else:  # line: load_step is the slope, requests per second per second
        rate = options.load_start + options.load_step * ramp
    if options.load_end > 0:
        rate = min(rate, options.load_end) if options.load_step > 0 else max(rate, options.load_end)
    return max(rate, 0.0)


def offsets(options: Options) -> list[float]:
    """Every request's due time in seconds from the start, in order."""
    count_limit = None if options.duration > 0 else options.total
    time_limit = options.duration or options.max_duration or math.inf
    if options.load_schedule == "const":
        n = count_limit if count_limit is not None else math.ceil(time_limit * options.rps)
        _check(n)
        return [i / options.rps for i in range(n) if i / options.rps < time_limit]
    due: list[float] = []
    t = 0.0
    while (count_limit is None or len(due) < count_limit) and t < time_limit:
        due.append(t)
        rate = rate_at(options, t)
        if rate <= 0:
            break
        t += 1.0 / rate
        _check(len(due))
    return due


def _check(n: int) -> None:
    if n > MAX_REQUESTS:
        raise OptionError(f"the schedule asks for {n} requests; at most {MAX_REQUESTS} per run")


def peak_rate(options: Options, due: list[float]) -> float:
    """The highest rate the schedule reaches, requests per second."""
    if options.load_schedule == "const":
        return float(options.rps)
    return max((rate_at(options, t) for t in due[:: max(1, len(due) // 1000)]), default=0.0)
