"""The no-work Submit (floor_server.py) served plain, behind a pass-on interceptor, behind the
old per-call boundary and through the Boundary, in turns: the server's event-loop CPU per
call at a given open-loop rate.

    PYTHONPATH=src:services:. .venv/bin/python docs/benchmarks/ingress-cpu-ab/interceptor_ab.py 1200 8
"""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.getcwd())
from bench import suite

HERE = Path(__file__).parent


def threads(pid: int) -> dict[str, float]:
    """CPU seconds so far of each thread of `pid`, by thread id and name."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        out[f"{task.name}:{(task / 'comm').read_text().strip()}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> None:
    rps, seconds = int(sys.argv[1]), float(sys.argv[2])
    for _ in range(3):
        for variant in ("plain", "pass-on", "per-call", "boundary"):
            env = {**os.environ, "FLOOR_VARIANT": variant}
            server = subprocess.Popen(
                [sys.executable, str(HERE / "floor_server.py")], stdout=subprocess.PIPE, text=True, env=env
            )
            host = f"127.0.0.1:{int(server.stdout.readline())}"
            before = threads(server.pid)
            options = suite.submit("floor", rps=rps, duration=seconds, concurrency=1000, connections=8)
            report = suite.run_counted(replace(options, host=host), {"server": [server.pid]}, "-")
            after = threads(server.pid)
            server.terminate()
            server.wait()
            calls = int(report["count"])
            loop = next(
                after[k] - before.get(k, 0) for k in after if k.endswith(":python")
            )  # the main thread
            whole = report["batchline"]["cpuS"]["server"] / calls * 1e6
            p99 = suite.percentile(report, 99)
            print(f"{variant:12s} event loop {loop / calls * 1e6:4.0f} us/call, ", end="")
            print(f"whole server {whole:4.0f} us/call, p99 {p99:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
