#!/usr/bin/env bash
# Server CPU after clients of non-streamed requests leave: starts `grove serve` on the bundled
# pair, sends 32 requests of 400 tokens whose clients give up after 0.3 s, and prints the
# server's CPU time in each of the next two seconds (issue 34: it should return to idle).
# Usage: scripts/abandoned-requests.sh [GROVE_BINARY] [PORT]
set -euo pipefail
G=${1:-build/release/tools/grove/grove}; PORT=${2:-18301}
LOG=$(mktemp); trap 'kill $SP 2>/dev/null; rm -f $LOG' EXIT
"$G" serve --port "$PORT" --parallel 4 > "$LOG" 2>&1 & SP=$!; sleep 3
PIDS=""
for i in $(seq 32); do curl -s -m 0.3 -o /dev/null http://127.0.0.1:$PORT/v1/completions -H 'Content-Type: application/json' -d '{"prompt":"Once upon a time","max_tokens":400,"temperature":0.9,"grove":{"speculation":"off"}}' & PIDS="$PIDS $!"; done
wait $PIDS || true  # curl exits 28 when it gives up, as intended
t0=$(awk '{print $14+$15}' /proc/$SP/stat); sleep 1; t1=$(awk '{print $14+$15}' /proc/$SP/stat); sleep 1; t2=$(awk '{print $14+$15}' /proc/$SP/stat)
echo "server CPU ticks (100 = one core-second) in the 1st second after 32 clients left: $((t1-t0)), 2nd: $((t2-t1))"
curl -s http://127.0.0.1:$PORT/metrics | grep -E "grove_(slots|queue|requests|generated)" | head
