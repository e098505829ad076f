#!/usr/bin/env bash
# Serving with a bundled pair (the base one unless TARGET and DRAFT name others), grove serve beside
# llama.cpp's llama-server, under the same clients (grove serve-bench, streaming, 1, 4 and 16 at
# once by default). Four servers per repetition, one after another, so that machine drift moves
# them alike: llama-server plain, llama-server speculative (draft-simple, its default draft length
# of 3), grove plain and grove speculative (the per-request "off" and "auto" of one grove server).
# Prints, per server and clients, the median aggregate tokens/s with min-max, and each one's ratio
# to its own plain serving.
#
# llama.cpp is built outside this project (../shared/tools/build-llama-cpp.sh); pass its bin/.
# Usage: scripts/compare-llama-server.sh LLAMA_BIN_DIR [CLIENTS=1,4,16] [REPS=3] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${1:?usage: $0 LLAMA_BIN_DIR [CLIENTS] [REPS] [THREADS]}
clients=${2:-1,4,16}
reps=${3:-3}
threads=${4:-2}
grove=build/release/tools/grove/grove
target=${TARGET:-models/grove-base-target.gguf}
draft=${DRAFT:-models/grove-base-draft.gguf}
port=${PORT:-18431}
most=$(tr ',' '\n' <<<"$clients" | sort -n | tail -1)
load=(--clients "$clients" --requests "${REQUESTS:-4}" --reps 1 -n "${MAX_TOKENS:-96}" --temp "${TEMP:-0}")
[ -x "$grove" ] || { echo "build grove first: cmake --preset release && cmake --build --preset release" >&2; exit 1; }
[ -x "$llama/llama-server" ] || { echo "no llama-server in $llama" >&2; exit 1; }

out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT

# Starts llama-server with the given extra arguments and waits until /health answers.
start_llama() {
  "$llama/llama-server" -m "$target" -t "$threads" -np "$most" -c $((most * 512)) --port "$port" \
    --no-webui "$@" >"$out/llama-server.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return
    kill -0 "$server" 2>/dev/null || { cat "$out/llama-server.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "llama-server did not come up" >&2
  exit 1
}
stop_llama() { kill "$server"; wait "$server" 2>/dev/null || true; server=; }

# Appends "server clients tokens/s" lines from serve-bench's table on stdin.
# Only the first table (grove's second one splits the server's time).
collect() { awk -v s="$1" -F'|' 'NF == 0 && rows {done = 1}
  !done && $2 ~ /^ *[0-9]+ *$/ {rows = 1; gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $4);
  print (s == "grove" ? "grove-" $3 : s), $2, $4}' >>"$out/runs"; }

for rep in $(seq "$reps"); do
  echo "repetition $rep of $reps" >&2
  start_llama
  "$grove" serve-bench --url "http://127.0.0.1:$port" --modes default "${load[@]}" | collect llama-plain
  stop_llama
  start_llama -md "$draft" --spec-type draft-simple
  "$grove" serve-bench --url "http://127.0.0.1:$port" --modes default "${load[@]}" | collect llama-spec
  stop_llama
  "$grove" serve-bench -m "$target" --draft "$draft" -t "$threads" --modes off,spec "${load[@]}" | collect grove
done

echo "| server | clients | tokens/s (median) | min-max | vs its plain serving |"
echo "|---|---:|---:|---:|---:|"
sort -k1,1 -k2,2n -k3,3g "$out/runs" | awk '
  { key = $1 " " $2; v[key, ++n[key]] = $3; if (!(key in seen)) { seen[key] = 1; order[++k] = key } }
  END {
    for (i = 1; i <= k; ++i) {
      key = order[i]; c = n[key]
      med[key] = (c % 2) ? v[key, (c + 1) / 2] : (v[key, c / 2] + v[key, c / 2 + 1]) / 2
      lo[key] = v[key, 1]; hi[key] = v[key, c]
    }
    for (i = 1; i <= k; ++i) {
      key = order[i]; split(key, part, " ")
      plain = part[1]; sub(/-spec$/, "-plain", plain)
      if (plain ~ /^grove-/) plain = "grove-off"
      base = med[plain " " part[2]]
      printf "| %s | %s | %.1f | %.1f-%.1f | %s |\n", part[1], part[2], med[key], lo[key], hi[key],
             (base > 0 ? sprintf("%.2fx", med[key] / base) : "-")
    }
  }'
