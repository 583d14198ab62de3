#!/bin/bash
# Instructions per call of the no-work Submit (floor_server.py) served four ways: each way
# under callgrind for 300 and for 1,300 calls (4 callers, closed loop), the difference over
# 1,000. Instruction counts repeat from run to run whatever else the machine does.
#   docs/benchmarks/ingress-cpu-ab/callgrind_floor.sh   (from the repository root)
set -euo pipefail
work=$(mktemp -d)
count() {  # variant calls -> instructions the server ran
  PYTHONPATH=src:services:. FLOOR_VARIANT=$1 valgrind --tool=callgrind --callgrind-out-file=$work/out \
    .venv/bin/python docs/benchmarks/ingress-cpu-ab/floor_server.py > $work/port 2> $work/err &
  local server=$!
  until [ -s $work/port ]; do sleep 0.5; done
  .venv/bin/batchline-bench --insecure --protoset envoy/batchline.pb --call batchline.v1.InferenceService.Submit \
    -d '{"text":"the food was great"}' -c 4 -n $2 127.0.0.1:$(head -1 $work/port) -O json > /dev/null
  kill -TERM $server; wait $server || true
  grep '^summary:' $work/out | awk '{print $2}'; rm -f $work/port $work/out
}
for round in 1 2; do
  for variant in plain pass-on per-call boundary; do
    a=$(count $variant 300); b=$(count $variant 1300)
    echo "$variant: 300 calls $a, 1300 calls $b, per call $(( (b - a) / 1000 )) instructions"
  done
done
