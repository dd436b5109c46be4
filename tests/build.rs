//! Generates the test backend's service from the v2 schema.

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/test/svc");
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(["testsvc.proto"], [root.join("v2")]).expect("testsvc v2 compiles");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)
        .expect("generating the test service");
}
