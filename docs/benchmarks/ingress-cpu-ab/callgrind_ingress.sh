#!/bin/bash
# Instructions per Submit of the ingress of a checkout (its path the argument; an older commit
# from a `git worktree`), under callgrind, on the local RabbitMQ and Redis, a queue and key
# prefix of its own: 300 and 1,300 Submits (4 callers, closed loop), the difference over 1,000.
#   docs/benchmarks/ingress-cpu-ab/callgrind_ingress.sh /path/to/checkout   (from this repository's root)
set -euo pipefail
tree=$(realpath "$1"); here=$(pwd); work=$(mktemp -d)
count() {  # Submits -> instructions the ingress ran
  local run=cg$RANDOM$RANDOM port=$((20000 + RANDOM % 10000))
  (cd $tree && PYTHONPATH=$tree/src:$tree/services:$tree/clients/python:$tree \
    AMQP_URL=amqp://guest:guest@127.0.0.1:5672/ REDIS_URL=redis://127.0.0.1:6379/0 \
    QUEUE_NAME=cg.$run.requests KEY_PREFIX=cg:$run: INGRESS_PORT=$port HOST=127.0.0.1 METRICS_PORT=0 \
    LOG_LEVEL=WARNING QUEUE_MAX_LENGTH=1000000 MAX_INFLIGHT=8192 JOB_TTL_S=600 \
    exec valgrind --tool=callgrind --callgrind-out-file=$work/out $here/.venv/bin/python -m ingress) \
    > /dev/null 2> $work/err &
  local server=$!
  until .venv/bin/python -m batchline.healthcheck 127.0.0.1:$port > /dev/null 2>&1; do sleep 1; done
  .venv/bin/batchline-bench --insecure --protoset envoy/batchline.pb --call batchline.v1.InferenceService.Submit \
    -d '{"text":"the food was great (review {{.RequestNumber}})"}' -c 4 -n $1 127.0.0.1:$port -O json > /dev/null
  kill -TERM $server; wait $server || true
  grep '^summary:' $work/out | awk '{print $2}'; rm -f $work/out
  .venv/bin/python -c "
import asyncio, aio_pika, redis.asyncio as r
async def main():
    c = await aio_pika.connect('amqp://guest:guest@127.0.0.1:5672/'); ch = await c.channel()
    for q in ('cg.$run.requests', 'cg.$run.requests.dead'): await ch.queue_delete(q)
    await c.close()
    cl = r.Redis.from_url('redis://127.0.0.1:6379/0'); keys = [k async for k in cl.scan_iter(match='cg:$run:*')]
    if keys: await cl.delete(*keys)
    await cl.aclose()
asyncio.run(main())"
}
a=$(count 300); b=$(count 1300)
echo "$tree: 300 Submits $a, 1300 Submits $b, per Submit $(( (b - a) / 1000 )) instructions"
