//! The benchmark bodies (bench/README.md) through both paths, and the benchmark copies held to
//! `../shared`.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use transcode::{Format, Options};

use crate::common::{compile_proto, workspace};
use crate::external;
use crate::harness::{Dir, Harness, fmt_name, option_variants};
use crate::random_messages::WORKLOAD_FLOORS;

/// The benchmark bodies (bench/README.md), JSON → protobuf → JSON / MessagePack → protobuf,
/// written afresh by `bench/gen_bodies.py` (python3, no packages) for this run.
#[test]
fn bench_workload_bodies_agree() {
    let started = Instant::now();
    let root = workspace();
    // One directory per process: another run of this test in the same tree may be writing its
    // own bodies at the same time.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("differential-bench-bodies-{}", std::process::id()));
    let out = external::output(
        std::process::Command::new("python3")
            .arg("bench/gen_bodies.py")
            .arg(&dir)
            .current_dir(root),
        None,
        std::time::Duration::from_secs(300),
    )
    .unwrap_or_else(|e| panic!("python3 (needed to write the benchmark bodies): {e}"));
    assert!(
        out.status.success(),
        "`python3 bench/gen_bodies.py {}`: {}: {}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let schema = compile_proto("bench", "bench.proto");
    let mut bodies: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("read the bodies")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read(&p).expect("read body"))
        })
        .collect();
    bodies.sort();
    std::fs::remove_dir_all(&dir).expect("remove the bodies");
    let mut h = Harness::new(&schema);
    let default = Options::default();
    for (stem, json) in bodies {
        let name = match stem.split('_').next() {
            Some("Order") => "bench.v1.Order",
            Some("RecordList") => "bench.v1.RecordList",
            Some("LogBatch") => "bench.v1.LogBatch",
            _ => continue,
        };
        let desc = schema.message(name).unwrap();
        h.case = stem.clone();
        h.count(format!("body {stem} ({} bytes)", json.len()));
        let big = json.len() > 2_000_000;
        let pb = h.check(Dir::To, "body json", &desc, Format::Json, &json, &default);
        let Ok(_) = pb.res else {
            continue;
        };
        let pb = pb.body().to_vec();
        let variants = option_variants();
        let variants = if big { &variants[..1] } else { &variants[..] };
        for (oname, opts) in variants {
            for fmt in [Format::Json, Format::Msgpack] {
                let r = h.check(
                    Dir::From,
                    &format!("body {oname} {}", fmt_name(fmt)),
                    &desc,
                    fmt,
                    &pb,
                    opts,
                );
                if *oname == "default" && r.res.is_ok() {
                    let body = r.body().to_vec();
                    h.check(
                        Dir::To,
                        &format!("body rendered {}", fmt_name(fmt)),
                        &desc,
                        fmt,
                        &body,
                        &default,
                    );
                }
            }
        }
    }
    assert_eq!(
        h.counts.keys().filter(|k| k.starts_with("body ")).count(),
        5,
        "the five workload bodies of bench/gen_bodies.py"
    );
    h.finish("benchmark workloads", started, WORKLOAD_FLOORS);
}

/// The benchmark schema and generator are copies of `../shared/bench/bench.proto` and
/// `../shared/peers/tools/workload.py` (bench/README.md), so that protogate's figures and the
/// peers' are measured on the same messages. Where `../shared` exists, the copies must agree:
/// the same schema bytes and the same messages from the generators. The only reader of
/// `../shared` in the repository.
#[test]
fn bench_copies_agree_with_shared() {
    let root = workspace();
    let shared = root.join("../shared");
    if !shared.is_dir() {
        // Straight to stderr: the harness hides what a passing test prints with eprintln!.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the agreement of bench/ with ../shared: {} does not exist (a clone alone)",
            shared.display()
        );
        return;
    }
    let ours = std::fs::read_to_string(root.join("proto/bench/bench.proto")).unwrap();
    let theirs = std::fs::read_to_string(shared.join("bench/bench.proto"))
        .expect("../shared/bench/bench.proto");
    assert!(
        ours == theirs,
        "proto/bench/bench.proto differs from ../shared/bench/bench.proto: copy it again (and \
         measure anew what depends on it)"
    );
    // Every message bench/gen_bodies.py writes, from both generators, compared as JSON text.
    const COMPARE: &str = r#"
import importlib.util, json, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
ours, theirs = load("ours", sys.argv[1]), load("theirs", sys.argv[2])
for call in ["order()", "record_list(1000)", "record_list(10000)", "log_batch(1000)", "log_batch(50000)"]:
    a = json.dumps(eval("ours." + call), separators=(",", ":"))
    b = json.dumps(eval("theirs." + call), separators=(",", ":"))
    if a != b:
        sys.exit(f"{call}: bench/workload.py and ../shared/peers/tools/workload.py differ")
    print(f"{call}: {len(a)} bytes agree")
"#;
    let out = external::output(
        std::process::Command::new("python3")
            .arg("-c")
            .arg(COMPARE)
            .arg(root.join("bench/workload.py"))
            .arg(shared.join("peers/tools/workload.py")),
        None,
        std::time::Duration::from_secs(300),
    )
    .unwrap_or_else(|e| panic!("python3 (needed to compare the generators): {e}"));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
}
