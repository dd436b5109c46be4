#!/usr/bin/env bash
# bench/rate_limit.sh (make bench-rate-limit) — what a rate limit adds to a request's latency:
# EchoOrder in JSON over HTTP/1.1 (wrk, bench/e2e.lua) through the release gateway (one worker
# thread, CPU 1) with no [rate_limit], with per-replica budgets, and with the budgets in a
# local redis-server (one EVALSHA per request; bench-backend, redis-server and wrk on CPU 0).
# Each mode once with one connection (a request's own latency) and once with 16 (under load);
# prints a markdown table of requests/s, p50 and p99, and the differences against no limit.
# A budget no request exhausts: every request is allowed, so every one pays the check.
#
# Settings: RL_DURATION seconds per run (default 10), RL_BUILD=0 to skip `cargo build`,
# RL_GATEWAY the gateway binary (default target/release/protogate).
# Needs wrk and redis-server (Debian's wrk and redis-server packages).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GATEWAY=${RL_GATEWAY:-target/release/protogate}
BACKEND=target/release/bench-backend
DURATION=${RL_DURATION:-10}
OUT=$(mktemp -d /tmp/protogate-rl.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

say() { echo "bench-rate-limit: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }
for tool in wrk redis-server redis-cli; do
  command -v $tool >/dev/null || die "$tool is missing (apt-get install wrk redis-server)"
done
if [[ ${RL_BUILD:-1} != 0 ]]; then
  cargo build --release -p protogate -p protogate-tests --bin protogate --bin bench-backend
fi
python3 bench/gen_bodies.py target/bench-bodies >/dev/null

wait_for() { # FILE REGEX PID
  for _ in $(seq 600); do
    grep -qE "$2" "$1" 2>/dev/null && { grep -oE "$2" "$1" | head -1; return; }
    kill -0 "$3" 2>/dev/null || die "process $3 ended: $(tail -5 "$1")"
    sleep 0.1
  done
  die "no line matching $2 in $1"
}

taskset -c 0 "$BACKEND" --listen 127.0.0.1:0 > "$OUT/backend.out" 2> "$OUT/backend.log" &
BACKEND_ADDR=$(wait_for "$OUT/backend.out" '[0-9.]+:[0-9]+' $!)
REDIS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
taskset -c 0 redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no > "$OUT/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 300); do
  [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && break
  kill -0 $REDIS_PID 2>/dev/null || die "redis-server ended: $(tail -3 "$OUT/redis.log")"
  sleep 0.1
done

# run MODE CONNECTIONS: prints "requests/s p50_us p99_us backend_errors".
run() {
  local config=$OUT/$1.toml
  : > "$config"
  case $1 in
    none) ;;
    local) printf '[rate_limit]\nper_client = 1000000000\n' > "$config" ;;
    redis) printf '[rate_limit]\nper_client = 1000000000\nredis = "redis://127.0.0.1:%s"\n' "$REDIS_PORT" > "$config" ;;
  esac
  taskset -c 1 "$GATEWAY" serve --proto proto/bench/bench.proto -I proto/bench --listen 127.0.0.1:0 \
    --worker-threads 1 --upstream "http://$BACKEND_ADDR" --config "$config" 2> "$OUT/gw.log" &
  local gw=$!
  local url
  url=$(wait_for "$OUT/gw.log" 'listening on http://[0-9.]+:[0-9]+' $gw)
  url=${url#listening on }
  E2E_BODY=target/bench-bodies/Order.json E2E_TYPE=application/json \
    taskset -c 0 wrk -t1 -c"$2" -d1s -s bench/e2e.lua "$url/bench.v1.BenchService/EchoOrder" > /dev/null
  E2E_BODY=target/bench-bodies/Order.json E2E_TYPE=application/json \
    taskset -c 0 wrk -t1 -c"$2" -d"${DURATION}s" -s bench/e2e.lua "$url/bench.v1.BenchService/EchoOrder" > "$OUT/wrk.txt"
  local errors
  errors=$(curl -s "$url/metrics" | awk '/^protogate_rate_limit_backend_errors_total/ { print $2 }')
  kill "$gw"; wait "$gw" 2>/dev/null || true
  python3 - "$OUT/wrk.txt" "${errors:-0}" <<'PY'
import re, sys
line = next(l for l in open(sys.argv[1]) if l.startswith("RESULT"))
f = dict(kv.split("=") for kv in line.split()[1:])
bad = sum(int(f[k]) for k in f if k.startswith("err_"))
if bad:
    sys.exit(f"{bad} requests failed: {line}")
print(int(f["requests"]) * 1e6 / int(f["duration_us"]), f["p50_us"], f["p99_us"], sys.argv[2])
PY
}

echo "| connections | rate limit | requests/s | p50 µs | p99 µs | p50 added | p99 added | Redis errors |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for c in 1 16; do
  read -r _ base50 base99 _ < <(run none "$c")
  for mode in none local redis; do
    read -r rps p50 p99 errors < <(run "$mode" "$c")
    printf '| %s | %s | %.0f | %s | %s | %+d | %+d | %s |\n' "$c" "$mode" "$rps" "$p50" "$p99" \
      $((p50 - base50)) $((p99 - base99)) "$errors"
  done
done
