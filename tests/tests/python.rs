//! The Python the tests run their oracles and clients with (openapi-spec-validator, grpcio):
//! `PROTOGATE_ORACLE_PYTHON` (set by `make test`), else the workspace's .venv, else
//! `python3`.

use std::process::Command;
use std::time::Duration;

use protogate_tests::workspace;

use crate::external;

/// Python starts in well under a second, the validator in about one; a minute allows for a
/// loaded machine.
pub const PYTHON_LIMIT: Duration = Duration::from_secs(60);

/// The interpreter that can `import {module}`; `None` when there is none (after the skip
/// line; a failure when oracles are required).
pub fn python(test: &str, module: &str) -> Option<String> {
    let py = match std::env::var("PROTOGATE_ORACLE_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => {
            let venv = workspace().join(".venv/bin/python");
            if venv.exists() {
                venv.to_string_lossy().into_owned()
            } else {
                "python3".to_owned()
            }
        }
    };
    let probe = external::output(
        Command::new(&py).args(["-c", &format!("import {module}")]),
        None,
        PYTHON_LIMIT,
    );
    let missing = match probe {
        Err(e) => format!(
            "Python {py:?} cannot be run ({e}); PROTOGATE_ORACLE_PYTHON selects an interpreter"
        ),
        Ok(out) if !out.status.success() => format!(
            "Python {py:?} cannot import {module} ({})",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("no message")
        ),
        Ok(_) => return Some(py),
    };
    external::oracle_missing(test, &missing, "oracle-env");
    None
}
