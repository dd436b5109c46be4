//! The integration tests' two stacks, held up until stdin closes, for writing and debugging
//! the client tests by hand (tests/clients/): the test service's backend (v2) behind a gateway
//! with the v1 schema, and the library service behind another. Prints one line each:
//! `svc ADDR DESCRIPTORS` and `library ADDR DESCRIPTORS` (the backends' descriptor sets,
//! written to a temporary directory), then `ready`.
//!
//!     cargo run -p protogate-tests --bin client-stacks

// A development tool: a failed unwrap ends it with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;

use protogate_tests::{
    TempDir, compile_proto, library, start_backend, start_gateway_toml, start_library_toml,
};

#[tokio::main]
async fn main() {
    let backend = start_backend().await;
    let (svc, _) = start_gateway_toml("", &format!("http://{}", backend.addr)).await;
    let lib = start_library_toml("").await;
    let dir = TempDir::new("client-stacks");
    let svc_pb = dir.write(
        "svc.pb",
        compile_proto("test/svc/v2", "testsvc.proto").to_descriptor_set(),
    );
    let lib_pb = dir.write("library.pb", library::schema().to_descriptor_set());
    println!("svc {} {}", svc.addr, svc_pb.display());
    println!("library {} {}", lib.gw.addr, lib_pb.display());
    println!("ready");
    // Until stdin closes (the caller ends it).
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
        .await
        .ok();
    drop((backend, svc, lib));
}
