#!/usr/bin/env bash
# Start (or stop) three throwaway RabbitMQ nodes beside the machine's own, for rabbit_args_ab.py:
# as RabbitMQ starts by default on 5674, with one scheduler (+S 1:1) on 5675, with schedulers
# that spin before sleeping (+sbwt short) on 5676. No plugins, data under /tmp/rmq-ab-*.
set -euo pipefail
declare -A ARGS=([5674]="" [5675]="+S 1:1" [5676]="+sbwt short +sbwtdcpu short +sbwtdio short")
for port in 5674 5675 5676; do
  name="ab$port@localhost" dir="/tmp/rmq-ab-$port"
  if [[ ${1:-} == stop ]]; then
    rabbitmqctl -q -n "$name" stop || true
    rm -rf "$dir"
    continue
  fi
  mkdir -p "$dir" && echo '[].' > "$dir/enabled_plugins" && chown -R rabbitmq "$dir"
  (cd /tmp && RABBITMQ_NODENAME="$name" RABBITMQ_NODE_PORT=$port RABBITMQ_DIST_PORT=$((port + 20000)) \
    RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/none" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="${ARGS[$port]}" rabbitmq-server -detached)
done
if [[ ${1:-} != stop ]]; then
  for port in 5674 5675 5676; do
    for _ in $(seq 60); do
      rabbitmqctl -q -n "ab$port@localhost" await_startup --timeout 60 2>/dev/null && break
      sleep 1
    done
  done
fi
