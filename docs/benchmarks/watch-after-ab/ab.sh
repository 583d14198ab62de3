#!/bin/bash
# Side by side: the harness before (a watch asks for every state: after_sequence 0) and after
# (it asks for what comes after QUEUED), the two checkouts taking turns within each round.
#   git worktree add /tmp/wa-old <commit before>
#   docs/benchmarks/watch-after-ab/ab.sh /tmp/wa-old . RPS SECONDS ROUNDS   (from the repository root)
old=$1 new=$2 rps=$3 seconds=$4 rounds=$5
pipeline=$(cd "$(dirname "$0")/../event-batching-ab" && pwd)/pipeline.py
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for side in $order; do
    if [ "$side" = old ]; then root=$old; else root=$new; fi
    root=$(cd "$root" && pwd)
    line=$(PYTHONPATH=$root/src:$root/services:$root .venv/bin/python "$pipeline" 1 "$rps" "$seconds" 2>/dev/null | tail -1)
    echo "round $r $side $rps/s $line"
  done
done
