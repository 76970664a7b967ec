#!/usr/bin/env bash
# Runs examples/docker-compose on the images of scripts/test-images/build.sh and checks its result:
# every sample order in the PostgreSQL table exactly once, at its latest version. Always takes the
# project down again (containers, network, volumes).
#
#   scripts/test-images/run-compose-example.sh        (after build.sh base kafka postgres node job)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
folder=$(cd "$here/../../examples/docker-compose" && pwd)
prefix=${ONCEFLOW_IMAGE_PREFIX:-onceflow-test}
project=onceflow-compose-$$
orders=${ORDERS:-1000}
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi

export KAFKA_IMAGE="$prefix/kafka:3.9.1" POSTGRES_IMAGE="$prefix/postgres:latest" JOB_IMAGE="$prefix/job:latest"
export ORDERS=$orders
# A free port on 127.0.0.1 for PostgreSQL (the file's default may be taken).
POSTGRES_PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
export POSTGRES_PORT

run() { "${compose[@]}" -p "$project" -f "$folder/compose.yaml" "$@"; }
down() { run down -v --remove-orphans >/dev/null 2>&1 || true; }
trap down EXIT

started=$(date +%s)
run up -d --no-build >/dev/null 2>&1 || { run logs --tail 40 >&2; exit 1; }
expected="$((orders / 2))|2|2"
result=""
for _ in $(seq 1 180); do
  result=$(run exec -T postgres env PGPASSWORD=onceflow psql -h 127.0.0.1 -U onceflow -d orders -Atc \
    "SELECT count(*), min(version), max(version) FROM orders" 2>/dev/null || true)
  [[ "$result" == "$expected" ]] && break
  sleep 1
done
if [[ "$result" != "$expected" ]]; then
  echo "compose example: expected rows|min|max version $expected, read '$result'" >&2
  run ps >&2
  run logs --tail 40 >&2
  exit 1
fi
echo "compose example: $((orders / 2)) orders, each once at version 2, in $(($(date +%s) - started)) s"
