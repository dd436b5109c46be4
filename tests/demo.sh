#!/usr/bin/env bash
# Shell-level test of `protogate demo`: start it, run every curl line it prints, check each
# answer, and check that the gateway logged a real downgrade warning.
# Usage: tests/demo.sh [path/to/protogate]
set -uo pipefail
BIN=${1:-target/debug/protogate}
work=$(mktemp -d)
"$BIN" demo --listen 127.0.0.1:0 >"$work/out" 2>"$work/err" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

for _ in $(seq 1 200); do
  grep -q '^curl -s http' "$work/out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { echo "demo exited early:"; cat "$work/err"; exit 1; }
  sleep 0.05
done

# What each printed command must answer, in order (an extended regular expression).
expect=(
  '"name":"espresso cup"'                       # JSON GetOrder
  '"orders":\[\{"id":"1"'                       # JSON ListOrders
  '"status":"PENDING".*"total":\{"currencyCode":"EUR","units":"25"'  # CreateOrder: 2 x 12.50
  '^HTTP/1.1 404.*google.rpc.ResourceInfo'      # error with details
  '"fieldViolations":\[\{"field":"items\[0\].quantity"'  # 400 with BadRequest
  'id: expected integer, got \\"one\\"'         # gateway-made 400 naming the field
  '^\{"id":"1","customerId":"42"'               # msgpack in and out
  'dropped data .*#7 at \(root\); #8 at \(root\).*\{"id":"1",.*"createdAt"'  # protobuf in and out: v2 fields arrive
  'dropped data .*#8 at \(root\).*\{"id":"2",.*"SHIPPED"'  # JSON in, protobuf out
  '^\{"id":"2",.*"SHIPPED"'                     # protobuf in, JSON out
  '\{"id":"1",.*"createdAt"'                     # gRPC over h2c, relayed
  '^\{"id":"1","customerId":"42"'               # Connect unary
  '^\{"code":"not_found","message":"[^"]*".*"details":\[\{"type":"google.rpc.ResourceInfo","value":"[A-Za-z0-9+/]+"'  # Connect error JSON
  '^\{"id":"1","customerId":"42"'               # Connect GET
  '^\{"id":"1","customerId":"42"'               # REST GET with a path variable
  '^\{"orders":\[\{"id":"1"'                     # REST GET with a query parameter
  'deprecation: @[0-9]+.*sunset: .* GMT.*link: <https://protobuf.dev/.*rel="sunset"'  # JSON sunset headers
  '^\{"id":"1",.*\} \{"id":'                    # NDJSON stream: one order per line
  'vary: .*Accept-Encoding.*content-encoding: (zstd|br|gzip|deflate)'  # a compressed answer
  '"openapi":"3.1'                              # OpenAPI document
  'protogate_downgrades_total\{method="demo.shop.v1.Shop/GetOrder",reason="json_requested"\} [1-9]'
  '"method":"demo.shop.v1.Shop.GetOrder"'      # the migration report
)

passed=0 failed=0 i=0
while IFS= read -r line; do
  want=${expect[$i]:-.}
  i=$((i + 1))
  got=$(bash -c "set -o pipefail; $line" 2>&1 | tr -d '\r' | tr '\n' ' ')
  if [[ $got =~ $want ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $line"
    echo "  wanted /$want/"
    echo "  got: ${got:0:600}"
  fi
done < <(grep -E '^(curl|printf) ' "$work/out")

if [ "$i" -ne "${#expect[@]}" ]; then
  failed=$((failed + 1))
  echo "FAIL: the demo printed $i commands, expected ${#expect[@]}"
fi
if grep -q 'WARN.*downgrade.*unknown_fields.*#7 at (root); #8 at (root)' "$work/err"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  echo "FAIL: no unknown_fields downgrade warning in the demo's log:"
  cat "$work/err"
fi
echo "demo: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
