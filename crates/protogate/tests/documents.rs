//! ARCHITECTURE.md cites the code by path, type and function name; this test holds it to the
//! tree, so a rename or a move that forgets the document fails here instead of misleading
//! its next reader. Checked: every backticked (or table-cell) path exists in the repository;
//! every `Type::item` path names a type and an item the sources define; every bare
//! snake_case or CamelCase name appears in the sources.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and directory of the repository, as paths relative to its root.
fn tree(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if matches!(name.as_str(), "target" | ".git" | ".venv" | "node_modules") {
            continue;
        }
        let rel = path
            .strip_prefix(base)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        out.push(rel);
        if path.is_dir() {
            tree(&path, base, out);
        }
    }
}

/// The words of the Rust sources (comments left out), and the names they define or declare
/// (fn, struct, enum, trait, type, const, static, mod, a field or a variable with its type).
struct Sources {
    words: HashSet<String>,
    defined: HashSet<String>,
}

fn sources(files: &[String]) -> Sources {
    let mut words = HashSet::new();
    let mut defined = HashSet::new();
    // This file's own examples of missing names are not sources.
    for file in files
        .iter()
        .filter(|f| f.ends_with(".rs") && !f.ends_with("tests/documents.rs"))
    {
        let text = std::fs::read_to_string(root().join(file)).unwrap_or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut previous = "";
            let mut rest = line;
            while let Some(start) = rest.find(|c: char| c.is_alphanumeric() || c == '_') {
                rest = &rest[start..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let (word, after) = rest.split_at(end);
                let declared = matches!(
                    previous,
                    "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "mod"
                ) || (after.starts_with(':') && !after.starts_with("::"));
                if declared {
                    defined.insert(word.to_owned());
                }
                words.insert(word.to_owned());
                previous = word;
                rest = after;
            }
        }
        // A file is a module.
        if let Some(stem) = Path::new(file).file_stem() {
            defined.insert(stem.to_string_lossy().into_owned());
        }
    }
    Sources { words, defined }
}

/// The spans between backticks, and the words of the fenced blocks' lines (the request's
/// life is a drawing).
fn citations(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.extend(
                line.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                    .map(|w| w.trim_matches(|c: char| "()[]:".contains(c)))
                    .filter(|w| w.contains("::") || w.ends_with(".rs"))
                    .map(str::to_owned),
            );
        } else {
            out.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    out
}

const EXTENSIONS: [&str; 10] = [
    ".rs", ".py", ".sh", ".toml", ".md", ".proto", ".lua", ".json", ".yaml", ".txt",
];

/// A path in the repository: not an URL path (`/healthz`), a pattern, a file kind (`.proto`),
/// a place outside the repository (`../shared`) or a gRPC path (`pkg.Service/Method`).
fn is_path(c: &str) -> bool {
    let first = c.split('/').next().unwrap_or_default();
    let not_a_path = c.starts_with(['/', '.'])
        || c.contains(['{', '|', '*', ' ', '…', '<', '='])
        || (c.contains('/') && first.contains('.'));
    !not_a_path && (c.contains('/') || EXTENSIONS.iter().any(|e| c.ends_with(e)))
}

fn is_snake(word: &str) -> bool {
    word.contains('_')
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn is_lower(word: &str) -> bool {
    word.chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn is_camel(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Crates the document may name that are not this repository's.
const FOREIGN: [&str; 16] = [
    "std",
    "tokio",
    "tonic",
    "hyper",
    "hyper_util",
    "h2",
    "http",
    "prost",
    "prost_reflect",
    "protox",
    "arc_swap",
    "rustls",
    "tower",
    "tracing",
    "serde",
    "futures_util",
];

/// What is wrong with one citation, if anything.
fn check(c: &str, files: &[String], src: &Sources) -> Option<String> {
    let c = c.trim_end_matches("()");
    if is_path(c) {
        let c = c.trim_end_matches('/');
        let found = files
            .iter()
            .any(|f| f == c || f.ends_with(&format!("/{c}")));
        return (!found).then(|| format!("no file or directory {c}"));
    }
    if c.contains("::") {
        let segments: Vec<&str> = c.split("::").collect();
        if FOREIGN.contains(&segments[0]) {
            return None;
        }
        for (i, segment) in segments.iter().enumerate() {
            if segment.starts_with('…') || segment.is_empty() {
                continue;
            }
            // A type or a variant is a word of the sources; a function, a field or a module
            // is declared there; a crate is a word (`protogate_tests::…`).
            let ok = if is_camel(segment) {
                src.words.contains(*segment)
            } else if is_snake(segment) || is_lower(segment) {
                src.defined.contains(*segment) || (i == 0 && src.words.contains(*segment))
            } else {
                true
            };
            if !ok {
                return Some(format!("{c}: the sources define no {segment}"));
            }
        }
        return None;
    }
    let file = files
        .iter()
        .any(|f| f == c || f.ends_with(&format!("/{c}")));
    if (is_snake(c) || is_camel(c)) && !src.words.contains(c) && !file {
        return Some(format!("{c}: no such name in the sources"));
    }
    None
}

#[test]
fn every_path_and_name_architecture_md_cites_exists() {
    let root = root();
    let mut files = Vec::new();
    tree(&root, &root, &mut files);
    let src = sources(&files);
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let cited = citations(&doc);
    assert!(cited.len() > 200, "only {} citations found", cited.len());
    let problems: Vec<String> = cited
        .iter()
        .filter_map(|c| check(c, &files, &src))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md cites what is not there:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_a_missing_name_or_file() {
    let root = root();
    let mut files = Vec::new();
    tree(&root, &root, &mut files);
    let src = sources(&files);
    assert!(check("crates/edge/src/service/pipeline.rs", &files, &src).is_none());
    assert!(check("Edge::handle", &files, &src).is_none());
    assert!(check("crates/edge/src/service/nowhere.rs", &files, &src).is_some());
    assert!(check("Admission::enter_the_void", &files, &src).is_some());
    // A method renamed (admit, once enter) while the document kept the old name.
    assert!(check("Admission::enter", &files, &src).is_some());
    assert!(check("Admission::admit", &files, &src).is_none());
    assert!(check("NoSuchTypeAnywhere", &files, &src).is_some());
    assert!(check("no_such_function_anywhere", &files, &src).is_some());
}
