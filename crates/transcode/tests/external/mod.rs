//! Running external programs from the tests (Python's json_format, `cargo tree`,
//! grpc-gateway, openapi-spec-validator): a child that is killed when dropped, every wait
//! under a deadline, and the one decision on a missing oracle (skip loudly, or fail when
//! `PROTOGATE_REQUIRE_ORACLES` is set). Each test binary uses part of it; the integration
//! tests' crate includes this file by path (`#[path]`).
#![allow(dead_code)]
// Test support: a failed unwrap or expect fails the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Whether a missing oracle fails the test: `PROTOGATE_REQUIRE_ORACLES` set to anything but
/// empty or `0` (`make test` and CI set it to 1, so they can never pass by skipping).
pub fn oracles_required(var: Option<&str>) -> bool {
    var.is_some_and(|v| !v.is_empty() && v != "0")
}

/// What a test that cannot run says: its name, what is missing, and the make target that
/// sets it up (`oracle-env`, `grpcgw`; `make test` runs both).
pub fn missing_message(test: &str, missing: &str, target: &str) -> String {
    format!("{test}: {missing} — run `make test` (or `make {target}`) to set it up")
}

/// Called when `test`'s oracle is missing: panics with the message when oracles are
/// required, else prints it as one `SKIPPED:` line on stderr; the caller then returns.
pub fn oracle_missing(test: &str, missing: &str, target: &str) {
    let message = missing_message(test, missing, target);
    let required = std::env::var("PROTOGATE_REQUIRE_ORACLES").ok();
    if oracles_required(required.as_deref()) {
        panic!("{message} (PROTOGATE_REQUIRE_ORACLES is set: a missing oracle fails the test)");
    }
    // Straight to stderr, not `eprintln!`: the test harness captures (and hides) what a
    // passing test prints with the macros.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {message}");
}

/// A child process that is killed (by its handle) and reaped when dropped, so a failed
/// assertion or a timeout leaves nothing running.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` to its end with `input` on its stdin, collecting stdout and stderr; panics
/// (killing it) if it takes longer than `limit`. Only a failure to start is an `Err`, so the
/// caller can tell a program that is not there (`ErrorKind::NotFound`) from one that fails.
pub fn output(
    cmd: &mut Command,
    input: Option<Vec<u8>>,
    limit: Duration,
) -> std::io::Result<Output> {
    let what = format!("{cmd:?}");
    let deadline = Instant::now() + limit;
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = Killed(cmd.spawn()?);
    if let (Some(mut stdin), Some(input)) = (child.0.stdin.take(), input) {
        // On its own thread: a child that does not read would block us; killed, it breaks
        // the pipe and the thread ends.
        thread::spawn(move || stdin.write_all(&input));
    }
    let stdout = drain(child.0.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.0.stderr.take().expect("stderr is piped"));
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not finish within {limit:?}; killed"
        );
        thread::sleep(Duration::from_millis(10));
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let collect = |rx: mpsc::Receiver<Vec<u8>>, name: &str| {
        rx.recv_timeout(left.max(Duration::from_secs(5)))
            .unwrap_or_else(|_| panic!("{what} exited but its {name} stayed open"))
    };
    Ok(Output {
        status,
        stdout: collect(stdout, "stdout"),
        stderr: collect(stderr, "stderr"),
    })
}

/// Reads `from` to its end on a thread; the bytes arrive on the channel.
fn drain(mut from: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = from.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// Checks the skip decision end to end: runs `test` of this very test binary again with
/// `env` pointing its oracle somewhere missing; without `PROTOGATE_REQUIRE_ORACLES` it must
/// pass with exactly one `SKIPPED:` line saying `message` and how to set it up (`make
/// {target}`), with it fail saying the same.
pub fn assert_missing_oracle_skips_or_fails(
    test: &str,
    env: (&str, &str),
    message: &str,
    target: &str,
    limit: Duration,
) {
    let run = |required: bool| {
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        // A filter, not `--exact`: in a test binary of modules the name has its module's
        // path before it. The "1 passed" below holds the filter to one test.
        cmd.arg(test).env(env.0, env.1);
        if required {
            cmd.env("PROTOGATE_REQUIRE_ORACLES", "1");
        } else {
            cmd.env_remove("PROTOGATE_REQUIRE_ORACLES");
        }
        let out = output(&mut cmd, None, limit).expect("the test binary runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let setup = format!("make {target}");

    let (passed, text) = run(false);
    assert!(passed, "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert_eq!(text.matches("SKIPPED:").count(), 1, "{text}");
    assert!(
        text.contains(&format!("SKIPPED: {message}")) && text.contains(&setup),
        "{text}"
    );

    let (passed, text) = run(true);
    assert!(
        !passed,
        "a missing oracle passed with PROTOGATE_REQUIRE_ORACLES=1:\n{text}"
    );
    assert!(
        text.contains(message) && text.contains(&setup) && !text.contains("SKIPPED"),
        "{text}"
    );
}
