//! Generates the test backend's service from the v2 schema, and the benchmark backend's service
//! (`bench-backend`) from proto/bench/bench.proto.

use std::path::{Path, PathBuf};

fn main() {
    let proto = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto");
    generate(&proto.join("test/svc/v2"), "testsvc.proto");
    generate(&proto.join("bench"), "bench.proto");
}

/// Generates the server code of `file` (in the import directory `dir`) into OUT_DIR as
/// `<package>.rs`.
fn generate(dir: &Path, file: &str) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let fds = protox::compile([file], [dir]).unwrap_or_else(|e| panic!("{file} compiles: {e}"));
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the service of {file}: {e}"));
}
