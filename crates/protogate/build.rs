//! Generates the demo shop service (v2 schema) with tonic, compiling the .proto in-process.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto/demo");
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(["shop.proto"], [root.join("v2")])
        .map_err(|e| format!("compiling proto/demo/v2/shop.proto: {e}"))?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .map_err(|e| format!("generating the demo service: {e}"))?;
    Ok(())
}
