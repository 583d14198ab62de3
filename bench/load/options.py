"""The run's settings: ghz's flags, their meaning and defaults, and ghz's JSON config keys.

Flags given on the command line win over `--config`; the config wins over ghz's defaults.
Durations are Go durations (`10s`, `1m30s`, `250ms`), as ghz takes them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

FORMATS = ("summary", "json", "pretty", "csv")
PROTOCOLS = ("grpc", "rest", "grpc-web")
SCHEDULES = ("const", "step", "line")
DURATION_STOPS = ("close", "wait", "ignore")

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


class OptionError(ValueError):
    """A setting that cannot run: the message names the flag and says why."""


def parse_duration(text: str | int | float, flag: str) -> float:
    """A Go duration string in seconds; a bare number is nanoseconds, as in ghz's JSON."""
    if isinstance(text, int | float):
        return float(text) / 1e9
    value = text.strip()
    if value in ("0", ""):
        return 0.0
    position, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(value) or position == 0:
        raise OptionError(f"{flag}: {text!r} is not a duration (examples: 10s, 1m30s, 250ms)")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as a short Go-style duration, for the report's options."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


@dataclass
class Options:
    """Everything one run needs; field names follow ghz's config keys."""

    host: str = ""
    call: str = ""
    proto: str = ""
    protoset: str = ""
    import_paths: list[str] = field(default_factory=list)
    insecure: bool = False
    data: Any = None  # a JSON object, or an array used round-robin
    metadata: dict[str, str] = field(default_factory=dict)
    total: int = 200
    concurrency: int = 50
    connections: int = 1
    rps: int = 0
    load_schedule: str = "const"
    load_start: int = 0
    load_end: int = 0
    load_step: int = 0
    load_step_duration: float = 0.0
    load_max_duration: float = 0.0
    duration: float = 0.0
    duration_stop: str = "close"
    max_duration: float = 0.0
    timeout: float = 20.0
    connect_timeout: float = 10.0
    skip_first: int = 0
    count_errors: bool = False
    format: str = "summary"
    output: str = ""
    name: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    cpus: int = 0  # load-generator processes; 0 picks enough for the schedule
    # Beyond ghz:
    protocol: str = "grpc"
    e2e: str = ""  # "", "watch" or "poll": follow each job to its end
    stream_host: str = ""  # WatchJob target for grpc when the stream service is not on `host`
    progress: bool = True

    @property
    def open_loop(self) -> bool:
        return self.rps > 0 or self.load_schedule != "const"

    def validate(self) -> Options:
        """Refuse settings that cannot run, naming the flag."""
        if not self.host:
            raise OptionError("host: give the target as host:port (or a URL for rest and grpc-web)")
        if not self.call:
            raise OptionError("--call: give the method as package.Service.Method or package.Service/Method")
        if self.format not in FORMATS:
            raise OptionError(f"-O/--format: {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.protocol not in PROTOCOLS:
            raise OptionError(f"--protocol: {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.load_schedule not in SCHEDULES:
            raise OptionError(f"--load-schedule: {self.load_schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.duration_stop not in DURATION_STOPS:
            raise OptionError(f"--duration-stop: {self.duration_stop!r} is not one of close, wait, ignore")
        if self.e2e not in ("", "watch", "poll"):
            raise OptionError(f"--e2e: {self.e2e!r} is not watch or poll")
        for name in ("total", "concurrency", "connections"):
            if getattr(self, name) < 1:
                raise OptionError(f"--{name}: must be at least 1")
        if self.rps < 0 or self.load_start < 0 or self.load_end < 0:
            raise OptionError("--rps, --load-start and --load-end must not be negative")
        if self.load_schedule != "const":
            if self.load_start <= 0:
                raise OptionError(f"--load-start: a {self.load_schedule} schedule starts at a rate above 0")
            if self.load_step == 0:
                raise OptionError(f"--load-step: a {self.load_schedule} schedule needs a step (or slope)")
            if self.load_schedule == "step" and self.load_step_duration <= 0:
                raise OptionError("--load-step-duration: a step schedule needs how long each step lasts")
        if self.data is None:
            raise OptionError("-d/--data or -D/--data-file: the request message as JSON is required")
        if not isinstance(self.data, dict | list) or (isinstance(self.data, list) and not self.data):
            raise OptionError("-d/--data: a JSON object, or a non-empty array of objects")
        if isinstance(self.data, list) and not all(isinstance(item, dict) for item in self.data):
            raise OptionError("-d/--data: every item of the array must be a JSON object")
        if self.protocol != "grpc" and not (self.proto or self.protoset):
            raise OptionError(f"--proto or --protoset: {self.protocol} needs the schema (reflection is gRPC)")
        return self

    def report_options(self) -> dict[str, Any]:
        """The `options` object of ghz's JSON report."""
        out: dict[str, Any] = {
            "call": self.call,
            "host": self.host,
            "proto": self.proto,
            "protoset": self.protoset,
            "import-paths": self.import_paths,
            "insecure": self.insecure,
            "rps": self.rps,
            "load-schedule": self.load_schedule,
            "load-start": self.load_start,
            "load-end": self.load_end,
            "load-step": self.load_step,
            "load-step-duration": int(self.load_step_duration * 1e9),
            "load-max-duration": int(self.load_max_duration * 1e9),
            "concurrency": self.concurrency,
            "total": self.total,
            "connections": self.connections,
            "duration": int(self.duration * 1e9),
            "timeout": int(self.timeout * 1e9),
            "dial-timeout": int(self.connect_timeout * 1e9),
            "data": self.data,
            "binary": False,
            "metadata": self.metadata,
            "CPUs": self.cpus,
            "skipFirst": self.skip_first,
            "count-errors": self.count_errors,
            "name": self.name,
        }
        return {k: v for k, v in out.items() if v not in ("", [], {}, None) or k in ("insecure", "binary")}


# ghz config key -> (Options field, kind)
CONFIG_KEYS: dict[str, tuple[str, str]] = {
    "host": ("host", "str"),
    "call": ("call", "str"),
    "proto": ("proto", "str"),
    "protoset": ("protoset", "str"),
    "import-paths": ("import_paths", "list"),
    "insecure": ("insecure", "bool"),
    "data": ("data", "json"),
    "data-file": ("data", "file"),
    "metadata": ("metadata", "json"),
    "metadata-file": ("metadata", "file"),
    "total": ("total", "int"),
    "concurrency": ("concurrency", "int"),
    "connections": ("connections", "int"),
    "rps": ("rps", "int"),
    "load-schedule": ("load_schedule", "str"),
    "load-start": ("load_start", "int"),
    "load-end": ("load_end", "int"),
    "load-step": ("load_step", "int"),
    "load-step-duration": ("load_step_duration", "duration"),
    "load-max-duration": ("load_max_duration", "duration"),
    "duration": ("duration", "duration"),
    "duration-stop": ("duration_stop", "str"),
    "max-duration": ("max_duration", "duration"),
    "timeout": ("timeout", "duration"),
    "connect-timeout": ("connect_timeout", "duration"),
    "skipFirst": ("skip_first", "int"),
    "count-errors": ("count_errors", "bool"),
    "format": ("format", "str"),
    "output": ("output", "str"),
    "name": ("name", "str"),
    "tags": ("tags", "json"),
    "cpus": ("cpus", "int"),
}
# ghz keys that do not apply here, refused by name rather than silently ignored
UNSUPPORTED = {"cacert", "cert", "key", "cname", "skipTLS", "authority", "binary-file", "stream-interval"}


def _coerce(key: str, kind: str, value: Any, base: Path) -> Any:
    if kind == "duration":
        return parse_duration(value, key)
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise OptionError(f"{key}: {value!r} is not a whole number")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise OptionError(f"{key}: {value!r} is not true or false")
        return value
    if kind == "file":
        return _read_json(base / str(value), key)
    if kind == "list":
        return list(value) if isinstance(value, list) else str(value).split(",")
    return value


def _read_json(path: Path, flag: str) -> Any:
    try:
        return json.loads(sys.stdin.read() if str(path) == "@" else path.read_text())
    except OSError as exc:
        raise OptionError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise OptionError(f"{flag}: {path} is not JSON: {exc}") from exc


def _parse_json_flag(text: str, flag: str) -> Any:
    if text == "@":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{flag}: not JSON ({exc})") from exc


def from_config(path: Path) -> dict[str, Any]:
    """ghz's JSON config file as Options fields."""
    raw = _read_json(path, "--config")
    if not isinstance(raw, dict):
        raise OptionError(f"--config: {path} must hold a JSON object")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in UNSUPPORTED:
            raise OptionError(f"--config: {key!r} is a ghz key this harness does not support")
        if key not in CONFIG_KEYS:
            raise OptionError(f"--config: unknown key {key!r}")
        name, kind = CONFIG_KEYS[key]
        values[name] = _coerce(key, kind, value, path.parent)
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="batchline-bench",
        description="ghz-compatible load for Batchline (and any gRPC service): native gRPC, REST "
        "and grpc-web through Envoy, open loop with --rps, end to end with --e2e.",
    )
    add = p.add_argument
    d = argparse.SUPPRESS  # unset flags stay unset, so --config can fill them
    add("host", nargs="?", default=d, help="host:port (grpc) or http://host:port (rest, grpc-web)")
    add("--config", type=Path, default=d, help="ghz JSON config file; flags given here override it")
    add("--call", default=d, help="package.Service.Method or package.Service/Method")
    add("--proto", default=d, help="the .proto file of the service")
    add("--protoset", default=d, help="a compiled FileDescriptorSet (buf build / protoc -o)")
    add("-i", "--import-paths", default=d, help="comma-separated import paths for --proto")
    add("--insecure", action="store_true", default=d, help="plaintext (this harness speaks no TLS)")
    add("-d", "--data", default=d, help="request as JSON; an array is used round-robin; @ reads stdin")
    add("-D", "--data-file", default=d, help="file holding the request JSON")
    add("-m", "--metadata", default=d, help="request metadata as a JSON object of strings")
    add("-M", "--metadata-file", default=d, help="file holding the metadata JSON")
    add("-c", "--concurrency", type=int, default=d, help="requests in flight at most (default 50)")
    add("-n", "--total", type=int, default=d, help="requests to send (default 200)")
    add("-z", "--duration", default=d, help="send for this long; -n is then ignored (e.g. 30s)")
    add("--duration-stop", default=d, help="at -z: close (cancel in-flight), wait, or ignore them")
    add("-x", "--max-duration", default=d, help="stop after this long even if -n is not reached")
    add("-t", "--timeout", default=d, help="timeout of each request (default 20s, 0 for none)")
    add("--connect-timeout", default=d, help="timeout of the first connection (default 10s)")
    add("-r", "--rps", type=int, default=d, help="requests per second, open loop (default 0: no limit)")
    add("--load-schedule", default=d, help="const, step or line")
    add("--load-start", type=int, default=d, help="rate at the start of a step or line schedule")
    add("--load-end", type=int, default=d, help="rate at which a step or line schedule stops rising")
    add("--load-step", type=int, default=d, help="step size (step) or slope per second (line)")
    add("--load-step-duration", default=d, help="how long each step lasts (step)")
    add("--load-max-duration", default=d, help="after this long the rate stops changing")
    add("--connections", type=int, default=d, help="gRPC connections, requests spread over them (1)")
    add("--skipFirst", dest="skip_first", type=int, default=d, help="leave the first N out of the report")
    add("--count-errors", action="store_true", default=d, help="count errored requests in the latencies")
    add("-O", "--format", default=d, help="summary (default), json, pretty or csv")
    add("-o", "--output", default=d, help="write the report here instead of stdout")
    add("--name", default=d, help="name of the run, kept in the report")
    add("--tags", default=d, help="JSON object of tags, kept in the report")
    add("--cpus", type=int, default=d, help="load-generator processes (default: enough for the rate)")
    add("--protocol", default=d, help="grpc (default), rest or grpc-web (the last two through Envoy)")
    add("--e2e", action="store_const", const="watch", default=d, help="follow each job to its end (WatchJob)")
    add(
        "--e2e-poll",
        dest="e2e",
        action="store_const",
        const="poll",
        default=d,
        help="the same, by GetJob polling",
    )
    add("--stream-host", default=d, help="WatchJob target for grpc when it is not the host")
    add("--no-progress", dest="progress", action="store_false", default=d, help="no progress bar")
    return p


def parse(argv: list[str] | None = None) -> Options:
    """Flags over --config over ghz's defaults; raises OptionError on anything that cannot run."""
    given = vars(parser().parse_args(argv))
    values: dict[str, Any] = {}
    if "config" in given:
        values.update(from_config(given.pop("config")))
    for key in ("duration", "max_duration", "timeout", "connect_timeout", "load_step_duration"):
        if key in given:
            given[key] = parse_duration(given[key], "--" + key.replace("_", "-"))
    if "load_max_duration" in given:
        given["load_max_duration"] = parse_duration(given["load_max_duration"], "--load-max-duration")
    if "data" in given:
        given["data"] = _parse_json_flag(given["data"], "-d/--data")
    if "data_file" in given:
        given["data"] = _read_json(Path(given.pop("data_file")), "-D/--data-file")
    for flag in ("metadata", "tags"):
        if flag in given:
            given[flag] = _parse_json_flag(given[flag], "--" + flag)
    if "metadata_file" in given:
        given["metadata"] = _read_json(Path(given.pop("metadata_file")), "-M/--metadata-file")
    if "import_paths" in given:
        given["import_paths"] = given["import_paths"].split(",")
    values.update(given)
    known = {f.name for f in fields(Options)}
    options = Options(**{k: v for k, v in values.items() if k in known})
    if not isinstance(options.metadata, dict) or not all(
        isinstance(v, str) for v in options.metadata.values()
    ):
        raise OptionError("-m/--metadata: a JSON object of string values")
    return options.validate()
