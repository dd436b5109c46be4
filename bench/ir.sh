#!/usr/bin/env bash
# bench/ir.sh (make bench-ir) — the gateway's work per request counted, not timed: user-space
# instructions (callgrind's Ir) and system calls per request (EchoOrder unless IR_WORKLOAD says
# otherwise), for A/B comparisons on
# machines whose timings vary more than the difference sought (a shared VM varies 10-20 %
# between runs of one binary; the instruction counts repeat within 0.3 %).
#
# For each format × client: bench-backend and the release gateway (one worker thread) start,
# h2load sends IR_WARMUP requests, then more are counted — IR_REQUESTS with the gateway under
# callgrind (instrumentation switched on after the warm-up), IR_CALL_REQUESTS with it at full
# speed (gateway on CPU 1, backend and load on CPU 0, as bench/e2e.sh) while `perf stat`
# counts its system calls (the raw_syscalls:sys_enter tracepoint; strace slows every call and
# so changes how many frames share one). Prints a markdown table; the counts include
# everything the gateway does for the requests (its upstream calls too), not the backend's or
# the client's. System calls depend on timing (how many frames a write carries): compare them
# over several runs.
#
# Settings (environment):
#   IR_GATEWAY    gateway binary (default target/release/protogate): to compare builds
#   IR_WORKLOAD   EchoOrder (default), EchoRecords_1000, EchoLogs_1000 or ListRecords_1000
#                 (bench/e2e.sh's workloads; lower IR_REQUESTS and IR_CALL_REQUESTS for the
#                 large ones)
#   IR_PROFILES   a directory: each run's callgrind profile is kept there as cg.CLIENT.FORMAT
#                 (for callgrind_annotate)
#   IR_FORMATS    default "json protobuf"; also "grpc" (native gRPC, h2 only), "connect-proto",
#                 "connect-json" (Connect unary); IR_CLIENTS  default "h1 h2" (h2load --h1, or h2)
#   IR_REQUESTS   requests counted by callgrind (default 4000); IR_CALL_REQUESTS  by perf
#                 (default 40000); IR_WARMUP  before counting (default 500)
#   IR_TLS=1      the gateway listens with TLS (a P-256 certificate made by openssl)
#   IR_ENDPOINTS  N > 1: the upstream is a list of N URLs of the one backend
#   IR_AUTH       jwt: [auth] required, every request with an RS256 bearer token (2048-bit key
#                 made by openssl, its JWKS in a file); jwt-nocache: the same with
#                 token_cache = 0 (every signature checked); apikey: an API key instead;
#                 header: the same bearer token sent to a gateway without [auth]
#   IR_RATE_LIMIT=1  [rate_limit] on, a budget no request exhausts (the bucket's cost)
#   IR_RETRY=1    the service has a retry policy (no call fails: the policy's own cost)
#   IR_BUILD=0    skip `cargo build`
# Needs valgrind, perf (linux-perf), h2load (nghttp2-client), openssl for IR_TLS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GATEWAY=${IR_GATEWAY:-target/release/protogate}
BACKEND=target/release/bench-backend
FORMATS=${IR_FORMATS:-json protobuf}
CLIENTS=${IR_CLIENTS:-h1 h2}
REQUESTS=${IR_REQUESTS:-4000}
CALL_REQUESTS=${IR_CALL_REQUESTS:-40000}
WARMUP=${IR_WARMUP:-500}
ENDPOINTS=${IR_ENDPOINTS:-1}
OUT=$(mktemp -d /tmp/protogate-ir.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

say() { echo "bench-ir: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }
for tool in valgrind callgrind_control callgrind_annotate perf h2load; do
  command -v $tool >/dev/null || die "$tool is missing (apt-get install valgrind linux-perf nghttp2-client)"
done
if [[ ${IR_BUILD:-1} != 0 ]]; then
  cargo build --release -p protogate -p protogate-tests --bin protogate --bin bench-backend
fi
[[ -x $GATEWAY && -x $BACKEND ]] || die "$GATEWAY or $BACKEND missing"
python3 bench/gen_bodies.py target/bench-bodies >/dev/null
# The workload's request body in both formats, as bench/e2e.sh sends it.
WORKLOAD=${IR_WORKLOAD:-EchoOrder}
case $WORKLOAD in
  EchoOrder) METHOD=EchoOrder; MESSAGE=Order; SOURCE=target/bench-bodies/Order.json ;;
  EchoRecords_1000) METHOD=EchoRecords; MESSAGE=RecordList; SOURCE=target/bench-bodies/RecordList_1000.json ;;
  EchoLogs_1000) METHOD=EchoLogs; MESSAGE=LogBatch; SOURCE=target/bench-bodies/LogBatch_1000.json ;;
  ListRecords_1000) METHOD=ListRecords; MESSAGE=ListRecordsRequest; SOURCE= ;;
  *) die "IR_WORKLOAD=$WORKLOAD: not one of EchoOrder EchoRecords_1000 EchoLogs_1000 ListRecords_1000" ;;
esac
BODY=$OUT/body
if [[ -n $SOURCE ]]; then cp "$SOURCE" "$BODY.json"; else echo '{"count":1000}' > "$BODY.json"; fi
"$GATEWAY" convert --proto proto/bench/bench.proto -I proto/bench --message "bench.v1.$MESSAGE" \
  --from json --to protobuf < "$BODY.json" > "$BODY.protobuf"
# gRPC's body: the message in its 5-byte envelope.
python3 -c 'import sys; m = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(b"\0" + len(m).to_bytes(4, "big") + m)' \
  "$BODY.protobuf" > "$BODY.grpc"

wait_for() { # FILE REGEX PID
  for _ in $(seq 600); do
    grep -qE "$2" "$1" 2>/dev/null && { grep -oE "$2" "$1" | head -1; return; }
    kill -0 "$3" 2>/dev/null || die "process $3 ended: $(tail -5 "$1")"
    sleep 0.1
  done
  die "no line matching $2 in $1"
}

taskset -c 0 "$BACKEND" --listen 127.0.0.1:0 > "$OUT/backend.out" 2> "$OUT/backend.log" &
BACKEND_PID=$!
BACKEND_ADDR=$(wait_for "$OUT/backend.out" '[0-9.]+:[0-9]+' $BACKEND_PID)
ARGS=(serve --proto proto/bench/bench.proto -I proto/bench --listen 127.0.0.1:0 --worker-threads 1)
CONFIG=$OUT/gateway.toml
: > "$CONFIG"
if ((ENDPOINTS > 1)); then
  urls=$(for _ in $(seq "$ENDPOINTS"); do printf '"http://%s", ' "$BACKEND_ADDR"; done)
  printf 'upstream = [%s]\n' "${urls%, }" >> "$CONFIG"
else
  ARGS+=(--upstream "http://$BACKEND_ADDR")
fi
# Every request's credentials (IR_AUTH).
CREDENTIALS=()
b64url() { python3 -c 'import base64, sys; sys.stdout.write(base64.urlsafe_b64encode(sys.stdin.buffer.read()).rstrip(b"=").decode())'; }
case ${IR_AUTH:-} in
  '') ;;
  jwt|jwt-nocache|header)
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$OUT/jwt.key" 2>/dev/null
    n=$(openssl rsa -in "$OUT/jwt.key" -noout -modulus | cut -d= -f2 | python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))' | b64url)
    printf '{"keys":[{"kty":"RSA","kid":"bench","alg":"RS256","use":"sig","n":"%s","e":"AQAB"}]}' "$n" > "$OUT/jwks.json"
    header=$(printf '{"alg":"RS256","typ":"JWT","kid":"bench"}' | b64url)
    payload=$(printf '{"sub":"bench-client","iss":"https://idp.bench/","aud":"protogate","exp":%d}' $(($(date +%s) + 86400)) | b64url)
    signature=$(printf '%s.%s' "$header" "$payload" | openssl dgst -sha256 -sign "$OUT/jwt.key" | b64url)
    CREDENTIALS=(-H "authorization: Bearer $header.$payload.$signature")
    if [[ $IR_AUTH != header ]]; then
      printf '[auth]\njwks_file = "jwks.json"\nissuer = "https://idp.bench/"\naudiences = ["protogate"]\nrequired = true\n' >> "$CONFIG"
      if [[ $IR_AUTH == jwt-nocache ]]; then echo 'token_cache = 0' >> "$CONFIG"; fi
    fi
    ;;
  apikey)
    CREDENTIALS=(-H "x-api-key: bench-key-0123456789")
    printf '[auth]\nrequired = true\n[[auth.api_keys]]\nclient = "bench"\nsha256 = "%s"\n' \
      "$(printf bench-key-0123456789 | sha256sum | cut -d' ' -f1)" >> "$CONFIG"
    ;;
  *) die "IR_AUTH=$IR_AUTH: not one of jwt jwt-nocache apikey header" ;;
esac
if [[ ${IR_RATE_LIMIT:-0} == 1 ]]; then
  printf '[rate_limit]\nper_client = 1000000000\n' >> "$CONFIG"
fi
if [[ ${IR_RETRY:-0} == 1 ]]; then
  printf '[services."bench.v1.BenchService"]\nretry = { attempts = 3 }\n' >> "$CONFIG"
fi
[[ -s $CONFIG ]] && ARGS+=(--config "$CONFIG")
SCHEME=http
if [[ ${IR_TLS:-0} == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$OUT/tls.key" -out "$OUT/tls.crt" 2>/dev/null
  ARGS+=(--tls-cert "$OUT/tls.crt" --tls-key "$OUT/tls.key")
  SCHEME=https
fi

# load FORMAT CLIENT N URL: N requests — HTTP/1.1 on 16 keep-alive connections (as wrk in
# bench/e2e.sh), or HTTP/2 on 4 connections × 4 streams; fails unless all succeed.
load() {
  local how=(-c 4 -m 4) body=$1 headers
  case $1 in
    json) headers=(-H "content-type: application/json" -H "accept: application/json") ;;
    protobuf) headers=(-H "content-type: application/x-protobuf" -H "accept: application/x-protobuf") ;;
    grpc) headers=(-H "content-type: application/grpc" -H "te: trailers") ;;
    connect-proto) body=protobuf headers=(-H "content-type: application/proto" -H "connect-protocol-version: 1") ;;
    connect-json) body=json headers=(-H "content-type: application/json" -H "connect-protocol-version: 1") ;;
    *) die "format $1: not one of json protobuf grpc connect-proto connect-json" ;;
  esac
  [[ $2 == h1 ]] && how=(--h1 -c 16 -m 1)
  taskset -c 0 h2load "${how[@]}" -n "$3" -d "$BODY.$body" "${headers[@]}" ${CREDENTIALS[@]+"${CREDENTIALS[@]}"} \
    "$4/bench.v1.BenchService/$METHOD" > "$OUT/load.txt"
  grep -q "$3 succeeded" "$OUT/load.txt" || die "not every request succeeded: $(grep requests: "$OUT/load.txt")"
}

# gateway WRAPPER...: starts the gateway under WRAPPER; sets GW_PID (the wrapper's) and GW_URL.
gateway() {
  "$@" "$GATEWAY" "${ARGS[@]}" 2> "$OUT/gw.log" &
  GW_PID=$!
  GW_URL=$(wait_for "$OUT/gw.log" "listening on $SCHEME://[0-9.]+:[0-9]+" $GW_PID)
  GW_URL=${GW_URL#listening on }
}

# stop: ends the gateway at once (the counts are taken).
stop() {
  kill -KILL "$GW_PID" 2>/dev/null || true
  wait "$GW_PID" 2>/dev/null || true
}

echo "| client | format | Ir / request | system calls / request |"
echo "|---|---|---:|---:|"
for fmt in $FORMATS; do
  for client in $CLIENTS; do
    # gRPC needs HTTP/2 (the gateway refuses it over HTTP/1.1).
    [[ $fmt == grpc && $client == h1 ]] && continue
    gateway valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/cg.out"
    load "$fmt" "$client" "$WARMUP" "$GW_URL"
    callgrind_control -i on "$GW_PID" >/dev/null 2>&1
    load "$fmt" "$client" "$REQUESTS" "$GW_URL"
    callgrind_control -d "$GW_PID" >/dev/null 2>&1
    ir=$(callgrind_annotate "$OUT/cg.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    if [[ -n ${IR_PROFILES:-} ]]; then
      mkdir -p "$IR_PROFILES" && cp "$OUT/cg.out.1" "$IR_PROFILES/cg.$client.$fmt"
    fi
    stop
    # System calls: the gateway at full speed (pinned as in bench/e2e.sh, the load on the
    # other CPU), counted by the kernel's tracepoint while the counted requests run.
    gateway taskset -c 1
    load "$fmt" "$client" "$WARMUP" "$GW_URL"
    # perf attaches with its counter off and turns it on when told; its acknowledgement says
    # it counts from then on (no guess of how long attaching takes).
    rm -f "$OUT/perf.ctl" "$OUT/perf.ack"
    mkfifo "$OUT/perf.ctl" "$OUT/perf.ack"
    perf stat -x, -e raw_syscalls:sys_enter -p "$GW_PID" -o "$OUT/perf.txt" \
      -D -1 --control "fifo:$OUT/perf.ctl,$OUT/perf.ack" 2> "$OUT/perf.log" &
    PERF_PID=$!
    timeout 30 bash -c 'echo enable > "$1"; read -r answer < "$2"; [[ $answer == ack* ]]' _ \
      "$OUT/perf.ctl" "$OUT/perf.ack" || die "perf did not start counting within 30 s"
    load "$fmt" "$client" "$CALL_REQUESTS" "$GW_URL"
    kill -INT $PERF_PID; wait $PERF_PID 2>/dev/null || true
    stop
    calls=$(awk -F, '/raw_syscalls/ { print $1 }' "$OUT/perf.txt")
    echo "| $client | $fmt | $((ir / REQUESTS)) | $(python3 -c 'import sys; c, n = map(int, sys.argv[1:]); print(f"{c / n:.2f}")' "$calls" "$CALL_REQUESTS") |"
  done
done
