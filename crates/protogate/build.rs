//! Generates the demo shop service (v2 schema) with tonic, compiling the .proto in-process.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    git_revision();
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

/// `protogate --version` names the revision it was built from: `PROTOGATE_GIT_REVISION` when the
/// build sets it (a container build, whose context has no `.git`), else `git rev-parse`, else
/// "unknown".
fn git_revision() {
    println!("cargo:rerun-if-env-changed=PROTOGATE_GIT_REVISION");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let revision = std::env::var("PROTOGATE_GIT_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(|| {
            let out = std::process::Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .current_dir(&root)
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    // A new commit changes HEAD (or the branch file it names).
    for head in [".git/HEAD", ".git/refs/heads"] {
        let path = root.join(head);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rustc-env=PROTOGATE_GIT_REVISION={revision}");
}
