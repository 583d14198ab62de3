#!/usr/bin/env bash
# The one-process gRPC test (isolate.py's `sync`) under other grpcio releases, each in a venv of
# its own under .run/ (grpcio alone: the test imports no generated code).
#     bash docs/benchmarks/grpc-floor/versions.sh [rate] [seconds] [rounds]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for version in 1.62.3 1.70.0 1.78.0; do
  venv=".run/grpcio-$version"
  [ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q "grpcio==$version"; }
  "$venv/bin/python" - "$here" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import isolate
rate, seconds, rounds = (float(sys.argv[2]) if len(sys.argv) > 2 else 1000.0,
                         float(sys.argv[3]) if len(sys.argv) > 3 else 8.0,
                         int(sys.argv[4]) if len(sys.argv) > 4 else 3)
import grpc
print(f"# grpcio {grpc.__version__}")
for _ in range(rounds):
    print(isolate.summary("sync", isolate.sync(rate, seconds), False), flush=True)
PY
done
