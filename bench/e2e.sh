#!/usr/bin/env bash
# bench/e2e.sh (make bench-e2e) — protogate's end-to-end benchmark on loopback.
#
# Starts bench-backend (bench.v1.BenchService, raw mode: Echo* return the request bytes,
# ListRecords serves cached bytes) pinned to CPU 0 and the release gateway pinned to CPU 1 in
# front of it, checks every workload × format once, then loads each with wrk (HTTP/1.1
# keep-alive) and h2load (HTTP/2), both on CPU 0, plus direct gRPC to the backend with h2load (the
# floor no gateway can beat). Writes target/bench-e2e/results.md (and results.tsv, raw/) and
# prints it.
#
# Settings (environment):
#   E2E_DURATION   measured seconds per run (default 5; 1 for a smoke test)
#   E2E_WARMUP     warm-up seconds before every run, not measured (default 1)
#   E2E_WRK_CONNS  wrk connections (default 16; -t1)
#   E2E_H2_CONNS, E2E_H2_STREAMS  h2load connections × concurrent streams (default 4 × 4; -t1);
#                  the direct gRPC runs use the same
#   E2E_WORKLOADS  default "EchoOrder ListRecords_1000 EchoLogs_1000 EchoRecords_1000"
#   E2E_FORMATS    default "json msgpack protobuf"
#   E2E_GATEWAY_CPU (default 1), E2E_LOAD_CPU (default 0: backend and load generators)
#   E2E_MAX_SECONDS  budget for everything after the build (default 480): runs that would end
#                  past it are skipped and listed as such
#   E2E_QUIET_WAIT seconds to wait for a quiet machine before measuring (default 60); before each
#                  run E2E_RUN_QUIET_WAIT more at most (default 10)
#   E2E_ATTEMPTS   a run during which other processes used more than E2E_OTHER_MAX % of a core
#                  (default 10) is repeated, up to E2E_ATTEMPTS runs in all (default 2)
#   E2E_BUILD=0    skip `cargo build` (use the binaries in target/release)
#   E2E_GATEWAY    the gateway binary (default target/release/protogate): to compare builds
#   E2E_OUT        where results go (default target/bench-e2e)
#   E2E_CONFIG     a config file for the gateway (--config), e.g. one with [compression]
#   E2E_ACCEPT_ENCODING  sent as Accept-Encoding by wrk and h2load (default: none); the
#                  answers' bytes per request on the wire go into results.md
#   E2E_TLS=1      the gateway listens with TLS (a P-256 certificate made by openssl for the
#                  run): wrk and h2load (ALPN h2) speak https to it, keep-alive as before
#   E2E_ENDPOINTS  N > 1: the gateway's upstream is a list of N URLs of the one backend, N
#                  endpoints balanced by the pool (the cost of balancing; not with E2E_CONFIG)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
COMMAND="bench/e2e.sh${*:+ $*}"
[[ -n ${MAKELEVEL:-} ]] && COMMAND="make bench-e2e"
for v in $(compgen -e | grep '^E2E_' | sort -r || true); do COMMAND="$v=${!v} $COMMAND"; done

DURATION=${E2E_DURATION:-5}
WARMUP=${E2E_WARMUP:-1}
WRK_CONNS=${E2E_WRK_CONNS:-16}
H2_CONNS=${E2E_H2_CONNS:-4}
H2_STREAMS=${E2E_H2_STREAMS:-4}
WORKLOADS=${E2E_WORKLOADS:-EchoOrder ListRecords_1000 EchoLogs_1000 EchoRecords_1000}
FORMATS=${E2E_FORMATS:-json msgpack protobuf}
GATEWAY_CPU=${E2E_GATEWAY_CPU:-1}
LOAD_CPU=${E2E_LOAD_CPU:-0}
MAX_SECONDS=${E2E_MAX_SECONDS:-480}
QUIET_WAIT=${E2E_QUIET_WAIT:-60}
QUIET_CORES=0.3 # whole-machine busy cores that still count as quiet

OUT=${E2E_OUT:-target/bench-e2e}
RAW=$OUT/raw
BODIES=$OUT/bodies
SHARED_BODIES=target/bench-bodies
PROTO=(--proto proto/bench/bench.proto -I proto/bench)
GATEWAY=${E2E_GATEWAY:-target/release/protogate}
BACKEND=target/release/bench-backend
UTIL=(python3 bench/e2e_util.py)
TCK=$(getconf CLK_TCK)

say() { echo "bench-e2e: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

# --- build and tools -------------------------------------------------------------------------

if [[ ${E2E_BUILD:-1} != 0 ]]; then
  cargo build --release -p protogate -p protogate-tests --bin protogate --bin bench-backend
fi
[[ -x $GATEWAY && -x $BACKEND ]] || die "$GATEWAY or $BACKEND missing"

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v curl >/dev/null || missing+=(curl)
command -v taskset >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
  sudo=(); [[ $(id -u) == 0 ]] || sudo=(sudo)
  say "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

START=$SECONDS # the time budget starts after the build
rm -rf "$OUT"
mkdir -p "$RAW" "$BODIES"

# --- processes: started here, stopped by their pid on exit -----------------------------------

BACKEND_PID=""
GATEWAY_PID=""
cleanup() {
  local p
  for p in $GATEWAY_PID $BACKEND_PID; do
    kill "$p" 2>/dev/null || true
  done
  for p in $GATEWAY_PID $BACKEND_PID; do
    timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null || kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits (max 30 s) for a line matching the regex $2 in file $1 written by pid $3; prints the match.
wait_for_line() {
  local file=$1 re=$2 pid=$3 m
  for _ in $(seq 1 300); do
    m=$(grep -o -m1 -E "$re" "$file" 2>/dev/null || true)
    if [[ -n $m ]]; then echo "$m"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { cat "$file" >&2; die "process $pid exited"; }
    sleep 0.1
  done
  cat "$file" >&2
  die "no line /$re/ in $file within 30 s"
}

# --- workloads ---------------------------------------------------------------------------------

method_of() { echo "${1%%_*}"; }
count_of() { echo "${1##*_}"; }
request_message() {
  case $1 in
    EchoOrder) echo bench.v1.Order ;;
    ListRecords_*) echo bench.v1.ListRecordsRequest ;;
    EchoLogs_*) echo bench.v1.LogBatch ;;
    EchoRecords_*) echo bench.v1.RecordList ;;
    *) die "unknown workload $1" ;;
  esac
}
response_message() {
  case $1 in
    ListRecords_*) echo bench.v1.RecordList ;;
    *) request_message "$1" ;;
  esac
}
# The canonical JSON request body (bench/gen_bodies.py writes all but ListRecordsRequest).
request_json() {
  case $1 in
    EchoOrder) echo "$SHARED_BODIES/Order.json" ;;
    ListRecords_*) echo "$BODIES/$1.req.json" ;;
    EchoLogs_*) echo "$SHARED_BODIES/LogBatch_$(count_of "$1").json" ;;
    EchoRecords_*) echo "$SHARED_BODIES/RecordList_$(count_of "$1").json" ;;
  esac
}
# The JSON the answer must equal: the request for Echo*, the records ListRecords defines (the
# same list the generator writes for EchoRecords).
expected_json() {
  case $1 in
    ListRecords_*) echo "$SHARED_BODIES/RecordList_$(count_of "$1").json" ;;
    *) request_json "$1" ;;
  esac
}
content_type() {
  case $1 in
    json) echo application/json ;;
    msgpack) echo application/msgpack ;;
    protobuf) echo application/x-protobuf ;;
    *) die "unknown format $1" ;;
  esac
}
convert() { # message from to < in > out
  timeout 60 "$GATEWAY" convert "${PROTO[@]}" --message "$1" --from "$2" --to "$3"
}

say "writing bodies"
python3 bench/gen_bodies.py "$SHARED_BODIES" >/dev/null
for wl in $WORKLOADS; do
  if [[ $wl == ListRecords_* ]]; then
    printf '{"count":%d}' "$(count_of "$wl")" > "$BODIES/$wl.req.json"
  fi
  src=$(request_json "$wl")
  [[ -f $src && -f $(expected_json "$wl") ]] || die "no body for $wl ($src)"
  msg=$(request_message "$wl")
  for fmt in $FORMATS; do
    convert "$msg" json "$fmt" < "$src" > "$BODIES/$wl.$fmt" || die "converting $src to $fmt"
  done
  convert "$msg" json protobuf < "$src" > "$BODIES/$wl.pb"
  "${UTIL[@]}" frame "$BODIES/$wl.pb" "$BODIES/$wl.grpc"
done

# --- machine state -----------------------------------------------------------------------------

# Busy clock ticks: "TASK CPU0 CPU1 …" — TASK = user+nice+system over the machine (time spent
# running processes), CPUn = user+nice+system+irq+softirq of CPU n.
proc_stat() {
  local name u n s idle io irq sirq rest task="" per=()
  while read -r name u n s idle io irq sirq rest; do
    [[ $name == cpu* ]] || break
    if [[ $name == cpu ]]; then task=$((u + n + s)); else per+=($((u + n + s + irq + sirq))); fi
  done < /proc/stat
  echo "$task ${per[*]}"
}
# utime+stime ticks of one process (all its threads)
proc_ticks() {
  local line rest
  read -r line < "/proc/$1/stat" || { echo 0; return; }
  rest=${line##*) }
  set -- $rest
  echo $((${12} + ${13}))
}
vm_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
# user+system CPU, in ms, of the children this shell has waited for: bash's `times` (second
# line). Run in the main shell (a $(…) subshell has no children of its own), written to $1.
children_ms() {
  local t u s
  times > "$1.times"
  t=$(tail -1 "$1.times")
  u=${t%% *}; s=${t##* }
  awk -v u="$u" -v s="$s" 'function ms(x,  m) { m = x; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", x); sub(/s$/, "", x); return (m * 60 + x) * 1000 }
    BEGIN { printf "%d", ms(u) + ms(s) }' > "$1"
  rm -f "$1.times"
}

# Waits (max QUIET_WAIT s) until the machine uses less than QUIET_CORES cores; prints the state.
wait_quiet() {
  local a b busy waited=0
  while :; do
    a=$(proc_stat); sleep 1; b=$(proc_stat)
    busy=$(awk -v a="${a%% *}" -v b="${b%% *}" -v h="$TCK" 'BEGIN { printf "%.2f", (b - a) / h }')
    if awk -v x="$busy" -v q="$QUIET_CORES" 'BEGIN { exit !(x <= q) }'; then
      echo "quiet (${busy} busy cores over 1 s, after ${waited} s of waiting)"; return
    fi
    if ((waited >= QUIET_WAIT)); then
      echo "NOT quiet: ${busy} busy cores over 1 s after waiting ${waited} s; figures are contaminated"
      return
    fi
    say "machine busy (${busy} cores), waiting"
    sleep 2; waited=$((waited + 3))
  done
}

# --- start backend and gateway -----------------------------------------------------------------

say "starting bench-backend on CPU $LOAD_CPU"
taskset -c "$LOAD_CPU" "$BACKEND" --listen 127.0.0.1:0 > "$OUT/backend.out" 2> "$OUT/backend.log" &
BACKEND_PID=$!
BACKEND_ADDR=$(wait_for_line "$OUT/backend.out" 'listening on [0-9.]+:[0-9]+' "$BACKEND_PID")
BACKEND_ADDR=${BACKEND_ADDR#listening on }

say "starting the gateway on CPU $GATEWAY_CPU"
GATEWAY_CMD=(serve "${PROTO[@]}" --listen 127.0.0.1:0 --downgrade-log-interval 60s)
ENDPOINTS=${E2E_ENDPOINTS:-1}
if ((ENDPOINTS > 1)); then
  [[ -z ${E2E_CONFIG:-} ]] || die "E2E_ENDPOINTS and E2E_CONFIG together are not supported"
  urls=$(for _ in $(seq "$ENDPOINTS"); do printf '"http://%s", ' "$BACKEND_ADDR"; done)
  printf 'upstream = [%s]\n' "${urls%, }" > "$OUT/endpoints.toml"
  GATEWAY_CMD+=(--config "$OUT/endpoints.toml")
else
  GATEWAY_CMD+=(--upstream "http://$BACKEND_ADDR")
fi
[[ -n ${E2E_CONFIG:-} ]] && GATEWAY_CMD+=(--config "$E2E_CONFIG")
SCHEME=http
CURL_TLS=()
CURL_H2=(--http2-prior-knowledge)
if [[ ${E2E_TLS:-0} == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$OUT/tls.key" -out "$OUT/tls.crt" 2>/dev/null ||
    die "openssl could not make the certificate"
  GATEWAY_CMD+=(--tls-cert "$OUT/tls.crt" --tls-key "$OUT/tls.key")
  SCHEME=https
  CURL_TLS=(--cacert "$OUT/tls.crt")
  CURL_H2=(--http2)
fi
ENCODING_HEADER=()
[[ -n ${E2E_ACCEPT_ENCODING:-} ]] && ENCODING_HEADER=(-H "accept-encoding: $E2E_ACCEPT_ENCODING")
taskset -c "$GATEWAY_CPU" "$GATEWAY" "${GATEWAY_CMD[@]}" 2> "$OUT/gateway.log" &
GATEWAY_PID=$!
GATEWAY_ADDR=$(wait_for_line "$OUT/gateway.log" "listening on $SCHEME://[0-9.]+:[0-9]+" "$GATEWAY_PID")
GATEWAY_ADDR=${GATEWAY_ADDR#listening on $SCHEME://}
GW_URL=$SCHEME://$GATEWAY_ADDR
GATEWAY_THREADS=$(ls "/proc/$GATEWAY_PID/task" | wc -l)
GATEWAY_RSS0=$(vm_kib "$GATEWAY_PID" VmRSS)
say "backend $BACKEND_ADDR (pid $BACKEND_PID), gateway $GATEWAY_ADDR (pid $GATEWAY_PID, $GATEWAY_THREADS threads)"

# --- correctness, once per workload × format, before any load ----------------------------------

say "checking answers"
CHECKS=$RAW/checks.txt
: > "$CHECKS"
check_fail() { cat "$CHECKS" >&2; die "check: $*"; }
for wl in $WORKLOADS; do
  method=$(method_of "$wl")
  resp_msg=$(response_message "$wl")
  expected=$(expected_json "$wl")
  # direct gRPC: status 200, grpc-status 0 (curl's header dump includes trailers), the message
  c="$RAW/check_${wl}_direct"
  code=$(curl -sS --max-time 20 --http2-prior-knowledge -o "$c.body" -D "$c.headers" -w '%{http_code}' \
    -H 'content-type: application/grpc' -H 'te: trailers' --data-binary "@$BODIES/$wl.grpc" \
    "http://$BACKEND_ADDR/bench.v1.BenchService/$method") || check_fail "$wl direct: curl failed"
  [[ $code == 200 ]] || check_fail "$wl direct: HTTP $code"
  grep -qi '^grpc-status: 0' "$c.headers" || check_fail "$wl direct: $(grep -i grpc- "$c.headers" | tr -d '\r')"
  "${UTIL[@]}" unframe "$c.body" "$c.pb" || check_fail "$wl direct: answer framing"
  convert "$resp_msg" protobuf json < "$c.pb" > "$c.json" || check_fail "$wl direct: answer does not convert"
  "${UTIL[@]}" same-json "$expected" "$c.json" >> "$CHECKS" || check_fail "$wl direct: wrong answer"
  echo "ok $wl direct gRPC: grpc-status 0, $(wc -c < "$c.pb") B protobuf, converts to the expected JSON" >> "$CHECKS"

  for fmt in $FORMATS; do
    ct=$(content_type "$fmt")
    c="$RAW/check_${wl}_$fmt"
    for proto in h1 h2; do
      opt=(--http1.1); [[ $proto == h2 ]] && opt=("${CURL_H2[@]}")
      code=$(curl -sS --max-time 20 "${CURL_TLS[@]}" "${opt[@]}" -o "$c.$proto" -D "$c.$proto.headers" -w '%{http_code}' \
        -H "content-type: $ct" -H "accept: $ct" --data-binary "@$BODIES/$wl.$fmt" \
        "$GW_URL/bench.v1.BenchService/$method") || check_fail "$wl $fmt $proto: curl failed"
      [[ $code == 200 ]] || check_fail "$wl $fmt $proto: HTTP $code: $(head -c 300 "$c.$proto")"
      grep -qi "^content-type: $ct" "$c.$proto.headers" ||
        check_fail "$wl $fmt $proto: $(grep -i '^content-type' "$c.$proto.headers" | tr -d '\r')"
    done
    cmp -s "$c.h1" "$c.h2" || check_fail "$wl $fmt: HTTP/1.1 and HTTP/2 answers differ"
    convert "$resp_msg" "$fmt" json < "$c.h1" > "$c.json" || check_fail "$wl $fmt: answer does not convert"
    "${UTIL[@]}" same-json "$expected" "$c.json" >> "$CHECKS" || check_fail "$wl $fmt: wrong answer"
    note=""
    if [[ $fmt == protobuf ]]; then
      cmp -s "$c.h1" "$RAW/check_${wl}_direct.pb" ||
        check_fail "$wl protobuf: the answer is not the upstream's bytes"
      note=", byte-identical to the direct gRPC answer"
    fi
    echo "ok $wl $fmt: HTTP/1.1 and HTTP/2 200, $ct, $(wc -c < "$c.h1") B, converts to the expected JSON$note" >> "$CHECKS"
  done
done
# With Accept-Encoding: the bytes an answer takes on the wire, and the same answer once decoded.
if [[ -n ${E2E_ACCEPT_ENCODING:-} ]]; then
  for wl in $WORKLOADS; do
    for fmt in $FORMATS; do
      ct=$(content_type "$fmt")
      c="$RAW/check_${wl}_$fmt"
      curl -sS --max-time 20 "${CURL_TLS[@]}" -o "$c.encoded" -D "$c.encoded.headers" -H "content-type: $ct" -H "accept: $ct" \
        "${ENCODING_HEADER[@]}" --data-binary "@$BODIES/$wl.$fmt" "$GW_URL/bench.v1.BenchService/$(method_of "$wl")" ||
        check_fail "$wl $fmt: curl with accept-encoding failed"
      curl -sS --max-time 20 "${CURL_TLS[@]}" --compressed -o "$c.decoded" -H "content-type: $ct" -H "accept: $ct" \
        "${ENCODING_HEADER[@]}" --data-binary "@$BODIES/$wl.$fmt" "$GW_URL/bench.v1.BenchService/$(method_of "$wl")" ||
        check_fail "$wl $fmt: curl --compressed failed"
      cmp -s "$c.decoded" "$c.h1" || check_fail "$wl $fmt: the decoded answer differs from the plain one"
      coding=$(grep -i '^content-encoding:' "$c.encoded.headers" | tr -d '\r' | awk '{ print $2 }')
      echo "ok $wl $fmt: ${coding:-identity} on the wire $(wc -c < "$c.encoded") B, $(wc -c < "$c.h1") B uncompressed; decodes to the same answer" >> "$CHECKS"
    done
  done
fi
cat "$CHECKS" >&2

# --- load --------------------------------------------------------------------------------------

QUIET=$(wait_quiet)
say "$QUIET"
LOAD0=$(cat /proc/loadavg)

TSV=$OUT/results.tsv
printf '%s\n' "workload client format rps p50_ms p99_ms gw_cpu_ms_per_1k gw_cpu_pct gw_rss_mib errors requests wall_s be_cpu_ms_per_1k load_cpu_s cpu0_pct cpu1_pct other_pct note" |
  tr ' ' '\t' > "$TSV"
SKIPPED=()
RUN_COST=$((WARMUP + DURATION + 3))
ATTEMPTS=${E2E_ATTEMPTS:-2}
OTHER_MAX=${E2E_OTHER_MAX:-10}
RUN_QUIET_WAIT=${E2E_RUN_QUIET_WAIT:-10}

# measure CLIENT FORMAT WORKLOAD TAG: one warm-up and one measured run. Sets ROW (the TSV row
# without its note), NOTE, OTHER (% of a core used by other processes) and SUMMARY.
measure() {
  local client=$1 fmt=$2 wl=$3 tag=$4 method ct url cmd warm
  method=$(method_of "$wl")
  case $client in
    "wrk h1")
      ct=$(content_type "$fmt")
      url="$GW_URL/bench.v1.BenchService/$method"
      cmd=(wrk -t1 -c"$WRK_CONNS" --timeout 10s --latency -s bench/e2e.lua "$url")
      export E2E_BODY="$BODIES/$wl.$fmt" E2E_TYPE="$ct"
      warm=(-d"${WARMUP}s"); set -- -d"${DURATION}s" ;;
    "h2load h2")
      ct=$(content_type "$fmt")
      url="$GW_URL/bench.v1.BenchService/$method"
      cmd=(h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -d "$BODIES/$wl.$fmt" -H "content-type: $ct" -H "accept: $ct" "${ENCODING_HEADER[@]}" "$url")
      warm=(-D "$WARMUP"); set -- -D "$DURATION" --log-file="$RAW/$tag.log" ;;
    "h2load gRPC")
      # Native gRPC through the gateway: relayed, the same body as direct gRPC.
      url="$GW_URL/bench.v1.BenchService/$method"
      cmd=(h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -d "$BODIES/$wl.grpc" -H 'content-type: application/grpc' -H 'te: trailers' "$url")
      warm=(-D "$WARMUP"); set -- -D "$DURATION" --log-file="$RAW/$tag.log" ;;
    "direct gRPC")
      url="http://$BACKEND_ADDR/bench.v1.BenchService/$method"
      cmd=(h2load -t1 -c"$H2_CONNS" -m"$H2_STREAMS" -d "$BODIES/$wl.grpc" -H 'content-type: application/grpc' -H 'te: trailers' "$url")
      warm=(-D "$WARMUP"); set -- -D "$DURATION" --log-file="$RAW/$tag.log" ;;
  esac
  taskset -c "$LOAD_CPU" timeout $((WARMUP + 20)) "${cmd[0]}" "${warm[@]}" "${cmd[@]:1}" > "$RAW/$tag.warmup.txt" 2>&1 || true

  local reset=ok
  echo 5 > "/proc/$GATEWAY_PID/clear_refs" 2>/dev/null || reset=failed
  local s0 g0 b0 l0 t0 s1 g1 b1 l1 t1 rc=0
  children_ms "$RAW/.load0"
  s0=$(proc_stat); g0=$(proc_ticks "$GATEWAY_PID"); b0=$(proc_ticks "$BACKEND_PID")
  t0=$(date +%s%N)
  taskset -c "$LOAD_CPU" timeout $((DURATION + 20)) "${cmd[0]}" "$@" "${cmd[@]:1}" > "$RAW/$tag.txt" 2>&1 || rc=$?
  t1=$(date +%s%N)
  s1=$(proc_stat); g1=$(proc_ticks "$GATEWAY_PID"); b1=$(proc_ticks "$BACKEND_PID")
  children_ms "$RAW/.load1"
  l0=$(cat "$RAW/.load0"); l1=$(cat "$RAW/.load1")
  local hwm
  hwm=$(vm_kib "$GATEWAY_PID" VmHWM)
  kill -0 "$GATEWAY_PID" 2>/dev/null || die "the gateway died during $tag (see $OUT/gateway.log)"

  local requests rps p50 p99 errors
  if [[ $client == "wrk h1" ]]; then
    local res
    res=$(grep '^RESULT' "$RAW/$tag.txt" || true)
    [[ -n $res ]] || { cat "$RAW/$tag.txt" >&2; die "wrk failed (rc $rc) for $tag"; }
    read -r requests rps p50 p99 errors < <(echo "$res" | awk '{
      for (i = 2; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] }
      printf "%d %.1f %.3f %.3f %d\n", v["requests"], v["requests"] / (v["duration_us"] / 1e6),
        v["p50_us"] / 1000, v["p99_us"] / 1000,
        v["err_connect"] + v["err_read"] + v["err_write"] + v["err_status"] + v["err_timeout"] }')
  else
    local fin req pct
    fin=$(grep -m1 '^finished in' "$RAW/$tag.txt" || true)
    [[ -n $fin ]] || { cat "$RAW/$tag.txt" >&2; die "h2load failed (rc $rc) for $tag"; }
    req=$(grep -m1 '^requests:' "$RAW/$tag.txt")
    pct=$("${UTIL[@]}" pct "$RAW/$tag.log")
    rm -f "$RAW/$tag.log"
    # requests: T total, S started, D done, OK succeeded, F failed, E errored, TO timeout
    read -r requests rps p50 p99 errors < <(printf '%s\n%s\n%s\n' "$fin" "$req" "$pct" | awk '
      /^finished in/ { rps = $4; gsub(",", "", rps) }
      /^requests:/ { done = $6; ok = $8; tmo = $14 }
      /^n=/ { for (i = 1; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] } }
      END { printf "%d %.1f %.3f %.3f %d\n", ok, rps, v["p50_us"] / 1000, v["p99_us"] / 1000, done - ok + tmo }')
  fi

  # CPU accounting
  local -a sa sb
  read -r -a sa <<< "$s0"; read -r -a sb <<< "$s1"
  local wall gw_ms be_ms load_ms other_ms
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  gw_ms=$(( (g1 - g0) * 1000 / TCK )); be_ms=$(( (b1 - b0) * 1000 / TCK )); load_ms=$((l1 - l0))
  other_ms=$(( (sb[0] - sa[0]) * 1000 / TCK - gw_ms - be_ms - load_ms ))
  ((other_ms < 0)) && other_ms=0
  local cpu0=$((LOAD_CPU + 1)) cpu1=$((GATEWAY_CPU + 1))
  local row
  row=$(awk -v req="$requests" -v wall="$wall" -v gw="$gw_ms" -v be="$be_ms" -v ld="$load_ms" -v oth="$other_ms" \
    -v c0="$(( (sb[cpu0] - sa[cpu0]) * 1000 / TCK ))" -v c1="$(( (sb[cpu1] - sa[cpu1]) * 1000 / TCK ))" \
    -v hwm="$hwm" -v direct="$([[ $client == "direct gRPC" ]] && echo 1 || echo 0)" 'BEGIN {
      k = req > 0 ? req / 1000 : 1
      if (direct) printf "-\t-\t-"
      else printf "%.2f\t%.0f\t%.1f", gw / k, gw / 10 / wall, hwm / 1024
      printf "\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f", wall, be / k, ld / 1000, c0 / 10 / wall, c1 / 10 / wall, oth / 10 / wall }')
  local gwcpu gwpct rss wall_s be_k load_s c0p c1p othp
  IFS=$'\t' read -r gwcpu gwpct rss wall_s be_k load_s c0p c1p othp <<< "$row"
  NOTE=""
  [[ $reset == ok || $client == "direct gRPC" ]] || NOTE="VmHWM not reset (cumulative peak)"
  ((rc == 0)) || NOTE="${NOTE:+$NOTE; }load tool exit $rc"
  OTHER=$othp
  ROW=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' \
    "$wl" "$client" "$fmt" "$rps" "$p50" "$p99" "$gwcpu" "$gwpct" "$rss" "$errors" "$requests" \
    "$wall_s" "$be_k" "$load_s" "$c0p" "$c1p" "$othp")
  SUMMARY=$(printf '%-17s %-12s %-9s %9s req/s  p50 %7s ms  p99 %7s ms  gw %6s ms/1k (%s%%)  errors %s  other %s%%' \
    "$wl" "$client" "$fmt" "$rps" "$p50" "$p99" "$gwcpu" "$gwpct" "$errors" "$othp")
}

# Waits (max RUN_QUIET_WAIT s) until the machine is below QUIET_CORES busy cores (0.5 s samples).
wait_quiet_run() {
  local a b busy waited=0
  while ((waited < RUN_QUIET_WAIT * 2)); do
    a=$(proc_stat); sleep 0.5; b=$(proc_stat)
    busy=$(awk -v a="${a%% *}" -v b="${b%% *}" -v h="$TCK" 'BEGIN { printf "%.2f", (b - a) / h * 2 }')
    awk -v x="$busy" -v q="$QUIET_CORES" 'BEGIN { exit !(x <= q) }' && return 0
    waited=$((waited + 1))
  done
  say "machine still busy (${busy} cores) after ${RUN_QUIET_WAIT} s; measuring anyway"
}

# run_load CLIENT FORMAT WORKLOAD: measures, and repeats (up to ATTEMPTS in all) a run during
# which other processes used more than OTHER_MAX % of a core; appends the last to the TSV.
run_load() {
  local client=$1 fmt=$2 wl=$3 tag attempt note
  tag="${wl}_${client// /_}_$fmt"
  for attempt in $(seq 1 "$ATTEMPTS"); do
    if ((SECONDS - START + RUN_COST > MAX_SECONDS)); then
      if ((attempt == 1)); then
        SKIPPED+=("$wl/$client/$fmt"); say "skipping $tag: E2E_MAX_SECONDS=$MAX_SECONDS reached"; return
      fi
      break
    fi
    wait_quiet_run
    measure "$client" "$fmt" "$wl" "$tag"
    say "$SUMMARY"
    awk -v o="$OTHER" -v m="$OTHER_MAX" 'BEGIN { exit !(o > m) }' || break
    ((attempt < ATTEMPTS)) && say "other processes used ${OTHER}% of a core: repeating"
  done
  note=$NOTE
  if awk -v o="$OTHER" -v m="$OTHER_MAX" 'BEGIN { exit !(o > m) }'; then
    note="${note:+$note; }other processes used ${OTHER}% of a core"
  fi
  ((attempt == 1)) || note="${note:+$note; }attempt $attempt"
  printf '%s\t%s\n' "$ROW" "${note:--}" >> "$TSV"
}

for wl in $WORKLOADS; do
  run_load "direct gRPC" protobuf "$wl"
  run_load "h2load gRPC" protobuf "$wl"
  for fmt in $FORMATS; do
    run_load "wrk h1" "$fmt" "$wl"
    run_load "h2load h2" "$fmt" "$wl"
  done
done
LOAD1=$(cat /proc/loadavg)
ELAPSED=$((SECONDS - START))

# --- gateway health after the load -------------------------------------------------------------

GATEWAY_WARN=$(grep -c -E ' (WARN|ERROR) ' "$OUT/gateway.log" || true)
GATEWAY_NONDOWNGRADE=$(grep -E ' (WARN|ERROR) ' "$OUT/gateway.log" | grep -v 'downgrade' | head -5 || true)
curl -sS --max-time 5 "${CURL_TLS[@]}" -o "$RAW/metrics.txt" "$GW_URL/metrics" || : > "$RAW/metrics.txt"
TOTAL=$(awk '/^protogate_requests_total\{/ { s += $NF } END { print s + 0 }' "$RAW/metrics.txt")
# "N × code C (method, request → response format)" for every answer that was not a 200
NON200=$(awk '/^protogate_requests_total\{/ && !/code="200"/ && $NF > 0 {
    m = $0; sub(/.*method="/, "", m); sub(/".*/, "", m)
    c = $0; sub(/.*code="/, "", c); sub(/".*/, "", c)
    i = $0; sub(/.*request_format="/, "", i); sub(/".*/, "", i)
    o = $0; sub(/.*response_format="/, "", o); sub(/".*/, "", o)
    printf "%s%d × %s (%s, %s → %s)", sep, $NF, c, m, i, o; sep = "; " }' "$RAW/metrics.txt")

# --- report ------------------------------------------------------------------------------------

{
  echo "## End-to-end (gateway on loopback) — $(date -u +%Y-%m-%d)"
  echo
  echo "Command: \`$COMMAND\`, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')."
  echo
  echo "- Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), kernel $(uname -r), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)."
  echo "- Load average (1/5/15 min): $(cut -d' ' -f1-3 <<< "$LOAD0") before the runs, $(cut -d' ' -f1-3 <<< "$LOAD1") after; before measuring: $QUIET."
  echo "- Layout: gateway \`taskset -c $GATEWAY_CPU\` ($GATEWAY_THREADS threads: tokio sizes its pool to the one allowed core); bench-backend (raw mode, one thread) and every load generator \`taskset -c $LOAD_CPU\`."
  echo "- Gateway: \`protogate ${GATEWAY_CMD[*]}\`; RSS $(awk -v k="$GATEWAY_RSS0" 'BEGIN { printf "%.1f", k / 1024 }') MiB after start-up, highest per-run peak $(awk -F'\t' 'NR > 1 && $9 != "-" && $9 + 0 > m { m = $9 + 0 } END { printf "%.1f", m }' "$TSV") MiB."
  echo "- Load: $(wrk -v 2>&1 | head -1 | awk '{ print "wrk", $2 }') \`-t1 -c$WRK_CONNS -d${DURATION}s --timeout 10s --latency\` (HTTP/1.1 keep-alive, bench/e2e.lua: POST the body, Content-Type = Accept = the format); $(h2load --version | head -1) \`-t1 -c$H2_CONNS -m$H2_STREAMS -D $DURATION\` (h2c prior knowledge, Content-Type = Accept); direct gRPC = the same h2load settings to the backend with the gRPC-framed protobuf body, \`content-type: application/grpc\`, \`te: trailers\`. Each run is preceded by a ${WARMUP} s warm-up with the same command (not measured); one measured run per row."
  echo "- p50/p99: wrk's latency histogram (\`latency:percentile\`); h2load: nearest-rank percentiles of the per-request times in its \`--log-file\` (h2load itself prints only min/max/mean/sd)."
  echo "- Gateway CPU: utime+stime of the gateway process from /proc/PID/stat around the measured run, ms per 1,000 requests; CPU % = share of one core over the run (≈100 means the gateway is the bottleneck). Peak RSS: VmHWM, reset (\`clear_refs\` 5) before each run."
  echo "- Errors: wrk socket errors (connect/read/write/timeout) + non-2xx answers; h2load requests done but not succeeded + timeouts. h2load cannot read grpc-status: the direct rows count HTTP errors only (every workload's gRPC answer was checked once, grpc-status 0)."
  echo "- Correctness, checked once before the load: for every workload × format, HTTP/1.1 and HTTP/2 answer 200 with the format's Content-Type, the same bytes on both, converting back (\`protogate convert\`) to the expected JSON (the request for Echo*, the defined records for ListRecords); protobuf answers are byte-identical to the backend's."
  echo "- Duration: ${ELAPSED} s after the build."
  echo
  "${UTIL[@]}" table "$TSV"
  echo
  echo "Gateway after the load: $TOTAL requests counted by /metrics (warm-ups and checks included); answers other than 200: ${NON200:-none}. $GATEWAY_WARN WARN/ERROR log lines (downgrade warnings are expected for JSON answers, rate-limited to one per minute)."
  if [[ -n $GATEWAY_NONDOWNGRADE ]]; then
    echo
    echo "Gateway WARN/ERROR lines other than downgrades (first 5):"
    echo
    echo '```'
    echo "$GATEWAY_NONDOWNGRADE"
    echo '```'
  fi
  if ((${#SKIPPED[@]})); then
    echo
    echo "Skipped (E2E_MAX_SECONDS=$MAX_SECONDS reached): ${SKIPPED[*]}"
  fi
} > "$OUT/results.md"
echo
cat "$OUT/results.md"
rm -f "$RAW/.load0" "$RAW/.load1"
say "wrote $OUT/results.md ($OUT/results.tsv, raw outputs in $RAW)"
