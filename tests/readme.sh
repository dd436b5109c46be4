#!/usr/bin/env bash
# Runs every command that README.md and the pages of docs/ show in their ```sh blocks, as
# written, from the repository root, and checks what each answers, so the documentation cannot
# drift from what works. The documents are read in one stable order: README.md first, then the
# docs/ pages in the order of the README's table of contents, then any page it does not list,
# alphabetically. Within a document, commands run in its order. ```console
# and ```text blocks are shown, never run (Docker, a cluster, a running gateway to ask).
#
# Long-running commands (`make demo`, `protogate serve`, a line ending in `&`) are started in
# the background, waited for (a deadline, never a fixed sleep), sent a request and stopped.
# `make test` is skipped: it is what runs this. Every other command has an expectation below,
# found by the command's own text (so a command can move between documents); a command
# without one, or an expectation no command used, fails the run.
#
# The commands name fixed ports (8080, 50051). As root they run in a private network
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

# The documents, in the order their commands run: README.md, then the docs/ pages in the
# order of the README's table of contents (its rows that start with a link to one), then the
# pages it does not list (alphabetically).
docs=(README.md)
while IFS= read -r page; do
  [ -f "$page" ] && docs+=("$page")
done < <(sed -n 's/^| *\[[^]]*\](\(docs\/[A-Za-z0-9_.-]*\.md\)).*/\1/p' README.md | awk '!seen[$0]++')
for page in docs/*.md; do
  [ -f "$page" ] || continue
  case " ${docs[*]} " in *" $page "*) ;; *) docs+=("$page") ;; esac
done

# Their ```sh blocks, one command per line (continuations joined, comments dropped), in order.
mapfile -t commands < <(for doc in "${docs[@]}"; do
  awk '
    /^```sh$/ { inside = 1; next }
    /^```/ { inside = 0; next }
    inside {
      if ($0 ~ /^[[:space:]]*#/ || $0 ~ /^[[:space:]]*$/) next
      if (sub(/\\$/, "", $0)) { pending = pending $0; next }
      if ($0 ~ /\|[[:space:]]*$/) { pending = pending $0 " "; next }
      print pending $0; pending = ""
    }' "$doc"
done)
if [ "${#commands[@]}" -eq 0 ]; then
  fail "no command found in the \`\`\`sh blocks of ${docs[*]}"
fi

# What each foreground command must print (an extended regular expression), found by the
# command's text: prints the expectation's name, or nothing for a command it does not know.
# The first pattern that matches wins, so the more specific ones come first.
expectation_of() {
  case "$1" in
    *"protogate import --envoy"*" > "*) echo import_envoy_file ;;   # … into a file
    *"protogate import --envoy"*) echo import_envoy ;;          # an Envoy configuration imported
    *"protogate import --grpc-gateway"*) echo import_grpc_gateway ;;  # a grpc-gateway set-up imported
    *"--from msgpack --to json"*) echo msgpack_in ;;          # MessagePack in, read back by convert
    *"content-type: application/grpc"*) echo grpc_through ;;    # gRPC over h2c, shown by xxd
    *"connect-protocol-version: 1"*) echo connect_error ;;      # Connect's error JSON
    *"content-type: application/x-protobuf"*) echo protobuf_through ;;   # protobuf through, shown by xxd
    *"accept: application/x-protobuf"*) echo json_to_protobuf ;;        # JSON in, protobuf out
    "curl -s -i "*) echo error_status ;;                      # an error with a google.rpc.Status body
    "curl -s "*"content-type: application/json"*) echo json_in_out ;;  # JSON in, JSON out
    "cargo build --release -p protogate") echo build ;;
    *"protogate check "*) echo check ;;
    *" convert "*"--to protobuf > "*) echo convert_to_protobuf ;;      # into /tmp/body.bin
    *" convert "*"--from protobuf --to json"*) echo convert_back ;;
  esac
}
declare -A expect=(
  [json_in_out]='"id":"1".*"customerId":"42"'
  [msgpack_in]='^\{"id":"1","customerId":"42"'
  [protobuf_through]='^00000000: 0801'
  [grpc_through]='^00000000: 0000 0000 [0-9a-f]{2}08 01'
  [connect_error]='^\{"code":"not_found","message":"order 99 not found","details":\[\{"type":"google.rpc.ResourceInfo"'
  [json_to_protobuf]='^00000000: 0802'
  [error_status]='^HTTP/1.1 404.*"code":5'
  [build]=''
  [check]='^ok: 4 methods, 4 REST routes .*GET +/v1/orders/\{id\} +demo.shop.v1.Shop/GetOrder'
  [convert_to_protobuf]='^$'
  [convert_back]='^\{"id":"1"\}$'
  [import_envoy_file]='^$'
  [import_envoy]='^# protogate.toml imported from docs/examples/envoy.yaml.*upstream = "http://127.0.0.1:50051".*indent = 2'
  [import_grpc_gateway]='^# protogate.toml imported from docs/examples/grpc-gateway.toml.*upstream = "http://127.0.0.1:50051".*enums_as_ints = true'
)
declare -A used=()

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
  name=$(expectation_of "$cmd")
  if [ -z "$name" ] || [ -z "${expect[$name]+set}" ]; then
    fail "$cmd: a documented command this test has no expectation for"
    continue
  fi
  if [ -n "${used[$name]:-}" ]; then
    fail "$cmd: a second command for the expectation '$name' (the first: ${used[$name]})"
    continue
  fi
  used[$name]=$cmd
  want=${expect[$name]}
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
for name in "${!expect[@]}"; do
  if [ -z "${used[$name]:-}" ]; then
    fail "no documented command for the expectation '$name' (${docs[*]})"
  fi
done

# The configuration docs/configuration.md shows first is the file its commands run.
config_doc=docs/configuration.md
if diff <(awk '/^```toml$/ { n++; inside = (n == 1); next } /^```/ { inside = 0 } inside' "$config_doc") \
  deploy/protogate.toml >"$work/diff"; then
  pass
else
  fail "$config_doc's first TOML block differs from deploy/protogate.toml:"; cat "$work/diff"
fi

echo "readme: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
