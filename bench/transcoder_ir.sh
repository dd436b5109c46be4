#!/usr/bin/env bash
# bench/transcoder_ir.sh (make bench-ir-transcoder) — the transcoder's work counted, not timed:
# callgrind instructions (Ir) per JSON byte of the shared workloads, for serde_json merely
# parsing the JSON (the floor of `make bench-ratios`) and for each of the four directions, with
# the floor's count as a share of each direction's (the counted twin of bench-ratios' timed
# shares).
#
# Why: timed shares move with code placement — serde_json's floor, the same code in every
# build, ran 6-9 % faster or slower between builds that differ in one file (BENCHMARKS.md,
# 2026-12-03 (cb6ec26..283dc42) and 2026-12-04 (b3f7337..e23038f)) — while instruction
# counts repeat within 0.1 %. Instructions are not time (a division or a mispredicted branch
# costs more than an add): compare builds by both.
#
# Each figure is (Ir of N conversions − Ir of none) ÷ N ÷ the workload's JSON bytes, from
# `target/release/examples/profile DIRECTION WORKLOAD N` (crates/transcode/examples/profile.rs),
# so schema compilation and start-up are not counted.
#
# Settings (environment):
#   TIR_PROFILE    the profile binary (default target/release/examples/profile): to compare builds
#   TIR_WORKLOADS  default "Order:20000 RecordList_1000:100 LogBatch_1000:100" (workload:N)
#   TIR_BUILD=0    skip `cargo build`
# Needs valgrind (installed with apt-get when missing). About a minute.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PROFILE=${TIR_PROFILE:-target/release/examples/profile}
WORKLOADS=${TIR_WORKLOADS:-Order:20000 RecordList_1000:100 LogBatch_1000:100}
DIRECTIONS=(json-to-protobuf protobuf-to-json msgpack-to-protobuf protobuf-to-msgpack)

say() { echo "bench-ir-transcoder: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

if ! command -v valgrind >/dev/null; then
  sudo=(); [[ $(id -u) == 0 ]] || sudo=(sudo)
  say "installing valgrind with apt-get"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq valgrind >/dev/null
fi
if [[ ${TIR_BUILD:-1} != 0 ]]; then
  cargo build --release -q -p protogate-transcode --example profile
fi
[[ -x $PROFILE ]] || die "$PROFILE missing"
python3 bench/gen_bodies.py target/bench-bodies >/dev/null

# Ir of `profile DIRECTION WORKLOAD RUNS` (the whole process).
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$PROFILE" "$1" "$2" "$3" 2>&1 \
    | sed -n 's/.*refs: *//p' | tr -d ','
}

echo "Instructions per JSON byte (callgrind; \`$PROFILE\`, commit $(git rev-parse --short HEAD)):"
echo
echo "| workload | JSON bytes | floor | JSON → pb | pb → JSON | msgpack → pb | pb → msgpack |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for spec in $WORKLOADS; do
  workload=${spec%%:*}
  runs=${spec##*:}
  bytes=$("$PROFILE" floor "$workload" 1 | sed -n 's/^\([0-9]*\) JSON bytes.*/\1/p')
  [[ -n $bytes ]] || die "no JSON bytes for $workload"
  none=$(count floor "$workload" 0)
  floor=$(count floor "$workload" "$runs")
  row="| $workload | $bytes | $(python3 -c "print(f'{($floor - $none) / $runs / $bytes:.2f}')")"
  for d in "${DIRECTIONS[@]}"; do
    ir=$(count "$d" "$workload" "$runs")
    row+=" | $(python3 -c "
per = ($ir - $none) / $runs / $bytes
floor = ($floor - $none) / $runs / $bytes
print(f'{per:.2f} ({100 * floor / per:.0f} %)')")"
  done
  echo "$row |"
done
echo
echo "In brackets: the floor's count as a share of the direction's (above 100 %: fewer"
echo "instructions than serde_json spends merely parsing the JSON)."
