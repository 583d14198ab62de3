"""ghz's report: the JSON schema (integer nanoseconds, Go status names, the 11-bucket histogram,
the 10/25/50/75/90/95/99 distribution) and the summary and CSV views of it.

Percentiles and buckets are computed exactly as ghz computes them, so a report from here and
one from ghz read the same. What ghz does not measure (send lag against the schedule, and with
--e2e each job's end-to-end time and its server-side split) goes under one extra key,
`batchline`, which tools written for ghz ignore.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from datetime import datetime
from typing import Any, NamedTuple

from bench.load.options import Options

PERCENTAGES = (10, 25, 50, 75, 90, 95, 99)
BAR = "∎"


class Record(NamedTuple):
    """One request: when it was due or sent, how it ended, and (with --e2e) its job."""

    timestamp: float  # Unix seconds: due time when open loop, send time when closed
    latency_ns: int  # due (or send) -> answer
    status: str  # Go-style gRPC status name
    error: str  # "" when OK
    lag_ns: int = 0  # actual send - due time (open loop)
    e2e_ns: int | None = None  # due (or send) -> final job state seen
    job_status: str = ""  # DONE, FAILED, CANCELLED; "" if never seen
    queue_wait_ms: float | None = None
    inference_ms: float | None = None
    batch_size: int | None = None
    follow_error: str = ""  # why following the job failed (--e2e), if it did
    rewatches: int = 0  # watches of the job the server ended early and that were re-opened
    late_status: str = ""  # a job not seen to its end within -t: its status at a later look, if terminal


def go_time(unix: float, seconds_only: bool = False) -> str:
    """A timestamp as Go's RFC 3339 (Nano) writes it in the local zone."""
    moment = datetime.fromtimestamp(unix).astimezone()
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if not seconds_only:
        fraction = f"{moment.microsecond:06d}".rstrip("0")
        text += f".{fraction}" if fraction else ""
    offset = moment.strftime("%z")
    return text + ("Z" if offset == "+0000" else f"{offset[:3]}:{offset[3:]}")


def nearest_rank(ordered: list[float], percentage: float) -> float:
    """ghz's percentile of sorted values: the nearest rank, 0-based."""
    position = percentage / 100 * len(ordered)
    index = int(position)
    if position == index:
        index -= 1
    return ordered[max(index, 0)]


def latency_distribution(ordered: list[float]) -> list[dict[str, int]]:
    """ghz's percentiles over sorted latencies in seconds."""
    out = []
    for percentage in PERCENTAGES:
        value = nearest_rank(ordered, percentage)
        out.append(
            {"percentage": percentage, "latency": int(value * 1e9)}
            if value > 0
            else {"percentage": 0, "latency": 0}
        )
    return out


def histogram(ordered: list[float]) -> list[dict[str, float | int]]:
    """ghz's 11 buckets over sorted latencies in seconds; `mark` is each bucket's top, seconds."""
    fastest, slowest = ordered[0], ordered[-1]
    count = 10
    size = (slowest - fastest) / count
    marks = [fastest + size * i for i in range(count)] + [slowest]
    counts = [0] * (count + 1)
    bucket = 0
    for value in ordered:
        while value > marks[bucket] and bucket < count:
            bucket += 1
        counts[bucket] += 1
    return [
        {"mark": mark, "count": n, "frequency": n / len(ordered)}
        for mark, n in zip(marks, counts, strict=True)
    ]


def build(
    records: list[Record],
    options: Options,
    total_s: float,
    end_reason: str,
    extra: dict[str, Any] | None = None,
    date: float | None = None,
) -> dict[str, Any]:
    """The ghz JSON report of one run (records in the order their answers arrived)."""
    counted = records[options.skip_first :]
    # ghz writes "date" first (its custom marshaller), then the Report fields in order.
    report: dict[str, Any] = {
        "date": go_time(date if date is not None else datetime.now().timestamp(), seconds_only=True)
    }
    if options.name:
        report["name"] = options.name
    report |= {
        "endReason": end_reason,
        "options": options.report_options(),
        "count": len(counted),
        "total": int(total_s * 1e9),
        "average": 0,
        "fastest": 0,
        "slowest": 0,
        "rps": 0.0,
        "errorDistribution": dict(Counter(r.error for r in counted if r.error)),
        "statusCodeDistribution": dict(Counter(r.status for r in counted)),
        "latencyDistribution": None,
        "histogram": None,
        "details": None,
    }
    if options.tags:
        report["tags"] = options.tags
    if counted:
        report["average"] = int(statistics.fmean(r.latency_ns for r in counted))
        report["rps"] = len(counted) / total_s if total_s > 0 else 0.0
        ordered = sorted(r.latency_ns / 1e9 for r in counted if options.count_errors or not r.error)
        if ordered:
            report["fastest"] = int(ordered[0] * 1e9)
            report["slowest"] = int(ordered[-1] * 1e9)
            report["histogram"] = histogram(ordered)
            report["latencyDistribution"] = latency_distribution(ordered)
        report["details"] = [
            {"timestamp": go_time(r.timestamp), "latency": r.latency_ns, "error": r.error, "status": r.status}
            for r in counted
        ]
    report["batchline"] = beyond_ghz(counted, options, total_s) | (extra or {})
    return report


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    picked = {f"p{p}": nearest_rank(ordered, p) for p in (50, 90, 99)}
    return {"mean": statistics.fmean(ordered), **picked, "max": ordered[-1]}


def beyond_ghz(records: list[Record], options: Options, total_s: float) -> dict[str, Any]:
    """What ghz does not report: schedule keeping and, with --e2e, each job's whole life."""
    out: dict[str, Any] = {"protocol": options.protocol, "openLoop": options.open_loop}
    if options.open_loop:
        out["sendLagMs"] = _spread([r.lag_ns / 1e6 for r in records])
    accepted = [r for r in records if not r.error]
    out["acceptMs"] = _spread([r.latency_ns / 1e6 for r in accepted])
    out["errorMs"] = _spread([r.latency_ns / 1e6 for r in records if r.error])  # how fast refusals come
    if options.e2e:
        done = [r for r in accepted if r.job_status == "DONE" and r.e2e_ns is not None]
        out["e2e"] = {
            "mode": options.e2e,
            "accepted": len(accepted),
            "done": len(done),
            "failed": sum(r.job_status == "FAILED" for r in accepted),
            "cancelled": sum(r.job_status == "CANCELLED" for r in accepted),
            "unfinished": sum(r.job_status == "" for r in accepted),
            # Of those, the ones a later look (after the run, bounded by -t again) found finished,
            # and the ones it did not: jobs the system left unfinished.
            "finishedLate": sum(r.job_status == "" and r.late_status != "" for r in accepted),
            "neverFinished": sum(r.job_status == "" and r.late_status == "" for r in accepted),
            "followErrors": dict(Counter(r.follow_error for r in accepted if r.follow_error)),
            "rewatches": sum(r.rewatches for r in accepted),
            "doneRps": len(done) / total_s if total_s > 0 else 0.0,
            "latencyMs": _spread([r.e2e_ns / 1e6 for r in done if r.e2e_ns is not None]),
            "queueWaitMs": _spread([r.queue_wait_ms for r in done if r.queue_wait_ms is not None]),
            "inferenceMs": _spread([r.inference_ms for r in done if r.inference_ms is not None]),
            "batchSize": _spread([float(r.batch_size) for r in done if r.batch_size]),
        }
    return out


# --- views -------------------------------------------------------------------------------------


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def summary(report: dict[str, Any]) -> str:
    """ghz's default text summary, plus the end-to-end section when there is one."""
    lines = ["", "Summary:"]
    if report.get("name"):
        lines.append(f"  Name:\t\t{report['name']}")
    lines += [
        f"  Count:\t{report['count']}",
        f"  Total:\t{_ms(report['total'])}",
        f"  Slowest:\t{_ms(report['slowest'])}",
        f"  Fastest:\t{_ms(report['fastest'])}",
        f"  Average:\t{_ms(report['average'])}",
        f"  Requests/sec:\t{report['rps']:.2f}",
        "",
    ]
    if report["histogram"]:
        lines.append("Response time histogram:")
        top = max(bucket["count"] for bucket in report["histogram"]) or 1
        for bucket in report["histogram"]:
            bar = BAR * round(40 * bucket["count"] / top)
            lines.append(f"  {bucket['mark'] * 1000:.3f} [{bucket['count']}]\t|{bar}")
        lines += ["", "Latency distribution:"]
        lines += [
            f"  {d['percentage']} % in {_ms(d['latency'])} "
            for d in report["latencyDistribution"]
            if d["latency"]
        ]
        lines.append("")
    lines.append("Status code distribution:")
    for status, n in sorted(report["statusCodeDistribution"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  [{status}]\t{n} responses")
    if report["errorDistribution"]:
        lines += ["", "Error distribution:"]
        for error, n in sorted(report["errorDistribution"].items(), key=lambda kv: -kv[1]):
            lines.append(f"  [{n}]\t{error}")
    extra = report.get("batchline", {})
    lag = extra.get("sendLagMs")
    if lag:
        lines += ["", f"Schedule kept: send lag p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms"]
    e2e = extra.get("e2e")
    if e2e:
        lat, qw, inf = e2e["latencyMs"], e2e["queueWaitMs"], e2e["inferenceMs"]
        lines += [
            "",
            f"End to end ({e2e['mode']}): {e2e['done']} DONE of {e2e['accepted']} accepted, "
            f"{e2e['failed']} failed, {e2e['cancelled']} cancelled, {e2e['unfinished']} not seen to "
            f"their end within -t ({e2e['finishedLate']} finished later, {e2e['neverFinished']} never); "
            f"{e2e['doneRps']:.1f} done/s; {e2e.get('rewatches', 0)} watches re-opened after a shed",
        ]
        if lat:
            lines += [
                f"  latency   p50 {lat['p50']:.2f} ms  p90 {lat['p90']:.2f} ms  p99 {lat['p99']:.2f} ms",
                f"  accept    p50 {extra['acceptMs']['p50']:.2f} ms  p99 {extra['acceptMs']['p99']:.2f} ms",
                f"  queue wait p50 {qw['p50']:.2f} ms  p99 {qw['p99']:.2f} ms; "
                f"inference p50 {inf['p50']:.2f} ms; mean batch {e2e['batchSize']['mean']:.1f}",
            ]
    return "\n".join(lines) + "\n"


def csv(report: dict[str, Any]) -> str:
    """ghz's CSV view: one row per request."""
    rows = ["duration (ms),status,error"]
    for detail in report["details"] or []:
        rows.append(f"{detail['latency'] / 1e6:.2f},{detail['status']},{detail['error']}")
    return "\n".join(rows) + "\n"


def render(report: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report, ensure_ascii=False)
    if fmt == "pretty":
        return json.dumps(report, indent=2, ensure_ascii=False)
    if fmt == "csv":
        return csv(report)
    return summary(report)
