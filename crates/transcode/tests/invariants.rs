//! The transcoding crate does no I/O: its dependency tree must not gain an async runtime, an
//! HTTP stack or a logging framework.

use std::time::Duration;

mod external;

#[test]
fn transcode_depends_on_no_io_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut tree = std::process::Command::new(cargo);
    tree.args([
        "tree",
        "--offline",
        "-p",
        "protogate-transcode",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    // Seconds when quiet; it may wait for the package cache lock while another cargo holds it.
    let out = external::output(&mut tree, None, Duration::from_secs(300)).expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        crates.contains(&"prost-reflect"),
        "unexpected cargo tree output: {tree}"
    );
    for banned in ["tokio", "hyper", "http", "tonic", "tracing", "mio", "h2"] {
        assert!(
            !crates.contains(&banned),
            "transcode depends on {banned}:\n{tree}"
        );
    }
}
