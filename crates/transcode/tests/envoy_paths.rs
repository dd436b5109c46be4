//! Envoy's own path-matcher cases (grpc-httpjson-transcoding's `test/path_matcher_test.cc`,
//! transcribed to `tests/data/envoy_path_matcher.json` with each case's line) replayed
//! through [`Routes`]: with [`Dialect::Envoy`] every registration is accepted or refused as
//! Envoy does and every lookup finds what Envoy finds, with the same bindings — apart from
//! the deliberate deviations listed in [`DEVIATIONS`]; with [`Dialect::Spec`] the templates
//! the google.api.http grammar forbids stay refused.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::Value;
use transcode::Schema;
use transcode::rest::{Dialect, HttpRule, Lookup, Routes};

const CASES: &str = include_str!("data/envoy_path_matcher.json");

/// Tests protogate does not replay, and why.
const NOT_REPLAYED: &[(&str, &str)] = &[
    // Options Envoy has and protogate does not offer.
    (
        "OnlyUnreservedCharsAreUnescapedForMultiSegmentMatchUnescapeAllExceptSlash",
        "url_unescape_spec",
    ),
    (
        "OnlyUnreservedCharsAreUnescapedForMultiSegmentMatchUnescapeAll",
        "url_unescape_spec",
    ),
    (
        "MatchUnregisteredCustomVerb",
        "match_unregistered_custom_verb",
    ),
    ("QueryParameterUnescapePlus", "query_param_unescape_plus"),
    // Two rules on one path: refused when the routes load (Envoy leaves the path
    // unmatchable, or refuses the second when asked to).
    ("ReplacevoidForPath", "duplicate rules are refused at start"),
    (
        "LookupSilentlyFailsOnDuplicate",
        "duplicate rules are refused at start",
    ),
    (
        "RegisterFailsOnDuplicateIfOptIn",
        "duplicate rules are refused at start",
    ),
];

/// Lookups (by their line in path_matcher_test.cc) where the Envoy dialect answers otherwise,
/// on purpose: none.
const DEVIATIONS: &[(u64, &str)] = &[];

/// One method per registration, `e.S/M{i}`, each taking `In` (every variable name the cases
/// use, as a string field).
fn schema(count: usize) -> Schema {
    let mut text = String::from(
        "syntax = \"proto3\"; package e;\n\
         message In { string a = 1; string b = 2; string x = 3; string y = 4; string id = 5; }\n\
         service S {\n",
    );
    for i in 0..count.max(1) {
        text.push_str(&format!("  rpc M{i}(In) returns (In);\n"));
    }
    text.push_str("}\n");
    Schema::compile(&["e.proto".to_owned()], move |_| Some(text.clone())).unwrap()
}

fn rule(i: usize, r: &Value) -> HttpRule {
    HttpRule {
        selector: format!("e.S.M{i}"),
        method: r["method"].as_str().unwrap().to_owned(),
        path: r["template"].as_str().unwrap().to_owned(),
        body: String::new(),
        response_body: String::new(),
        additional_bindings: Vec::new(),
    }
}

#[derive(Default)]
struct Tally {
    registrations: usize,
    lookups: usize,
    skipped: usize,
    skipped_registrations: usize,
    failures: Vec<String>,
}

/// Replays every case in `dialect`; `refused` collects the registrations Envoy accepts that
/// the dialect refuses.
fn replay(dialect: Dialect, refused: &mut Vec<String>) -> Tally {
    let cases: Value = serde_json::from_str(CASES).unwrap();
    let mut t = Tally::default();
    for test in cases["tests"].as_array().unwrap() {
        let name = test["name"].as_str().unwrap();
        let registrations = test["register"].as_array().unwrap();
        if NOT_REPLAYED.iter().any(|(n, _)| *n == name) {
            t.skipped += test["lookups"].as_array().unwrap().len();
            t.skipped_registrations += registrations.len();
            continue;
        }
        let schema = schema(registrations.len());
        let mut rules = Vec::new();
        let mut ids = BTreeMap::new();
        for (i, r) in registrations.iter().enumerate() {
            t.registrations += 1;
            let line = r["line"].as_u64().unwrap();
            let alone = Routes::with_dialect(&schema, &[rule(i, r)], dialect);
            let want = r["registered_ok"].as_bool().unwrap();
            match (alone, want) {
                (Ok(_), true) => {
                    rules.push(rule(i, r));
                    ids.insert(format!("/e.S/M{i}"), r["id"].as_str().unwrap().to_owned());
                }
                (Err(_), false) => {}
                (Err(e), true) => refused.push(format!(
                    "{name} line {line}: {} refused: {e}",
                    r["template"]
                )),
                (Ok(_), false) => t.failures.push(format!(
                    "{name} line {line}: {} taken, Envoy refuses it",
                    r["template"]
                )),
            }
        }
        let routes = Routes::with_dialect(&schema, &rules, dialect)
            .unwrap_or_else(|e| panic!("{name}: the accepted rules together: {e}"));
        for l in test["lookups"].as_array().unwrap() {
            t.lookups += 1;
            let line = l["line"].as_u64().unwrap();
            if DEVIATIONS.iter().any(|(d, _)| *d == line) {
                continue;
            }
            let path = l["path"].as_str().unwrap();
            let path = path.split_once('?').map_or(path, |(p, _)| p);
            let want = l["match"].as_str();
            let (got, bindings) = match routes.find(l["method"].as_str().unwrap(), path) {
                Lookup::Found(route, values) => {
                    let vars = route.template.variables();
                    let bound: Vec<(String, Result<String, String>)> = vars
                        .iter()
                        .zip(&values)
                        .map(|(v, raw)| (v.field_path.clone(), v.decode(raw)))
                        .collect();
                    (ids.get(&*route.method.path).cloned(), bound)
                }
                _ => (None, Vec::new()),
            };
            let shown = format!("{name} line {line}: GET {:?}", truncated(path));
            if got.as_deref() != want {
                t.failures
                    .push(format!("{shown}: found {got:?}, Envoy finds {want:?}"));
                continue;
            }
            let Some(expected) = l["bindings"].as_array() else {
                continue;
            };
            // Path bindings only: query parameters bind later, by the request's conversion.
            let path_vars: Vec<&String> = bindings.iter().map(|(f, _)| f).collect();
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|b| {
                    (
                        b["field"].as_str().unwrap().to_owned(),
                        b["value"].as_str().unwrap().to_owned(),
                    )
                })
                .filter(|(f, _)| path_vars.contains(&f) || l["query"] == "")
                .collect();
            let got: Vec<(String, String)> = bindings
                .into_iter()
                .map(|(f, v)| (f, v.unwrap_or_else(|e| format!("<error: {e}>"))))
                .collect();
            let values_only = l["bindings_check"] == "values_only";
            let same = if values_only {
                got.iter()
                    .map(|(_, v)| v)
                    .eq(expected.iter().map(|(_, v)| v))
            } else {
                got == expected
            };
            if !same {
                t.failures
                    .push(format!("{shown}: bound {got:?}, Envoy binds {expected:?}"));
            }
        }
    }
    t
}

fn truncated(s: &str) -> String {
    if s.len() > 60 {
        format!("{}… ({} bytes)", &s[..60], s.len())
    } else {
        s.to_owned()
    }
}

#[test]
fn the_envoy_dialect_matches_as_envoy_does() {
    let mut refused = Vec::new();
    let mut t = replay(Dialect::Envoy, &mut refused);
    t.failures.extend(refused.iter().cloned());
    assert!(
        t.failures.is_empty(),
        "{} of {} lookups and {} registrations disagree with Envoy:\n{}",
        t.failures.len(),
        t.lookups,
        t.registrations,
        t.failures.join("\n")
    );
    // Every case of the file, replayed or named in NOT_REPLAYED.
    assert_eq!(
        (
            t.registrations + t.skipped_registrations,
            t.lookups + t.skipped
        ),
        (94, 376)
    );
    println!(
        "envoy dialect: {} registrations and {} lookups agree; {} lookups not replayed",
        t.registrations,
        t.lookups - DEVIATIONS.len(),
        t.skipped
    );
}

#[test]
fn the_spec_dialect_keeps_refusing_what_the_grammar_forbids() {
    let mut refused = Vec::new();
    let t = replay(Dialect::Spec, &mut refused);
    println!("{}", refused.join("\n"));
    // '/' alone and literals after '**': Envoy takes them, the google.api.http grammar not.
    let templates: Vec<&str> = refused
        .iter()
        .map(|r| r.split(": ").nth(1).unwrap().trim_end_matches(" refused"))
        .collect();
    assert_eq!(templates.len(), 18, "{templates:?}");
    for t in &templates {
        assert!(t == &"\"/\"" || t.contains("**"), "{t}");
    }
    assert!(
        t.failures
            .iter()
            .all(|f| !f.contains("taken, Envoy refuses"))
    );
}
