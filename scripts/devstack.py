"""`make up` / `make down`: the distributed topology as local processes.

ingress, stream and BATCHER_REPLICAS batchers against the local RabbitMQ and Redis (AMQP_URL,
REDIS_URL), the same processes and settings docker-compose.yml runs. `up` returns once every
process reports SERVING and prints `ready`; it fails with the port or dependency at fault.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from batchline.lifecycle import is_serving

ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("DEVSTACK_DIR", ROOT / ".run"))
PIDS = RUN_DIR / "pids.json"
DEFAULTS = {
    "AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "INGRESS_PORT": "50051",
    "STREAM_PORT": "50052",
    "BATCHER_HEALTH_PORT": "50053",
    "BATCHER_REPLICAS": "1",
    "LOG_FORMAT": "json",
}


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


def up() -> None:
    env = {**DEFAULTS, **os.environ}
    if PIDS.exists():
        fail(f"already up ({PIDS} exists); run `make down` first")
    for name, port in (("AMQP_URL", 5672), ("REDIS_URL", 6379)):
        if not reachable(env[name], port):
            fail(f"{name}={env[name]} is not reachable: start it first (see README)")
    replicas = int(env["BATCHER_REPLICAS"])
    base = int(env["BATCHER_HEALTH_PORT"])
    plan: list[tuple[str, dict[str, str], int]] = [
        ("ingress", {}, int(env["INGRESS_PORT"])),
        ("stream", {}, int(env["STREAM_PORT"])),
    ]
    plan += [
        ("batcher", {"BATCHER_HEALTH_PORT": str(base + i), "WORKER_NAME": f"batcher-{i + 1}"}, base + i)
        for i in range(replicas)
    ]
    for module, _, port in plan:
        if not port_free(port):
            fail(f"port {port} (for {module}) is taken; set its *_PORT variable or stop what holds it")
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    started: dict[str, dict[str, object]] = {}
    for module, extra, port in plan:
        name = extra.get("WORKER_NAME", module)
        log = (RUN_DIR / f"{name}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", module],
            env={**env, **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
        started[name] = {"pid": process.pid, "port": port, "log": str(RUN_DIR / f"{name}.log")}
    PIDS.write_text(json.dumps(started, indent=2))
    deadline = time.monotonic() + float(env.get("DEVSTACK_TIMEOUT_S", "120"))
    waiting = dict(started)
    while waiting and time.monotonic() < deadline:
        for name, info in list(waiting.items()):
            if is_serving(f"127.0.0.1:{info['port']}"):
                print(f"  {name:<10} SERVING on :{info['port']}  (log {info['log']})", flush=True)
                del waiting[name]
            elif not alive(int(str(info["pid"]))):
                tail = Path(str(info["log"])).read_text().splitlines()[-15:]
                down()
                fail(f"{name} exited during start-up:\n" + "\n".join(tail))
        time.sleep(0.2)
    if waiting:
        down()
        fail(f"not SERVING in time: {', '.join(waiting)} (see their logs in {RUN_DIR})")
    print("ready", flush=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def down() -> None:
    if not PIDS.exists():
        print("nothing to stop")
        return
    started = json.loads(PIDS.read_text())
    for info in started.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(info["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(alive(int(i["pid"])) for i in started.values()):
        time.sleep(0.1)
    for info in started.values():
        if alive(int(info["pid"])):
            os.killpg(int(info["pid"]), signal.SIGKILL)
    PIDS.unlink()
    print("stopped", flush=True)


if __name__ == "__main__":
    commands = {"up": up, "down": down}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        fail("usage: devstack.py up|down")
    commands[sys.argv[1]]()
