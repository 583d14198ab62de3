"""INGRESS_PROCESSES: one ingress as several processes on one port.

One Python process computes on one core, and a Submit cost the ingress 0.43-0.54 ms of CPU in
the load runs (gRPC's own server about 0.3 of it: bench/floor.py; docs/benchmarks/load*.md),
so at 2,000 Submit/s one process has almost nothing of its core to spare. With
INGRESS_PROCESSES=N the first process binds the port and, once it serves, starts N-1 more
on the port it got, all listening with SO_REUSEPORT: the kernel hands each new connection to
one of them, so calls spread by connection (a client that holds one connection talks to one
process; `batchline-bench --connections` spreads its calls). Each is a whole ingress, with its
own connections to Redis and RabbitMQ, its own health and its own MAX_INFLIGHT; the jobs'
state is all in Redis, so any of them answers any call.

The first process supervises the others: on SIGTERM it drains them with itself; if one exits
on its own, it stops the rest and exits non-zero, so what supervises it (compose, Kubernetes)
restarts the ingress whole. They get SIGTERM if the first process dies however it dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping

log = logging.getLogger("ingress")
PR_SET_PDEATHSIG = 1
PARENT_ENV = "INGRESS_PARENT_PID"  # set in the extra processes' environment only
CHECK_EVERY_S = 0.5


def helper_env(env: Mapping[str, str], port: int, index: int, metrics_port: int) -> dict[str, str]:
    """The environment of the `index`th extra process (1, 2, ...): the first's, on the port
    it got, listening beside it, one process itself; metrics on the next ports up (none when
    the first serves none)."""
    return {
        **env,
        "INGRESS_PORT": str(port),
        "INGRESS_PROCESSES": "1",
        "INGRESS_REUSE_PORT": "1",
        "METRICS_PORT": str(metrics_port + index if metrics_port else 0),
        PARENT_ENV: str(os.getpid()),
    }


def die_with_parent(env: Mapping[str, str] = os.environ) -> None:
    """In an extra process, first thing: SIGTERM when the first process dies, however it dies
    (Linux's PR_SET_PDEATHSIG; elsewhere the first still stops them on its own SIGTERM). Set
    here, not between fork and exec, where a process with threads may deadlock; if the first
    died before this, exit at once."""
    if not (parent := env.get(PARENT_ENV)):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):
        raise SystemExit(f"the first ingress process ({parent}) is gone")


class Helpers:
    """The extra processes of one ingress, started and watched by the first."""

    def __init__(self, count: int, metrics_port: int, grace_s: float) -> None:
        self.count = count
        self.metrics_port = metrics_port
        self.grace_s = grace_s
        self.processes: list[subprocess.Popen[bytes]] = []
        self.failed: str | None = None  # why the ingress stopped, if a helper ended it
        self._watch: asyncio.Task[None] | None = None

    def start(self, port: int, stop: asyncio.Event) -> None:
        """Start them on `port` (the first process serves it already); set `stop` if one
        exits before it is told to."""
        for index in range(1, self.count + 1):
            env = helper_env(os.environ, port, index, self.metrics_port)
            self.processes.append(subprocess.Popen([sys.executable, "-m", "ingress"], env=env))
        log.info("ingress processes started", extra={"port": port, "processes": self.count + 1})
        self._watch = asyncio.get_running_loop().create_task(self._watch_for_exit(stop))

    async def _watch_for_exit(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for process in self.processes:
                if (code := process.poll()) is not None:
                    self.failed = f"ingress process {process.pid} exited with {code}"
                    log.error("%s; stopping the ingress", self.failed)
                    stop.set()
                    return
            await asyncio.sleep(CHECK_EVERY_S)

    async def stop(self) -> None:
        """SIGTERM to each: they drain as the first does; killed past the grace and 5 s more."""
        if self._watch is not None:
            self._watch.cancel()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        for process in self.processes:
            try:
                await asyncio.wait_for(loop.run_in_executor(None, process.wait), self.grace_s + 5)
            except TimeoutError:
                log.warning("ingress process %d did not stop in time; killed", process.pid)
                process.kill()
                await loop.run_in_executor(None, process.wait)
