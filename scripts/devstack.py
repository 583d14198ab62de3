"""`make run`, `make up`, `make down`: Batchline as local processes, Envoy in front.

run   the embedded pipeline (one process, in-memory queue and store) behind a real Envoy, in the
      foreground, and the chat UI on :3000; Ctrl-C stops everything.
up    the distributed topology in the background, the same processes docker-compose.yml runs:
      ingress, stream, BATCHER_REPLICAS batchers, Envoy and the UI, against RabbitMQ and Redis
      (AMQP_URL, REDIS_URL).
down  stop what `up` started.

Both `run` and `up` print `ready` only once Envoy's /readyz answers 200 (every upstream SERVING),
and fail with the port or dependency at fault instead of hanging.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from batchline import edge
from batchline.lifecycle import is_serving

ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("DEVSTACK_DIR", ROOT / ".run"))
PIDS = RUN_DIR / "pids.json"
DEFAULTS = {
    "AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "PORT": "50051",  # the embedded process
    "INGRESS_PORT": "50051",
    "STREAM_PORT": "50052",
    "BATCHER_HEALTH_PORT": "50053",
    "BATCHER_REPLICAS": "1",
    "INGRESS_METRICS_PORT": "9101",
    "STREAM_METRICS_PORT": "9103",
    "BATCHER_METRICS_PORT": "9102",  # the first batcher; more count upward from 9104
    "ENVOY_PORT": "8080",
    "ENVOY_ADMIN_PORT": "9901",
    "WEB_PORT": "3000",
    "LOG_FORMAT": "json",
}


class StartError(Exception):
    """The stack could not start; the message says which port or dependency."""


@dataclass
class Process:
    """One process of the stack: how to start it and how to tell it is ready."""

    name: str
    argv: list[str]
    port: int
    port_variable: str
    env: dict[str, str] = field(default_factory=dict)
    ready: Callable[[], bool] = lambda: True
    popen: subprocess.Popen[bytes] | None = None
    log: Path | None = None


def fail(message: str) -> None:
    print(f"devstack: {message}", file=sys.stderr)
    sys.exit(1)


def reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def tls_files(env: dict[str, str]) -> edge.Tls | None:
    """TLS_CERT_FILE and TLS_KEY_FILE (PEM) put TLS on Envoy's listener; neither: plain."""
    cert, key = env.get("TLS_CERT_FILE", ""), env.get("TLS_KEY_FILE", "")
    if bool(cert) != bool(key):
        fail("set both TLS_CERT_FILE and TLS_KEY_FILE, or neither")
    for path in (cert, key):
        if path and not Path(path).is_file():
            fail(f"{path} (TLS) is not a file")
    return edge.Tls(str(Path(cert).resolve()), str(Path(key).resolve())) if cert else None


def edge_url(env: dict[str, str]) -> str:
    scheme = "https" if env.get("TLS_CERT_FILE") else "http"
    return f"{scheme}://127.0.0.1:{env['ENVOY_PORT']}"


def envoy_process(env: dict[str, str], ingress: int, stream: int) -> Process:
    port, admin = int(env["ENVOY_PORT"]), int(env["ENVOY_ADMIN_PORT"])
    config = RUN_DIR / "envoy.yaml"
    tls = tls_files(env)
    topology = edge.Topology(
        port=port,
        admin_port=admin,
        ingress=("127.0.0.1", ingress),
        stream=("127.0.0.1", stream),
        ui_port=int(env["WEB_PORT"]),
        tls=tls,
    )
    edge.write_config(topology, config)
    # Readiness is asked of our own listener on 127.0.0.1: the certificate may name another host.
    probe = ssl._create_unverified_context() if tls else None
    return Process(
        "envoy",
        edge.command(config, RUN_DIR),
        port,
        "ENVOY_PORT",
        ready=lambda: edge.http_status(f"{edge_url(env)}/readyz", tls=probe) == 200,
    )


def web_process(env: dict[str, str]) -> Process:
    """The chat UI (clients/web/dist, built by `make web`), told where Envoy is."""
    port = int(env["WEB_PORT"])
    api = edge_url(env)
    argv = [sys.executable, "-m", "batchline.webui", "--port", str(port), "--api", api]
    return Process(
        "web", argv, port, "WEB_PORT", ready=lambda: edge.http_status(f"http://127.0.0.1:{port}/") == 200
    )


def python_process(name: str, module: str, port: int, variable: str, **env: str) -> Process:
    target = f"127.0.0.1:{port}"
    return Process(name, [sys.executable, "-m", module], port, variable, env, lambda: is_serving(target))


def start(processes: list[Process], env: dict[str, str], log: IO[bytes] | None = None) -> None:
    """Start every process, then wait until each is ready; StartError (all stopped) if not."""
    for process in processes:
        if not port_free(process.port):
            raise StartError(
                f"port {process.port} (for {process.name}) is taken; "
                f"set {process.port_variable} or stop what holds it"
            )
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    for process in processes:
        process.log = RUN_DIR / f"{process.name}.log"
        output = log or process.log.open("wb")
        process.popen = subprocess.Popen(
            process.argv,
            env={**env, **process.env},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
    deadline = time.monotonic() + float(env.get("DEVSTACK_TIMEOUT_S", "120"))
    waiting = list(processes)
    while waiting and time.monotonic() < deadline:
        for process in list(waiting):
            assert process.popen is not None
            if process.ready():
                print(f"  {process.name:<10} ready on :{process.port}  (log {process.log})", flush=True)
                waiting.remove(process)
            elif process.popen.poll() is not None:
                stop(processes)
                raise StartError(f"{process.name} exited during start-up:\n{tail(process)}")
        time.sleep(0.2)
    if waiting:
        stop(processes)
        names = ", ".join(f"{p.name} (:{p.port})" for p in waiting)
        raise StartError(f"not ready in time: {names}; see the logs in {RUN_DIR}")


def tail(process: Process, lines: int = 15) -> str:
    if process.log is None or not process.log.exists():
        return "(no log)"
    return "\n".join(process.log.read_text(errors="replace").splitlines()[-lines:])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_pids(pids: list[int], grace_s: float = 30.0) -> None:
    """SIGTERM each process group, wait for them to drain, SIGKILL what is left."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(-1, os.WNOHANG)  # reap our own children so they stop counting as alive
        time.sleep(0.1)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def stop(processes: list[Process]) -> None:
    # Envoy last: it keeps answering (503) while the services drain behind it.
    ordered = sorted(processes, key=lambda p: p.name == "envoy")
    stop_pids([p.popen.pid for p in ordered if p.popen is not None])


def banner(env: dict[str, str], mode: str) -> str:
    envoy, url = f"127.0.0.1:{env['ENVOY_PORT']}", edge_url(env)
    cert = env.get("TLS_CERT_FILE", "")  # trusted explicitly: it may be self-signed
    trust, cacert = (f" --ca-file {cert}", f" --cacert {cert}") if cert else ("", "")
    return (
        f"\nBatchline is ready ({mode}).\n"
        f"  chat UI                http://localhost:{env['WEB_PORT']}\n"
        f"  REST, grpc-web, gRPC   {url}   (Envoy; health /healthz, readiness /readyz)\n"
        f'  try   curl -s{cacert} -X POST {url}/v1/infer -d \'{{"text": "I loved it"}}\'\n'
        f'        .venv/bin/batchline --target {envoy}{trust} submit --watch "I loved it"\n'
        f"  Envoy admin   http://127.0.0.1:{env['ENVOY_ADMIN_PORT']}   logs in {RUN_DIR}\n"
    )


def run() -> None:
    """The embedded pipeline behind Envoy, in the foreground until Ctrl-C."""
    env = {**DEFAULTS, **os.environ}
    if os.environ.get("AMQP_URL") or os.environ.get("REDIS_URL"):
        fail("AMQP_URL/REDIS_URL are set: `make up` runs the services on them; unset both for `make run`")
    del env["AMQP_URL"], env["REDIS_URL"]  # their defaults are for `up`
    port = int(env["PORT"])
    processes = [
        python_process("embedded", "embedded", port, "PORT"),
        envoy_process(env, port, port),
        web_process(env),
    ]
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        start(processes, env)
    except StartError as exc:
        fail(str(exc))
    print(banner(env, "embedded: in-memory queue and store") + "  stop  Ctrl-C\nready", flush=True)
    while not stopping:
        for process in processes:
            assert process.popen is not None
            if process.popen.poll() is not None:
                stop(processes)
                fail(f"{process.name} exited with {process.popen.returncode}:\n{tail(process)}")
        time.sleep(0.2)
    print("stopping: draining the pipeline", flush=True)
    stop(processes)
    codes = {p.name: p.popen.wait() for p in processes if p.popen is not None}
    if any(codes.values()):
        fail(f"stopped, not cleanly: exit codes {codes}; see the logs in {RUN_DIR}")
    print("stopped: embedded pipeline drained, Envoy and the UI closed", flush=True)


def up_plan(env: dict[str, str]) -> list[Process]:
    """The processes of the distributed topology: docker-compose.yml's services, as processes."""
    ingress, stream, base = int(env["INGRESS_PORT"]), int(env["STREAM_PORT"]), int(env["BATCHER_HEALTH_PORT"])
    processes = [
        python_process(
            "ingress", "ingress", ingress, "INGRESS_PORT", METRICS_PORT=env["INGRESS_METRICS_PORT"]
        ),
        python_process("stream", "stream", stream, "STREAM_PORT", METRICS_PORT=env["STREAM_METRICS_PORT"]),
    ]
    first, threads = int(env["BATCHER_METRICS_PORT"]), batcher_threads(env)
    processes += [
        python_process(
            f"batcher-{i + 1}",
            "batcher",
            base + i,
            "BATCHER_HEALTH_PORT",
            BATCHER_HEALTH_PORT=str(base + i),
            WORKER_NAME=f"batcher-{i + 1}",
            METRICS_PORT=str(first if i == 0 else first + i + 1),  # stream has first + 1
            TORCH_THREADS=threads,
        )
        for i in range(int(env["BATCHER_REPLICAS"]))
    ]
    processes += [envoy_process(env, ingress, stream), web_process(env)]
    return processes


def batcher_threads(env: dict[str, str]) -> str:
    """TORCH_THREADS for each batcher: as set, or else this machine's cores shared out among the
    replicas (one batcher: PyTorch's default, every core). Batchers that each take every core
    fight over them: on 2 cores, two batchers of two threads drained a backlog at 58 jobs/s,
    one batcher at 87-94, two of one thread each at 101-110 (docs/benchmarks/instances-ab.md)."""
    asked = env.get("TORCH_THREADS", "0") or "0"
    replicas = int(env["BATCHER_REPLICAS"])
    if asked != "0" or replicas == 1:
        return asked
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core counts
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    return str(max(1, cores // replicas))


def up() -> None:
    """The distributed topology in the background; `down` stops it."""
    env = {**DEFAULTS, **os.environ}
    if PIDS.exists():
        fail(f"already up ({PIDS} exists); run `make down` first")
    for name, default_port in (("AMQP_URL", 5672), ("REDIS_URL", 6379)):
        if not reachable(env[name], default_port):
            fail(f"{name}={env[name]} is not reachable: start it first (see README)")
    processes = up_plan(env)
    try:
        start(processes, env)
    except StartError as exc:
        fail(str(exc))
    record = {p.name: {"pid": p.popen.pid, "port": p.port, "log": str(p.log)} for p in processes if p.popen}
    PIDS.write_text(json.dumps(record, indent=2))
    print(banner(env, "RabbitMQ and Redis") + "  stop  make down\nready", flush=True)


def down() -> None:
    if not PIDS.exists():
        print("nothing to stop")
        return
    started = json.loads(PIDS.read_text())
    order = sorted(started, key=lambda name: name == "envoy")
    stop_pids([int(started[name]["pid"]) for name in order])
    PIDS.unlink()
    print("stopped", flush=True)


if __name__ == "__main__":
    commands = {"run": run, "up": up, "down": down}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        fail("usage: devstack.py run|up|down")
    commands[sys.argv[1]]()
