//! The configuration end to end: a file's text parsed, then resolved with flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::resolve::DRAIN_DELAY;
use super::{FileConfig, Reflection, Resolved, resolve};
use crate::cli::ServeArgs;

fn args(list: &[&str]) -> ServeArgs {
    use clap::Parser;
    let mut full = vec!["protogate", "serve"];
    full.extend_from_slice(list);
    match crate::cli::Cli::parse_from(full).command {
        crate::cli::Command::Serve(a) => a,
        _ => unreachable!(),
    }
}

#[test]
fn flags_override_the_file() {
    let file = FileConfig::parse(
        r#"
            listen = "127.0.0.1:9000"
            upstream = "http://127.0.0.1:1"
            protos = ["a.proto"]
            includes = ["proto"]
            upstream_timeout = "5s"
            strict_accept = true
            [services."x.v1.S"]
            upstream = "http://127.0.0.1:2"
        "#,
        Path::new("/etc/pg"),
    )
    .unwrap();
    let r = resolve(
        args(&["--listen", "127.0.0.1:0", "--upstream-timeout", "2s"]),
        file,
    )
    .unwrap();
    assert_eq!(r.listen.to_string(), "127.0.0.1:0");
    assert_eq!(r.edge.upstream_timeout, Duration::from_secs(2));
    assert!(r.edge.strict_accept);
    assert_eq!(
        r.default_upstream,
        Some(vec!["http://127.0.0.1:1".to_owned()])
    );
    assert_eq!(
        r.service_upstreams,
        vec![("x.v1.S".to_owned(), vec!["http://127.0.0.1:2".to_owned()])]
    );
    assert_eq!(r.schema.protos, vec![PathBuf::from("/etc/pg/a.proto")]);
    assert_eq!(r.schema.includes, vec![PathBuf::from("/etc/pg/proto")]);
    assert_eq!(r.edge.max_body_bytes, 4 * 1024 * 1024);
}

/// A flag's override case: the file's line, the flags, what is looked at, its value from the
/// file, its value with the flags.
type Override = (
    &'static str,
    &'static [&'static str],
    fn(&Resolved) -> String,
    &'static str,
    &'static str,
);

/// Every serve flag that has a TOML key.
const OVERRIDES: &[Override] = &[
    (
        "listen = \"127.0.0.1:9000\"",
        &["--listen", "localhost:9001"],
        |r| r.listen.to_string(),
        "127.0.0.1:9000",
        "localhost:9001",
    ),
    (
        "admin_listen = \"127.0.0.1:9100\"",
        &["--admin-listen", "127.0.0.1:9101"],
        |r| format!("{:?}", r.admin_listen.as_ref().map(|l| l.to_string())),
        "Some(\"127.0.0.1:9100\")",
        "Some(\"127.0.0.1:9101\")",
    ),
    (
        "upstream = \"http://a:1\"",
        &["--upstream", "http://b:2"],
        |r| format!("{:?}", r.default_upstream),
        "Some([\"http://a:1\"])",
        "Some([\"http://b:2\"])",
    ),
    (
        "descriptor_sets = [\"a.pb\"]",
        &["--descriptor-set", "b.pb"],
        |r| format!("{:?}", r.schema.descriptor_sets),
        "[\"/etc/pg/a.pb\"]",
        "[\"b.pb\"]",
    ),
    (
        "protos = [\"a.proto\"]",
        &["--proto", "b.proto"],
        |r| format!("{:?}", r.schema.protos),
        "[\"/etc/pg/a.proto\"]",
        "[\"b.proto\"]",
    ),
    (
        "includes = [\"inc\"]",
        &["-I", "other"],
        |r| format!("{:?}", r.schema.includes),
        "[\"/etc/pg/inc\"]",
        "[\"other\"]",
    ),
    (
        "max_body_bytes = 1000",
        &["--max-body-bytes", "2000"],
        |r| r.edge.max_body_bytes.to_string(),
        "1000",
        "2000",
    ),
    (
        "upstream_timeout = \"5s\"",
        &["--upstream-timeout", "7s"],
        |r| format!("{:?}", r.edge.upstream_timeout),
        "5s",
        "7s",
    ),
    (
        "strict_accept = true",
        &["--strict-accept=false"],
        |r| r.edge.strict_accept.to_string(),
        "true",
        "false",
    ),
    (
        "schema_source = \"reflection\"",
        &["--reflect=false"],
        |r| format!("{:?}", r.reflection.as_ref().map(|r| r.all)),
        "Some(true)",
        "None",
    ),
    (
        "schema_source = \"files\"",
        &["--reflect"],
        |r| format!("{:?}", r.reflection.as_ref().map(|r| (r.all, r.refresh))),
        "None",
        "Some((true, 60s))",
    ),
    (
        "strict_accept = false",
        &["--strict-accept"],
        |r| r.edge.strict_accept.to_string(),
        "false",
        "true",
    ),
    (
        "strict_accept = false",
        &["--strict-accept=true"],
        |r| r.edge.strict_accept.to_string(),
        "false",
        "true",
    ),
    (
        "log_format = \"json\"",
        &["--log-format", "text"],
        |r| format!("{:?}", r.log_format),
        "Json",
        "Text",
    ),
    (
        "downgrade_log_interval = \"5m\"",
        &["--downgrade-log-interval", "0"],
        |r| format!("{:?}", r.edge.downgrade_log_interval),
        "300s",
        "0ns",
    ),
    (
        "worker_threads = 3",
        &["--worker-threads", "1"],
        |r| r.worker_threads.to_string(),
        "3",
        "1",
    ),
    (
        "tls = { cert = \"f.pem\", key = \"f.key\" }",
        &["--tls-cert", "/x.pem", "--tls-key", "/x.key"],
        |r| r.tls.as_ref().unwrap().cert.display().to_string(),
        "/etc/pg/f.pem",
        "/x.pem",
    ),
    (
        "tls = { cert = \"f.pem\", key = \"f.key\" }",
        &["--tls-key", "/x.key", "--tls-cert", "/x.pem"],
        |r| r.tls.as_ref().unwrap().key.display().to_string(),
        "/etc/pg/f.key",
        "/x.key",
    ),
];

/// Each flag that has a TOML key: the file's value without the flag, the flag's with both.
#[test]
fn every_flag_overrides_its_file_key() {
    let cases = OVERRIDES;
    for (line, flags, view, from_file, from_flag) in cases {
        let key = line.split(' ').next().unwrap();
        let mut text = String::new();
        if key != "upstream" {
            text += "upstream = \"http://base:1\"\n";
        }
        if key != "protos" && key != "descriptor_sets" {
            text += "protos = [\"base.proto\"]\n";
        }
        text += line;
        let file = || FileConfig::parse(&text, Path::new("/etc/pg")).unwrap();
        let r = resolve(args(&[]), file()).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(view(&r), *from_file, "{line}");
        let r = resolve(args(flags), file()).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        assert_eq!(view(&r), *from_flag, "{line} {flags:?}");
    }
    // Every serve flag with a value is covered (a new flag needs a case above).
    use clap::CommandFactory;
    let cli = crate::cli::Cli::command();
    let serve = cli.find_subcommand("serve").unwrap();
    for arg in serve.get_arguments() {
        let long = arg.get_long().unwrap_or_default();
        if long == "config" || long == "help" {
            continue;
        }
        let flag = format!("--{long}");
        let short = arg.get_short().map(|c| format!("-{c}"));
        assert!(
            cases
                .iter()
                .any(|(_, flags, ..)| flags[0].split('=').next() == Some(&flag)
                    || Some(flags[0].to_owned()) == short),
            "{flag} has no override case"
        );
    }
    // A bool flag takes only true or false.
    use clap::Parser;
    assert!(
        crate::cli::Cli::try_parse_from(["protogate", "serve", "--strict-accept=yes"]).is_err()
    );
}

#[test]
fn upstreams_take_lists_refresh_and_health_checks() {
    let file = FileConfig::parse(
        r#"
upstream = ["http://a:1", "http://b:2"]
protos = ["x.proto"]
dns_refresh = "250ms"
health_interval = "2s"
[services."x.v1.S"]
upstream = "http://c:3"
health_check = true
[services."x.v1.T"]
upstream = ["http://d:4"]
"#,
        Path::new("/etc/pg"),
    )
    .unwrap();
    let r = resolve(args(&[]), file).unwrap();
    assert_eq!(
        r.default_upstream,
        Some(vec!["http://a:1".to_owned(), "http://b:2".to_owned()])
    );
    assert_eq!(
        r.service_upstreams,
        vec![
            ("x.v1.S".to_owned(), vec!["http://c:3".to_owned()]),
            ("x.v1.T".to_owned(), vec!["http://d:4".to_owned()]),
        ]
    );
    assert!(!r.default_health_check);
    assert_eq!(r.health_checked.iter().collect::<Vec<_>>(), ["x.v1.S"]);
    assert_eq!(r.upstream_options.dns_refresh, Duration::from_millis(250));
    assert_eq!(r.upstream_options.health_interval, Duration::from_secs(2));
    // The top level's health_check is every service's default.
    let file = FileConfig::parse(
        "upstream = \"http://a:1\"\nprotos = [\"x.proto\"]\nhealth_check = true\n[services.\"x.v1.S\"]\nupstream = \"http://c:3\"\n",
        Path::new("/etc/pg"),
    )
    .unwrap();
    let r = resolve(args(&[]), file).unwrap();
    assert!(r.default_health_check);
    assert!(r.health_checked.contains("x.v1.S"));
    for (text, wanted) in [
        ("upstream = []", "upstream: an empty list"),
        ("upstream = [\"ftp://a:1\"]", "expected http://HOST:PORT"),
        (
            "upstream = \"http://a:1\"\ndns_refresh = \"0\"",
            "dns_refresh: 0ns is too short; at least 100ms",
        ),
    ] {
        let text = format!("protos = [\"x.proto\"]\n{text}");
        let e = FileConfig::parse(&text, Path::new("/etc/pg"))
            .and_then(|file| resolve(args(&[]), file))
            .unwrap_err();
        assert!(e.0.contains(wanted), "{text}: {e}");
    }
}

#[test]
fn http_rules_from_the_file() {
    let file = FileConfig::parse(
        r#"
            upstream = "http://127.0.0.1:1"
            protos = ["a.proto"]
            unknown_query_parameters = "ignore"
            [[http_rules]]
            selector = "x.v1.S.Get"
            get = "/v1/things/{id}"
            response_body = "thing"
            [[http_rules.additional_bindings]]
            custom = { kind = "SEARCH", path = "/v1/things" }
            body = "*"
        "#,
        Path::new("."),
    )
    .unwrap();
    let r = resolve(args(&[]), file).unwrap();
    assert_eq!(r.edge.unknown_query, transcode::rest::UnknownQuery::Ignore);
    let rule = &r.edge.http_rules[0];
    assert_eq!(
        (
            rule.selector.as_str(),
            rule.method.as_str(),
            rule.path.as_str()
        ),
        ("x.v1.S.Get", "GET", "/v1/things/{id}")
    );
    assert_eq!(rule.response_body, "thing");
    let b = &rule.additional_bindings[0];
    assert_eq!(
        (
            b.selector.as_str(),
            b.method.as_str(),
            b.path.as_str(),
            b.body.as_str()
        ),
        ("x.v1.S.Get", "SEARCH", "/v1/things", "*")
    );
}

/// A bad value of any key is refused, naming it.
#[test]
fn bad_values_are_named() {
    for (toml, want) in [
        ("[[http_rules]]\nget = \"/x\"", "needs a selector"),
        (
            "[[http_rules]]\nselector = \"a.S.M\"\nget = \"/x\"\npost = \"/y\"",
            "2 patterns",
        ),
        ("[[http_rules]]\nselector = \"a.S.M\"", "0 patterns"),
        (
            "unknown_query_parameters = \"drop\"",
            "unknown_query_parameters",
        ),
        (
            "max_stream_bytes = 0",
            "max_stream_bytes (0) is below max_body_bytes",
        ),
        (
            "max_inflight_bytes = 1000",
            "max_inflight_bytes (1000) is below max_body_bytes",
        ),
        (
            "max_concurrent_requests = 0",
            "max_concurrent_requests is 0",
        ),
        (
            "max_concurrent_requests_per_upstream = 0",
            "max_concurrent_requests_per_upstream is 0",
        ),
        ("max_connections = 0", "max_connections is 0"),
        ("max_concurrent_streams = 0", "max_concurrent_streams is 0"),
        ("idle_timeout = \"0s\"", "idle_timeout is 0"),
        ("idle_timeout = \"soon\"", "idle_timeout"),
        (
            "[compression]\nalgorithms = [\"lz4\"]",
            "\"lz4\" is not one of zstd, br, gzip, deflate",
        ),
        (
            "[compression]\nalgorithms = [\"gzip\", \"GZIP\"]",
            "listed twice",
        ),
        ("[compression]\nalgorithms = []", "algorithms is empty"),
        (
            "[compression]\nlevel = \"max\"",
            "compression.level: \"max\"",
        ),
        ("[compression]\nspeed = 1", "speed"),
        ("upstream_compression = \"snappy\"", "upstream_compression"),
    ] {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        let e = FileConfig::parse(&text, Path::new("."))
            .and_then(|f| resolve(args(&[]), f))
            .unwrap_err();
        assert!(e.0.contains(want), "{toml}: {e}");
    }
}

/// The admission limits (max_concurrent_requests, max_inflight_bytes, …), from the file.
#[test]
fn limits_from_the_file() {
    let limits = FileConfig::parse(
        r#"
            upstream = "http://127.0.0.1:1"
            protos = ["a.proto"]
            max_concurrent_requests = 10
            max_concurrent_requests_per_upstream = 5
            max_inflight_bytes = 8388608
            max_concurrent_streams = 100
            max_connections = 20
            idle_timeout = "2m"
            drain_delay = "7s"
        "#,
        Path::new("."),
    )
    .and_then(|f| resolve(args(&[]), f))
    .unwrap()
    .edge;
    assert_eq!(limits.drain_delay, std::time::Duration::from_secs(7));
    let bare = FileConfig::parse(
        "upstream = \"http://127.0.0.1:1\"\nprotos = [\"a.proto\"]",
        Path::new("."),
    )
    .unwrap();
    assert_eq!(
        resolve(args(&[]), bare).unwrap().edge.drain_delay,
        DRAIN_DELAY
    );
    assert_eq!(
        (
            limits.max_concurrent_requests,
            limits.max_concurrent_requests_per_upstream,
            limits.max_inflight_bytes,
            limits.max_concurrent_streams,
            limits.max_connections,
            limits.idle_timeout
        ),
        (
            10,
            Some(5),
            8 << 20,
            100,
            20,
            std::time::Duration::from_secs(120)
        )
    );
}

#[test]
fn compression_settings() {
    use edge::coding::{Coding, Level};
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        resolve(args(&[]), FileConfig::parse(&text, Path::new(".")).unwrap()).unwrap()
    };
    // Absent: off, and requests to upstreams go as they are.
    let r = resolved("");
    assert!(!r.edge.compression.enabled);
    assert!(!r.upstream_options.compress_requests);
    // The section alone turns it on with the defaults.
    let r = resolved("[compression]");
    assert!(r.edge.compression.enabled);
    assert_eq!(r.edge.compression.min_bytes, 1024);
    assert_eq!(r.edge.compression.algorithms, Coding::ALL);
    assert_eq!(r.edge.compression.level, Level::Default);
    assert!(!r.edge.compression.protobuf);
    let r = resolved(
        "upstream_compression = \"gzip\"\n[compression]\nenabled = false\nmin_bytes = 10\nalgorithms = [\"gzip\", \"br\"]\nlevel = 3\nprotobuf = true",
    );
    assert!(!r.edge.compression.enabled);
    assert_eq!(r.edge.compression.min_bytes, 10);
    assert_eq!(r.edge.compression.algorithms, [Coding::Gzip, Coding::Br]);
    assert_eq!(r.edge.compression.level, Level::Precise(3));
    assert!(r.edge.compression.protobuf);
    assert!(r.upstream_options.compress_requests);
    let r = resolved("[compression]\nlevel = \"fastest\"");
    assert_eq!(r.edge.compression.level, Level::Fastest);
}

#[test]
fn openapi_path_is_a_path_or_nothing() {
    let path = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        resolve(args(&[]), FileConfig::parse(&text, Path::new(".")).unwrap())
            .map(|r| r.edge.openapi_path)
            .map_err(|e| e.to_string())
    };
    assert_eq!(path(""), Ok(Some("/openapi.json".to_owned())));
    assert_eq!(path("openapi_path = \"\""), Ok(None));
    assert_eq!(
        path("openapi_path = \"/api/v1/openapi.json\""),
        Ok(Some("/api/v1/openapi.json".to_owned()))
    );
    for bad in ["openapi.json", "/a?b", "/a b"] {
        let e = path(&format!("openapi_path = \"{bad}\"")).unwrap_err();
        assert!(
            e.contains("openapi_path") && e.contains("not a path"),
            "{bad}: {e}"
        );
    }
    let e = path("openapi_path = \"/metrics\"").unwrap_err();
    assert!(e.contains("admin endpoints"), "{e}");
}

#[test]
fn retry_policies_budget_and_outlier_detection() {
    use edge::upstream::{Codes, RetrySettings};
    use std::time::Duration;
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        FileConfig::parse(&text, Path::new("."))
            .and_then(|file| resolve(args(&[]), file))
            .map_err(|e| e.to_string())
    };
    let r = resolved(
        "retry_budget = 0.5\nconsecutive_failures = 0\n\
         [services.\"p.S\"]\nretry = { codes = [\"unavailable\", \"RESOURCE_EXHAUSTED\"], attempts = 4, backoff = \"10ms\", max_backoff = \"1s\" }\n\
         [services.\"p.S.M\"]\nretry = { attempts = 1 }\n\
         [services.\"p.S.N\".retry]\nper_try_timeout = \"2s\"\n",
    )
    .unwrap();
    assert_eq!(r.upstream_options.retry_budget, 0.5);
    assert_eq!(r.upstream_options.consecutive_failures, 0);
    let retries = &r.edge.retries;
    assert_eq!(retries.len(), 3);
    assert_eq!(
        retries[0],
        (
            "p.S".to_owned(),
            RetrySettings {
                codes: Some(Codes::parse(["UNAVAILABLE", "RESOURCE_EXHAUSTED"]).unwrap()),
                attempts: Some(4),
                backoff: Some(Duration::from_millis(10)),
                max_backoff: Some(Duration::from_secs(1)),
                per_try_timeout: None,
            }
        )
    );
    // A method's keys over its service's: one attempt is no policy.
    assert_eq!(retries[1].1.or(retries[0].1).policy(), None);
    let n = retries[2].1.or(retries[0].1).policy().unwrap();
    assert_eq!(
        (n.attempts, n.per_try_timeout),
        (4, Some(Duration::from_secs(2)))
    );
    // Defaults.
    let plain = resolved("").unwrap();
    assert_eq!(plain.upstream_options.retry_budget, 0.2);
    assert_eq!(plain.upstream_options.consecutive_failures, 5);
    assert!(plain.edge.retries.is_empty());
    for (bad, names) in [
        ("retry_budget = 1.5", "retry_budget"),
        ("retry_budget = -0.1", "retry_budget"),
        (
            "[services.\"p.S\"]\nretry = { attempts = 0 }",
            "retry.attempts",
        ),
        (
            "[services.\"p.S\"]\nretry = { attempts = 11 }",
            "retry.attempts",
        ),
        ("[services.\"p.S\"]\nretry = { codes = [] }", "retry.codes"),
        (
            "[services.\"p.S\"]\nretry = { codes = [\"5xx\"] }",
            "retry.codes",
        ),
        (
            "[services.\"p.S\"]\nretry = { per_try_timeout = \"0s\" }",
            "retry.per_try_timeout",
        ),
        (
            "[services.\"p.S\"]\nretry = { backoff = \"soon\" }",
            "retry.backoff",
        ),
        (
            "[services.\"p.S\"]\nretry = { backoff = \"1s\", max_backoff = \"10ms\" }",
            "retry.max_backoff",
        ),
        ("[services.\"p.S\"]\nretry = { tries = 3 }", "tries"),
    ] {
        let e = resolved(bad).unwrap_err();
        assert!(e.contains(names), "{bad}: {e}");
    }
}

#[test]
fn json_rendering_and_its_overrides() {
    use edge::json_options::{JsonSettings, JsonStream};
    let json = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        FileConfig::parse(&text, Path::new("."))
            .and_then(|file| resolve(args(&[]), file))
            .map(|r| r.edge.json)
            .map_err(|e| e.to_string())
    };
    let j = json(
        "[json]\nemit_unpopulated = true\nindent = 2\nstream = \"ndjson\"\n\
         [services.\"p.S\"]\nupstream = \"http://s:1\"\n[services.\"p.S\".json]\nuse_proto_names = true\n\
         [services.\"p.S.M\".json]\nenums_as_ints = true\n",
    )
    .unwrap();
    assert_eq!(
        j.global,
        JsonSettings {
            emit_unpopulated: Some(true),
            indent: Some(2),
            stream: Some(JsonStream::Ndjson),
            ..JsonSettings::default()
        }
    );
    assert_eq!(j.overrides.len(), 2);
    assert_eq!(j.overrides[0].0, "p.S");
    assert_eq!(j.overrides[0].1.use_proto_names, Some(true));
    assert_eq!(j.overrides[1].0, "p.S.M");
    assert_eq!(j.overrides[1].1.enums_as_ints, Some(true));
    assert!(json("").unwrap().overrides.is_empty());

    // A method's table may hold a timeout (no upstream needed), over its service's.
    let text = "upstream = \"http://h:1\"\nprotos = [\"a\"]\n\
                [services.\"p.S\"]\nupstream = \"http://s:1\"\ntimeout = \"10s\"\n\
                [services.\"p.S.M\"]\ntimeout = \"250ms\"\n";
    let edge = resolve(args(&[]), FileConfig::parse(text, Path::new(".")).unwrap())
        .unwrap()
        .edge;
    assert_eq!(
        edge.timeouts,
        [
            ("p.S".to_owned(), std::time::Duration::from_secs(10)),
            ("p.S.M".to_owned(), std::time::Duration::from_millis(250))
        ]
    );
    for bad in ["0s", "soon"] {
        let e = json(&format!("[services.\"p.S.M\"]\ntimeout = \"{bad}\"")).unwrap_err();
        assert!(e.contains("services.\"p.S.M\".timeout"), "{bad}: {e}");
    }
    let e = json("[json]\nindent = 9").unwrap_err();
    assert!(e.contains("json.indent") && e.contains("at most 8"), "{e}");
    let e = json("[json]\nstream = \"lines\"").unwrap_err();
    assert!(e.contains("stream"), "{e}");
    let e =
        json("[services.\"p.S.M\"]\nhealth_check = true\n[services.\"p.S.M\".json]\nindent = 1")
            .unwrap_err();
    assert!(
        e.contains("services.\"p.S.M\"") && e.contains("has none"),
        "{e}"
    );
}

#[test]
fn forwarding_lists_and_trusted_proxies() {
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        FileConfig::parse(&text, Path::new("."))
            .and_then(|file| resolve(args(&[]), file))
            .map(|r| r.edge)
            .map_err(|e| e.to_string())
    };
    let edge = resolved(
        "forward_headers = [\"X-Tenant\", \"x-feature-*\"]\nforward_response_headers = [\"x-ratelimit-*\"]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]",
    )
    .unwrap();
    assert!(edge.forward_headers.matches(&"x-tenant".parse().unwrap()));
    assert!(
        edge.forward_headers
            .matches(&"x-feature-b".parse().unwrap())
    );
    assert!(
        edge.forward_response_headers
            .matches(&"x-ratelimit-left".parse().unwrap())
    );
    assert!(!edge.trusted_proxies.is_empty());
    for (toml, key) in [
        ("forward_headers = [\"host\"]", "forward_headers"),
        (
            "forward_response_headers = [\"grpc-*\"]",
            "forward_response_headers",
        ),
        ("forward_headers = [\"connection\"]", "forward_headers"),
        ("trusted_proxies = [\"10.0.0.0/40\"]", "trusted_proxies"),
    ] {
        let e = resolved(toml).unwrap_err();
        assert!(e.starts_with(key), "{toml}: {e}");
    }
}

#[test]
fn exported_clients() {
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        resolve(args(&[]), FileConfig::parse(&text, Path::new(".")).unwrap())
            .unwrap()
            .edge
            .migration
            .export
    };
    let export = resolved("");
    assert_eq!(export.clients, 50);
    assert!(
        export.unverified,
        "no one can be verified: every name is exported"
    );
    let key = format!(
        "[auth]\n[[auth.api_keys]]\nclient = \"billing\"\nsha256 = \"{}\"\n",
        "ab".repeat(32)
    );
    let export = resolved(&key);
    assert!(!export.unverified, "with [auth], only verified names");
    let export = resolved(&format!(
        "{key}[migration]\nexport_clients = 0\nexport_unverified = true\n"
    ));
    assert_eq!(export.clients, 0);
    assert!(export.unverified);
}

#[test]
fn otel_needs_the_feature_and_a_url() {
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        FileConfig::parse(&text, Path::new(".")).and_then(|f| resolve(args(&[]), f))
    };
    let r = resolved("[otel]\nendpoint = \"http://127.0.0.1:4317\"");
    if cfg!(feature = "otel") {
        let otel = r.unwrap().otel.unwrap();
        assert_eq!(otel.service_name, "protogate");
        assert_eq!(otel.sample_ratio, 1.0);
        let e = resolved("[otel]\nendpoint = \"127.0.0.1:4317\"").unwrap_err();
        assert!(e.0.contains("not an http://"), "{e}");
        let e = resolved("[otel]\nendpoint = \"http://c:4317\"\nsample_ratio = 2.0").unwrap_err();
        assert!(e.0.contains("sample_ratio"), "{e}");
    } else {
        let e = r.unwrap_err();
        assert!(e.0.contains("--features otel"), "{e}");
    }
    assert!(resolved("").unwrap().otel.is_none());
}

#[test]
fn a_schema_from_reflection_needs_no_file() {
    let resolved = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\n{toml}");
        resolve(args(&[]), FileConfig::parse(&text, Path::new("."))?)
    };
    let r = resolved("schema_source = \"reflection\"\nschema_refresh = \"5m\"").unwrap();
    assert_eq!(
        r.reflection,
        Some(Reflection {
            all: true,
            services: vec![],
            refresh: Duration::from_secs(300)
        })
    );
    assert_eq!(r.edge.schema_source, "reflection");
    let r =
        resolved("protos = [\"a\"]\n[services.\"p.S\"]\nupstream = \"http://s:1\"\nreflect = true")
            .unwrap();
    let reflection = r.reflection.unwrap();
    assert!(!reflection.all);
    assert_eq!(reflection.services, ["p.S"]);
    assert_eq!(r.edge.schema_source, "files+reflection");
    let e = resolved("protos = [\"a\"]\nschema_refresh = \"5m\"").unwrap_err();
    assert!(
        e.0.contains("schema_refresh is for a schema from reflection"),
        "{e}"
    );
    let e = resolved("schema_source = \"reflection\"\nschema_refresh = \"1ms\"").unwrap_err();
    assert!(
        e.0.contains("schema_refresh") && e.0.contains("too short"),
        "{e}"
    );
    let e = resolved("schema_source = \"upstream\"").unwrap_err();
    assert!(e.0.contains("files") && e.0.contains("reflection"), "{e}");
}

#[test]
fn bad_configs_are_named() {
    let e = FileConfig::parse("listen = 1\nbogus = true", Path::new(".")).unwrap_err();
    assert!(e.0.contains("listen") || e.0.contains("bogus"), "{e}");
    let e = FileConfig::parse("bogus = true", Path::new(".")).unwrap_err();
    assert!(e.0.contains("bogus"), "{e}");
    let e = resolve(args(&["--descriptor-set", "x.pb"]), FileConfig::default()).unwrap_err();
    assert!(e.0.contains("no upstream"), "{e}");
    let e = resolve(args(&["--upstream", "http://h:1"]), FileConfig::default()).unwrap_err();
    assert!(e.0.contains("no schema"), "{e}");
    let e = resolve(
        args(&["--upstream", "ftp://h:1", "--proto", "a.proto"]),
        FileConfig::default(),
    )
    .unwrap_err();
    assert!(e.0.contains("ftp://"), "{e}");
    let e = resolve(
        args(&[
            "--upstream",
            "http://h:1",
            "--proto",
            "a",
            "--listen",
            "nowhere",
        ]),
        FileConfig::default(),
    )
    .unwrap_err();
    assert!(e.0.contains("--listen"), "{e}");
    let e = resolve(
        args(&[
            "--upstream",
            "http://h:1",
            "--proto",
            "a",
            "--upstream-timeout",
            "soon",
        ]),
        FileConfig::default(),
    )
    .unwrap_err();
    assert!(e.0.contains("upstream_timeout"), "{e}");
}

/// `[auth]` and `[rate_limit]` that cannot work are refused, each naming the key and why.
#[test]
fn auth_and_rate_limit_refusals_name_the_key() {
    let refusal = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        match FileConfig::parse(&text, Path::new(".")).and_then(|f| resolve(args(&[]), f)) {
            Ok(_) => panic!("accepted: {toml}"),
            Err(e) => e.0,
        }
    };
    let key = "sha256 = \"c1d91a32657cef85a2805dab9d0984628abaeb7de20109d9d212c1fc861ef013\"";
    for (toml, said) in [
        (
            "[auth]\n",
            "[auth] verifies nothing: set jwks_file or jwks_url",
        ),
        (
            "[auth]\nissuer = \"x\"\n",
            "[auth] issuer is set but neither jwks_file nor jwks_url",
        ),
        (
            "[auth]\njwks_file = \"k.json\"\njwks_url = \"https://i/k\"\n",
            "[auth] jwks_file and jwks_url are both set",
        ),
        (
            "[auth]\njwks_file = \"k.json\"\njwks_refresh = \"1m\"\n",
            "[auth] jwks_refresh is for jwks_url",
        ),
        (
            "[auth]\njwks_url = \"http://idp/keys\"\n",
            "[auth] jwks_url \"http://idp/keys\": must be an https:// URL",
        ),
        (
            "[auth]\njwks_url = \"https://idp/keys\"\njwks_refresh = \"10ms\"\n",
            "[auth] jwks_refresh 10ms is below 100ms",
        ),
        (
            "[auth]\njwks_file = \"k.json\"\nforward_claims = { tenant = \"content-type\" }\n",
            "[auth] forward_claims.tenant: \"content-type\" is a header of HTTP or gRPC itself",
        ),
        (
            &format!(
                "[auth]\nidentity_header = \"te\"\n[[auth.api_keys]]\nclient = \"a\"\n{key}\n"
            ),
            "[auth] identity_header \"te\" is a header of HTTP or gRPC itself",
        ),
        (
            "[auth]\n[[auth.api_keys]]\nclient = \"a\"\nsha256 = \"abc\"\n",
            "[auth] api_keys (client \"a\"): sha256 must be 64 hex digits",
        ),
        (
            &format!(
                "[auth]\n[[auth.api_keys]]\nclient = \"a\"\n{key}\n[[auth.rules]]\nselector = \"a b\"\nrequired = true\n"
            ),
            "[auth] rules \"a b\": ' ' cannot appear in a selector",
        ),
        (
            "[rate_limit]\nper_client = 0\n",
            "[rate_limit] per_client = 0: requests a second, from 0.000001",
        ),
        (
            "[rate_limit]\nper_client = 1e-300\n",
            "[rate_limit] per_client = 0.000",
        ),
        (
            "[rate_limit]\nper_client = 1\nburst = 0\n",
            "[rate_limit] burst must be at least 1",
        ),
        (
            "[rate_limit]\nper_client = 1\nredis = \"http://r:6379\"\n",
            "[rate_limit] redis \"http://r:6379\": must be redis://host:port or rediss://host:port",
        ),
        (
            "[rate_limit]\nper_client = 1\nredis = \"redis://r:6379\"\nredis_timeout = \"0s\"\n",
            "[rate_limit] redis_timeout must be more than 0",
        ),
    ] {
        let got = refusal(toml);
        assert!(got.starts_with(said), "{toml}\ngot: {got}\nwanted: {said}");
    }
}

/// `[auth]` and `[rate_limit]` as written reach the edge's settings, defaults filled in.
#[test]
fn auth_and_rate_limit_settings() {
    let text = r#"
        upstream = "http://h:1"
        protos = ["a"]
        [auth]
        jwks_url = "https://idp.example.com/keys"
        audiences = ["a", "b"]
        forward_claims = { tenant = "X-Tenant" }
        required = true
        forward_token = true
        [[auth.rules]]
        selector = "grpc.health.v1.*"
        required = false
        [rate_limit]
        per_client = 2.5
        redis = "redis://127.0.0.1:6379"
        [[rate_limit.rules]]
        selector = "a.B.C"
        per_client = 1
        burst = 4
    "#;
    let r = resolve(args(&[]), FileConfig::parse(text, Path::new(".")).unwrap()).unwrap();
    let auth = r.edge.auth.unwrap();
    let jwt = auth.jwt.unwrap();
    assert_eq!(jwt.leeway, Duration::from_secs(60));
    assert_eq!(jwt.client_claim, "sub");
    assert_eq!(jwt.forward_claims[0].1, "x-tenant");
    assert_eq!(
        (auth.required, auth.forward_token, auth.token_cache),
        (true, true, 4096)
    );
    assert_eq!(auth.client_header, "x-protogate-client");
    assert_eq!(auth.api_key_header, "x-api-key");
    let source = r.jwks_url.unwrap();
    assert_eq!(source.refresh, Duration::from_secs(300));
    let limits = r.edge.rate_limit.unwrap();
    assert_eq!((limits.default.per_second, limits.default.burst), (2.5, 3));
    assert_eq!(
        (
            limits.rules[0].limit.per_second,
            limits.rules[0].limit.burst
        ),
        (1.0, 4)
    );
    assert_eq!(limits.max_clients, 100_000);
    assert_eq!(limits.redis.unwrap().timeout, Duration::from_millis(20));
}

/// `readyz_requires`: none by default, each mode by its name.
#[test]
fn readyz_requires_modes() {
    let mode = |toml: &str| {
        let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
        resolve(args(&[]), FileConfig::parse(&text, Path::new(".")).unwrap())
            .map(|r| r.edge.readyz_requires)
            .map_err(|e| e.0)
    };
    use edge::ReadyzRequires::*;
    assert_eq!(mode(""), Ok(None));
    assert_eq!(mode("readyz_requires = \"none\""), Ok(None));
    assert_eq!(mode("readyz_requires = \"any-upstream\""), Ok(AnyUpstream));
    assert_eq!(
        mode("readyz_requires = \"all-upstreams\""),
        Ok(AllUpstreams)
    );
    assert!(
        FileConfig::parse("readyz_requires = \"some\"", Path::new("."))
            .unwrap_err()
            .0
            .contains("unknown variant `some`")
    );
}
