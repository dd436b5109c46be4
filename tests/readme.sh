#!/usr/bin/env bash
# Runs every command README.md shows in its ```sh blocks, as written, from the repository
# root, in the README's order, and checks what each answers, so the README cannot drift from
# what works. Long-running commands (`make demo`, `protogate serve`, a line ending in `&`) are
# started in the background, waited for (a deadline, never a fixed sleep), sent a request and
# stopped. `make test` is skipped: it is what runs this.
#
# The README names fixed ports (8080, 50051). As root the commands run in a private network
# namespace (unshare -n) where those ports are this test's alone; elsewhere they must be free.
# Usage: tests/readme.sh
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -z "${README_NETNS:-}" ]; then
  # The README's build command, before the namespace cuts the network off (cargo may fetch).
  cargo build --release -p protogate || exit 1
  if unshare -n true 2>/dev/null; then
    exec unshare -n env README_NETNS=1 CARGO_NET_OFFLINE=true "$0" "$@"
  fi
  echo "readme: no private network namespace (needs root): using this machine's ports 8080 and 50051"
else
  ip link set lo up || { echo "readme: cannot bring up lo in the namespace"; exit 1; }
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do stop "$p"; done
  rm -rf "$work"
}
trap cleanup EXIT

passed=0 failed=0
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
pass() { passed=$((passed + 1)); }

# Polls `$@` every 0.1 s while the background command $bg runs, for up to 120 s (a cold
# `make demo` may still be compiling).
wait_for() {
  local i
  for i in $(seq 1 1200); do
    "$@" && return 0
    kill -0 "$bg" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Starts a long-running command in its own process group; sets $bg to its PID.
bg=
start() {
  local n=$((${#pids[@]}))
  : >"$work/bg$n.out"
  : >"$work/bg$n.err"
  setsid bash -c "$1" >"$work/bg$n.out" 2>"$work/bg$n.err" </dev/null &
  bg=$!
  pids+=("$bg")
  bg_out="$work/bg$n.out" bg_err="$work/bg$n.err"
}

# Stops a background command's process group: TERM, then KILL if it is still there after 30 s.
stop() {
  local i
  kill -TERM -- "-$1" 2>/dev/null || return 0
  for i in $(seq 1 300); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

# The README's ```sh blocks, one command per line (continuations joined, comments dropped).
mapfile -t commands < <(awk '
  /^```sh$/ { inside = 1; next }
  /^```/ { inside = 0; next }
  inside {
    if ($0 ~ /^[[:space:]]*#/ || $0 ~ /^[[:space:]]*$/) next
    if (sub(/\\$/, "", $0)) { pending = pending $0; next }
    if ($0 ~ /\|[[:space:]]*$/) { pending = pending $0 " "; next }
    print pending $0; pending = ""
  }' README.md)

# What each foreground command must print (an extended regular expression), in order.
expect=(
  '"id":"1".*"customerId":"42"'                # JSON in, JSON out
  '^\{"id":"1","customerId":"42"'              # MessagePack in, read back by convert
  '^00000000: 0801'                            # protobuf through, shown by xxd
  '^00000000: 0802'                            # JSON in, protobuf out
  '^HTTP/1.1 404.*"code":5'                    # an error with a google.rpc.Status body
  ''                                           # cargo build --release -p protogate
  '^ok: 4 methods, 4 REST routes .*GET +/v1/orders/\{id\} +demo.shop.v1.Shop/GetOrder'   # protogate check
  '^$'                                         # convert JSON -> protobuf into /tmp/body.bin
  '^\{"id":"1"\}$'                             # convert it back
)

i=0
demo=
for cmd in "${commands[@]}"; do
  case "$cmd" in
    "make test"*)
      pass
      continue
      ;;
    "make demo"*)
      start "$cmd"
      demo=$bg
      if wait_for grep -q '^curl -s http' "$bg_out"; then
        pass
      else
        fail "$cmd: no instructions printed"; cat "$bg_err"
      fi
      continue
      ;;
    *"&")
      start "${cmd%&}"
      if wait_for grep -q 'listening on http://' "$bg_err"; then
        pass
      else
        fail "$cmd: not listening"; cat "$bg_err"
      fi
      continue
      ;;
    *" serve "*)
      # Only one gateway on 8080 at a time: the demo's (if still up) is stopped first.
      if [ -n "$demo" ]; then
        stop "$demo"
        demo=
      fi
      start "$cmd"
      if wait_for grep -q 'listening on http://127.0.0.1:8080' "$bg_err"; then
        got=$(curl -s --max-time 30 localhost:8080/demo.shop.v1.Shop/GetOrder \
          -H 'content-type: application/json' -d '{"id": "1"}')
        if [[ $got =~ \"id\":\"1\" ]]; then pass; else fail "$cmd: answered ${got:0:300}"; fi
      else
        fail "$cmd: not listening"; cat "$bg_err"
      fi
      stop "$bg"
      continue
      ;;
  esac
  if [ "$i" -ge "${#expect[@]}" ]; then
    fail "$cmd: a README command this test has no expectation for"
    continue
  fi
  want=${expect[$i]}
  i=$((i + 1))
  timeout 600 bash -c "set -o pipefail; $cmd" >"$work/out" 2>"$work/err"
  status=$?
  got=$(tr -d '\r' <"$work/out" | tr '\n' ' ' | sed 's/ $//')
  if [ "$status" -eq 0 ] && [[ $got =~ $want ]]; then
    pass
  else
    fail "$cmd"
    echo "  exit $status; wanted /$want/"
    echo "  got: ${got:0:600}"
    head -c 2000 "$work/err"
  fi
done
if [ "$i" -ne "${#expect[@]}" ]; then
  fail "the README has $i foreground commands; this test expects ${#expect[@]}"
fi

# The configuration shown in the README is the file the README runs.
if diff <(awk '/^```toml$/ { n++; inside = (n == 1); next } /^```/ { inside = 0 } inside' README.md) \
  deploy/protogate.toml >"$work/diff"; then
  pass
else
  fail "README's first TOML block differs from deploy/protogate.toml:"; cat "$work/diff"
fi

echo "readme: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
