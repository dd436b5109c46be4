//! Generates the test backends' services (the v2 test schema, the REST-mapping library) and
//! the benchmark backend's service (`bench-backend`) from proto/bench/bench.proto.

use std::path::{Path, PathBuf};

fn main() {
    let proto = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    let google_api = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/transcode/proto");
    generate(&[&proto.join("test/svc/v2")], "testsvc.proto");
    generate(&[&proto.join("bench")], "bench.proto");
    generate(&[&proto.join("test/rest/v1"), &google_api], "library.proto");
}

/// Generates the server code of `file` (found in the import directories `dirs`) into OUT_DIR
/// as `<package>.rs`.
fn generate(dirs: &[&Path], file: &str) {
    for dir in dirs {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let fds = protox::compile([file], dirs).unwrap_or_else(|e| panic!("{file} compiles: {e}"));
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the service of {file}: {e}"));
}
