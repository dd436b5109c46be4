//! The libraries' invariants, checked: the transcoding crate does no I/O (its dependency tree
//! gains no async runtime, HTTP stack or logging framework; its sources name no environment,
//! file, network or process API and print nothing), and the edge reads no flags, environment or
//! files (its sources name no `std::env`, `std::fs`, `std::process`, `tokio::fs` or
//! `tokio::process`): only the binary does.
//!
//! The source check reads the libraries' `src/` as tokens (comments and literals dropped), so a
//! path spelt across lines or imported in a group (`use std::{env, io}`) is seen, and a comment
//! that mentions `std::fs` is not. Tests, benches and examples are not libraries: they may read
//! their fixtures.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
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

/// What the transcoding crate's sources may not name: it gets bytes and a schema and returns
/// bytes and findings, nothing else.
const TRANSCODE_BANNED: Banned = Banned {
    modules: &[
        ("std", "env"),
        ("std", "fs"),
        ("std", "net"),
        ("std", "os"),
        ("std", "process"),
    ],
    names: &["stdin", "stdout", "stderr"],
    macros: &["print", "println", "eprint", "eprintln"],
};

/// What the edge's sources may not name: it serves sockets it is given or binds (`tokio::net`
/// is its business) but reads no flags, environment or files and starts no processes.
const EDGE_BANNED: Banned = Banned {
    modules: &[
        ("std", "env"),
        ("std", "fs"),
        ("std", "process"),
        ("tokio", "fs"),
        ("tokio", "process"),
    ],
    names: &[],
    macros: &[],
};

#[test]
fn transcode_sources_do_no_io() {
    let found = check_sources(&crate_src("transcode"), &TRANSCODE_BANNED);
    assert!(
        found.is_empty(),
        "transcode does no I/O, yet its sources name:\n{}",
        found.join("\n")
    );
}

#[test]
fn edge_sources_read_no_flags_env_or_files() {
    let found = check_sources(&crate_src("edge"), &EDGE_BANNED);
    assert!(
        found.is_empty(),
        "only the binary reads flags, environment variables and files, yet the edge's sources \
         name:\n{}",
        found.join("\n")
    );
}

/// foldhash is not built to resist chosen keys: only files whose maps are keyed by schema or
/// configuration names may use it; maps a client fills keep std's SipHash. A new use is a
/// decision: name the file here with what its map is keyed by.
#[test]
fn only_maps_of_schema_or_configuration_names_use_the_fast_hasher() {
    const ALLOWED: &[&str] = &[
        // The histograms by the schema's method names.
        "crates/edge/src/metrics.rs",
        // The tracker's methods (its client table keeps SipHash).
        "crates/edge/src/migration/tracker.rs",
        // The upstreams by configured service name.
        "crates/edge/src/upstream/mod.rs",
        // The settings overridden per method, by the schema's method paths.
        "crates/edge/src/per_method.rs",
        // The schema's methods by path.
        "crates/transcode/src/schema.rs",
    ];
    const FAST_HASHER: Banned = Banned {
        modules: &[],
        names: &["foldhash"],
        macros: &[],
    };
    let mut found = check_sources(&crate_src("edge"), &FAST_HASHER);
    found.extend(check_sources(&crate_src("transcode"), &FAST_HASHER));
    // The check sees the uses there are.
    assert!(found.len() >= ALLOWED.len(), "{found:?}");
    let elsewhere: Vec<&String> = found
        .iter()
        .filter(|f| !ALLOWED.iter().any(|a| f.starts_with(&format!("{a}:"))))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "foldhash used outside the maps of schema or configuration names: {elsewhere:?}"
    );
}

/// The check itself sees what it must and nothing else (a checker that finds nothing would
/// pass every source).
#[test]
fn the_source_check_sees_paths_groups_and_macros_but_not_comments_or_strings() {
    let found = |code: &str| check_text(code, &TRANSCODE_BANNED);
    for code in [
        "fn f() { let _ = std::env::var(\"X\"); }",
        "use std::fs;",
        "use ::std::process::Command;",
        "use std::{io, env};",
        "use std::{io::{self, Read}, net::TcpStream};",
        "let t = std\n    ::\n    fs::read(p);",
        "println!(\"{x}\");",
        "let _ = io::stdout();",
    ] {
        assert_eq!(found(code).len(), 1, "{code:?}: {:?}", found(code));
    }
    for code in [
        "// std::env::var(\"X\")",
        "/* std::fs /* nested */ std::fs */",
        "/// `std::process::Command` is the binary's",
        "let s = \"std::env::var\";",
        "let s = r#\"std::fs::read\" \"#;",
        "let c = '\"'; let s = \"std::env\";",
        "let c = '\\''; let d = 'é'; let s = \"std::env\"; let e = '\\u{1F600}';",
        "let b = b\"std::fs\"; let c = br##\"std::fs\"# \"##;",
        "fn f<'a>(x: &'a str) -> &'a str { x }",
        "use std::{io, fmt::Write};",
        "let env = 1; let fs = env; my::env::var();",
        "let p = std::path::Path::new(\"/etc\");",
        "fn println() {}",
    ] {
        assert!(found(code).is_empty(), "{code:?}: {:?}", found(code));
    }
}

/// Banned modules (`std::env`: the path anywhere, or a top-level name of a `use std::{…}`
/// group), identifiers and macros.
struct Banned {
    modules: &'static [(&'static str, &'static str)],
    names: &'static [&'static str],
    macros: &'static [&'static str],
}

/// `crates/<name>/src`.
fn crate_src(name: &str) -> PathBuf {
    workspace().join("crates").join(name).join("src")
}

fn workspace() -> &'static Path {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .expect("crates/transcode")
}

/// Every banned name in the `.rs` files below `dir`, as `file:line: what`.
fn check_sources(dir: &Path, banned: &Banned) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    // A check that read nothing would pass.
    assert!(files.len() >= 3, "no sources under {}", dir.display());
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        // A literal the lexer failed to close would hide the rest of the file: the last token
        // must be on the last line of code.
        let last_code = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim().starts_with("//"))
            .last()
            .map_or(0, |(i, _)| i + 1);
        let last_token = tokens(&text).last().map_or(0, |t| t.0);
        assert_eq!(
            last_token,
            last_code,
            "{}: the source check lost its way",
            file.display()
        );
        for what in check_text(&text, banned) {
            let name = file.strip_prefix(workspace()).unwrap_or(&file);
            found.push(format!("{}:{what}", name.display()));
        }
    }
    found
}

/// Every banned name in `code`, as `line: what`.
fn check_text(code: &str, banned: &Banned) -> Vec<String> {
    let toks = tokens(code);
    let text = |i: usize| toks.get(i).map_or("", |t| t.1.as_str());
    let mut found = Vec::new();
    for (i, (line, tok)) in toks.iter().enumerate() {
        for &(root, module) in banned.modules {
            if tok != root || text(i + 1) != "::" {
                continue;
            }
            if text(i + 2) == module {
                found.push(format!("{line}: {root}::{module}"));
            } else if text(i + 2) == "{" {
                // A group: its top-level names are the first identifier after `{` or a `,`
                // at depth 1.
                let mut depth = 0;
                for j in i + 2..toks.len() {
                    match text(j) {
                        "{" => depth += 1,
                        "}" => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                    if depth == 1 && matches!(text(j), "{" | ",") && text(j + 1) == module {
                        found.push(format!("{}: {root}::{module}", toks[j + 1].0));
                    }
                }
            }
        }
        if banned.names.contains(&tok.as_str()) {
            found.push(format!("{line}: {tok}"));
        }
        if banned.macros.contains(&tok.as_str()) && text(i + 1) == "!" {
            found.push(format!("{line}: {tok}!"));
        }
    }
    found
}

/// The identifiers and punctuation of Rust source with their line numbers, `::` as one token;
/// comments (nested block comments too), string, byte-string, raw-string and char literals
/// dropped. Lifetimes are kept apart from char literals (`'a` has no closing quote).
fn tokens(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips to just past the first `end` at or after `from`, counting lines; the whole rest
    // if there is none.
    let skip_to = |from: usize, end: &[u8], line: &mut usize| -> usize {
        let mut j = from;
        while j < b.len() && !b[j..].starts_with(end) {
            if b[j] == b'\\' && end == b"\"" {
                j += 1;
            }
            j += 1;
        }
        *line += b[from..j.min(b.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        (j + end.len()).min(b.len())
    };
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            i = skip_to(i, b"\n", &mut line) - 1;
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
            }
        } else if c == b'"' {
            i = skip_to(i + 1, b"\"", &mut line);
        } else if c == b'\'' {
            // A char literal ('x', 'é', '\n', '\'', '\u{..}') or a lifetime ('a).
            let width = code[i + 1..].chars().next().map_or(1, char::len_utf8);
            if b.get(i + 1) == Some(&b'\\') {
                i = skip_to(i + 3, b"'", &mut line);
            } else if b.get(i + 1 + width) == Some(&b'\'') {
                i += 2 + width;
            } else {
                i += 1;
            }
        } else if c == b'_' || c.is_ascii_alphanumeric() {
            let start = i;
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let word = &code[start..i];
            // Raw strings (r"…", r#"…"#, br#"…"#) and byte strings (b"…") are literals.
            let hashes = b[i..].iter().take_while(|&&h| h == b'#').count();
            if matches!(word, "r" | "br") && b.get(i + hashes) == Some(&b'"') {
                let end = format!("\"{}", "#".repeat(hashes));
                i = skip_to(i + hashes + 1, end.as_bytes(), &mut line);
            } else if word == "b" && b.get(i) == Some(&b'"') {
                i = skip_to(i + 1, b"\"", &mut line);
            } else if !word.as_bytes()[0].is_ascii_digit() {
                toks.push((line, word.to_owned()));
            }
        } else if b[i..].starts_with(b"::") {
            toks.push((line, "::".to_owned()));
            i += 2;
        } else {
            toks.push((line, (c as char).to_string()));
            i += 1;
        }
    }
    toks
}
