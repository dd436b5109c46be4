#!/usr/bin/env bash
# Runs protogate's fuzz targets one after another: fuzz/fuzz.sh SECONDS [TARGET...]
# (`make fuzz`: FUZZ_SECS each, default 600; `make fuzz-smoke`: FUZZ_SMOKE=1, a few seconds
# each).
#
# Installs cargo-fuzz when missing (`cargo install --locked cargo-fuzz`, from crates.io), builds
# every target with AddressSanitizer on the machine's stable toolchain (RUSTC_BOOTSTRAP=1 lets
# it take `-Zsanitizer`: no nightly can be fetched here; fuzz/README.md), writes the seed
# corpora from the test workloads into target/fuzz/seeds, then runs each target for SECONDS
# in one process (no -jobs/-workers) under `nice`, its corpus growing in fuzz/corpus/TARGET.
# A crash, a leak, a timeout (10 s) or an out-of-memory (2 GiB) stops the script with its
# input in fuzz/artifacts/TARGET/. The last line of each run (execs, cov, ft, corpus) goes to
# target/fuzz/summary.txt.
#
# FUZZ_SMOKE=1 (make test): an unoptimised build (`--dev`: about half the compile time of the
# optimised one, which builds every crate as one codegen unit), started from the seeds alone
# into a scratch corpus, so its time does not grow with fuzz/corpus.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${1:?usage: fuzz/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(json_to_protobuf msgpack_to_protobuf protobuf_to_json_msgpack rest_binder
        stream_splitter media_types config)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz (cargo install --locked cargo-fuzz)"
    cargo install --locked cargo-fuzz
fi

export RUSTC_BOOTSTRAP=1
out="$root/target/fuzz"
triple=$(rustc -vV | sed -n 's/^host: //p')
# Debug assertions and overflow checks on (-a; always in --dev): an overflow the release build
# would wrap is a finding too.
if [ "${FUZZ_SMOKE:-0}" = 1 ]; then
    bin="$out/$triple/debug"
    nice -n 10 cargo fuzz build --fuzz-dir fuzz --target-dir "$out" --sanitizer address --dev
else
    bin="$out/$triple/release"
    nice -n 10 cargo fuzz build --fuzz-dir fuzz --target-dir "$out" --sanitizer address -a
fi

# Seeds: the benchmark messages of bench/workload.py, kept small, then every target's seeds.
bodies=$(mktemp -d)
trap 'rm -rf "$bodies"' EXIT
python3 - "$root/bench" "$bodies" <<'EOF'
import json, os, sys
sys.path.insert(0, sys.argv[1])
import workload
for name, body in {"Order": workload.order(),
                   "RecordList_3": workload.record_list(3),
                   "RecordList_40": workload.record_list(40),
                   "LogBatch_3": workload.log_batch(3),
                   "LogBatch_20": workload.log_batch(20)}.items():
    with open(os.path.join(sys.argv[2], name + ".json"), "w") as f:
        f.write(json.dumps(body, separators=(",", ":")))
EOF
"$bin/seeds" "$bodies" "$out/seeds" >/dev/null

summary="$out/summary.txt"
: >"$summary"
for t in "${targets[@]}"; do
    if [ "${FUZZ_SMOKE:-0}" = 1 ]; then
        corpus="$out/smoke-corpus/$t"
        rm -rf "$corpus"
    else
        corpus="fuzz/corpus/$t"
    fi
    mkdir -p "$corpus" "fuzz/artifacts/$t"
    log="$out/$t.log"
    echo "fuzz: $t for ${secs}s (log: $log)"
    status=0
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0} nice -n 10 "$bin/$t" \
        "$corpus" "$out/seeds/$t" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1 || status=$?
    # libFuzzer's last status line: "#N DONE cov: C ft: F corp: …" (or the line before a crash).
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "$t: $last (${rate:-?} exec/s)" | tee -a "$summary"
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz: $t failed (exit $status); the input is in fuzz/artifacts/$t/" >&2
        exit 1
    fi
done
