#!/usr/bin/env bash
# Checks a live job's /metrics with `promtool check metrics` (Prometheus's own linter: base units,
# `_total` counters, help texts): runs examples/grafana/metrics-job.mjs with `onceflow run
# --metrics-port 0` in a temporary folder, waits for its second checkpoint, and pipes one scrape to
# promtool. Needs a build (`npm run build`) and promtool (Debian: apt-get install prometheus).
#
#   bash scripts/check-prometheus-metrics.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl not found: apt-get install curl" >&2; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cd "$work"
node "$root/packages/core/dist/cli.js" run "$root/examples/grafana/metrics-job.mjs" \
  --metrics-port 0 --log-level warn >"$work/stdout" 2>"$work/stderr" &
pid=$!

url=""
for _ in $(seq 1 300); do
  url=$(sed -n 's|^metrics on \(http://[^/]*/metrics\).*|\1|p' "$work/stdout" | head -n 1)
  [[ -n "$url" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/stdout" "$work/stderr" >&2; echo "the job exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/stdout" "$work/stderr" >&2; echo "no metrics address printed" >&2; exit 1; }

# Wait for the second completed checkpoint: every metric has been reported by then.
for _ in $(seq 1 300); do
  # A scrape that fails now (the server still starting) is tried again, not the end of the script.
  checkpoint=$({ curl -fsS "$url" 2>/dev/null || true; } | sed -n 's/^onceflow_last_completed_checkpoint_id{[^}]*} \([0-9]*\)$/\1/p' | head -n 1)
  [[ "${checkpoint:-0}" -ge 2 ]] && break
  sleep 0.1
done
[[ "${checkpoint:-0}" -ge 2 ]] || { cat "$work/stderr" >&2; echo "no checkpoint completed" >&2; exit 1; }

curl -fsS "$url" >"$work/metrics.txt"
echo "$(grep -c '^# TYPE' "$work/metrics.txt") metric families from $url"
promtool check metrics <"$work/metrics.txt"
echo "promtool check metrics: OK"
