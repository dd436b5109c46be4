//! What the gateway reports about its traffic, end to end on loopback: the downgrade log's
//! later line, which stands for the occurrences it held back (`occurrences=N`), and the
//! `unknown` method label of requests that name no method. Every wait has a deadline. The
//! downgrade log's settings are keys of a configuration file, read by the binary's loader.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use protogate_tests::{
    Http, eventually, log_lines, start_backend, start_gateway, start_gateway_toml,
};

const ECHO: &str = "/protogate.test.svc.TestService/Echo";

/// The longest any one wait may take before the test fails: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// The first downgrade per (method, reason, client) is logged at once; the others within the
/// interval are held back and reported by one later line with their number, once the interval
/// has passed (by the next downgrade, or the periodic flush when none comes).
#[tokio::test]
async fn the_downgrade_log_reports_what_it_held_back() {
    // Long enough that five local requests fall within it on any machine, however loaded.
    let interval = Duration::from_secs(10);
    let backend = start_backend().await;
    let cfg = format!("downgrade_log_interval = \"{}s\"\n", interval.as_secs());
    let (gw, _) = start_gateway_toml(&cfg, &format!("http://{}", backend.addr)).await;
    // The log is shared by every test in this process: this test's lines carry its client id.
    let client = "observability-occurrences";
    let http = Http::h1();
    let started = Instant::now();
    let sent = 5;
    for _ in 0..sent {
        let a = http
            .post(
                gw.addr,
                ECHO,
                "application/json",
                &[("x-client-id", client)],
                r#"{"id":"1"}"#,
            )
            .await;
        assert_eq!(a.status, 200);
    }
    // Five requests take milliseconds: all but the first fall within its interval (a
    // precondition of the counts below, not a timing of the gateway).
    assert!(
        started.elapsed() < interval,
        "the requests took {:?}, longer than the interval: the test needs a longer one",
        started.elapsed()
    );
    let lines = eventually(
        "downgrade lines accounting for every request",
        PATIENCE,
        || {
            let lines = downgrade_lines(client);
            (lines.iter().map(|(n, _)| n).sum::<u64>() == sent).then_some(lines)
        },
    )
    .await;
    let reported = started.elapsed();
    let counts: Vec<u64> = lines.iter().map(|(n, _)| *n).collect();
    assert_eq!(counts, [1, sent - 1], "{lines:#?}");
    assert!(
        reported >= interval,
        "the held-back occurrences were reported after {reported:?}, within the {interval:?} \
         interval"
    );
    let later = &lines[1].1;
    for field in [
        r#"method="protogate.test.svc.TestService/Echo""#,
        r#"reason="json_requested""#,
        r#"format="json""#,
    ] {
        assert!(later.contains(field), "{later}");
    }
}

/// The downgrade lines of `client`: their `occurrences` and the line.
fn downgrade_lines(client: &str) -> Vec<(u64, String)> {
    log_lines(&format!("client_id=\"{client}\""))
        .into_iter()
        .filter(|l| l.contains("downgrade:"))
        .map(|l| {
            // The field, not a client's words that look like it (quoted strings aside).
            let n = without_quoted(&l)
                .split_once("occurrences=")
                .and_then(|(_, rest)| {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits.parse().ok()
                })
                .unwrap_or_else(|| panic!("a downgrade line without occurrences: {l}"));
            (n, l)
        })
        .collect()
}

/// Requests whose path names no method count under `method="unknown"`: the label's values
/// come from the schema, never from the client. A path that names a method with the wrong
/// HTTP method counts under that method.
#[tokio::test]
async fn requests_that_name_no_method_count_as_unknown() {
    let backend = start_backend().await;
    let (gw, _) = start_gateway(
        &format!("http://{}", backend.addr),
        edge::EdgeConfig::default(),
    )
    .await;
    let http = Http::h1();
    let unknown = [
        "/protogate.test.svc.TestService/NoSuchMethod",
        "/no.such.Service/Echo",
        "/v1/nothing/here",
        "/x-label-probe-17",
    ];
    for path in unknown {
        let a = http
            .post(gw.addr, path, "application/json", &[], "{}")
            .await;
        assert_eq!(a.status, 404, "{path}: {:?}", a.body);
    }
    let a = http.get(gw.addr, "/v1/nothing/there").await;
    assert_eq!(a.status, 404);
    let a = http.get(gw.addr, ECHO).await;
    assert_eq!(a.status, 405);

    let text = http.metrics(gw.addr).await;
    let requests = |method: &str, code: u16| -> f64 {
        samples(&text, "protogate_requests_total{")
            .filter(|(labels, _)| {
                labels.contains(&format!("method=\"{method}\""))
                    && labels.contains(&format!("code=\"{code}\""))
            })
            .map(|(_, v)| v)
            .sum()
    };
    assert_eq!(requests("unknown", 404), 5.0, "{text}");
    assert_eq!(
        requests("protogate.test.svc.TestService/Echo", 405),
        1.0,
        "{text}"
    );
    let durations: f64 = samples(&text, "protogate_request_duration_seconds_count{")
        .filter(|(labels, _)| labels.contains(r#"method="unknown""#))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(durations, 5.0, "{text}");
    for path in unknown.iter().chain(&["/v1/nothing/there"]) {
        assert!(!text.contains(path), "{path} became a label:\n{text}");
    }
    for name in ["NoSuchMethod", "no.such.Service"] {
        assert!(!text.contains(name), "{name} became a label:\n{text}");
    }
}

/// The samples of `/metrics` text whose line starts with `prefix`: (labels, value).
fn samples<'t>(text: &'t str, prefix: &'t str) -> impl Iterator<Item = (&'t str, f64)> + 't {
    text.lines().filter_map(move |l| {
        let rest = l.strip_prefix(prefix)?;
        let (labels, value) = rest.split_once("} ")?;
        Some((labels, value.trim().parse().ok()?))
    })
}

/// A client's words are quoted and escaped in the text log: a User-Agent cannot add fields
/// to the downgrade line (nor to the request line).
#[tokio::test]
async fn a_user_agent_cannot_forge_log_fields() {
    let backend = start_backend().await;
    // 0: every downgrade is logged.
    let cfg = "downgrade_log_interval = \"0\"\n";
    let (gw, _) = start_gateway_toml(cfg, &format!("http://{}", backend.addr)).await;
    let client = "observability-forgery";
    let forged = r#"zz occurrences=999 method="admin/Delete""#;
    let a = Http::h1()
        .post(
            gw.addr,
            ECHO,
            "application/json",
            &[("x-client-id", client), ("user-agent", forged)],
            r#"{"id":"1"}"#,
        )
        .await;
    assert_eq!(a.status, 200);
    let lines = eventually("the downgrade line", PATIENCE, || {
        let lines = downgrade_lines(client);
        (!lines.is_empty()).then_some(lines)
    })
    .await;
    let line = &lines[0].1;
    assert!(
        line.contains(r#"user_agent="zz occurrences=999 method=\"admin/Delete\"""#),
        "{line}"
    );
    // Outside quoted strings, the line has its own fields only.
    let bare = without_quoted(line);
    assert!(
        bare.contains("occurrences=1") && !bare.contains("999"),
        "{bare}"
    );
    assert!(!bare.contains("admin/Delete"), "{bare}");
    assert_eq!(lines[0].0, 1, "{line}");
}

/// `line` with every double-quoted string (escapes honoured) taken out.
fn without_quoted(line: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for c in line.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => quoted = false,
            (true, false, _) => {}
            (false, _, '"') => quoted = true,
            (false, _, c) => out.push(c),
        }
    }
    out
}

/// A client that sends a new `x-client-id` with every request cannot flood the log: at most
/// `downgrade_log_max_lines` lines per interval in all, then one line saying how many were
/// held back; the counter stays exact.
#[tokio::test]
async fn downgrade_lines_are_capped_in_all() {
    // The summary line names no method nor client: it is counted in a log of this test's
    // own (the shared one has every other test's summaries).
    let log = ScopedLog::start();
    let backend = start_backend().await;
    let cfg = "downgrade_log_interval = \"2s\"\ndowngrade_log_max_lines = 5\n";
    let (gw, edge) = start_gateway_toml(cfg, &format!("http://{}", backend.addr)).await;
    let http = Http::h1();
    let sent = 20;
    for i in 0..sent {
        let client = format!("observability-flood-{i}");
        let a = http
            .post(
                gw.addr,
                ECHO,
                "application/json",
                &[("x-client-id", client.as_str())],
                r#"{"id":"1"}"#,
            )
            .await;
        assert_eq!(a.status, 200);
    }
    // Every occurrence is either a line or counted in a summary (several windows, if the
    // requests took longer than one on a slow machine), and most were held back.
    let (written, held) = eventually("the summary of the held-back lines", PATIENCE, || {
        let written = log.lines("client_id=\"observability-flood-").len();
        let held: usize = log
            .lines("downgrade lines suppressed")
            .iter()
            .filter_map(|l| {
                let n = without_quoted(l);
                let digits: String = n
                    .split_once("suppressed=")?
                    .1
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<usize>().ok()
            })
            .sum();
        (written + held == sent).then_some((written, held))
    })
    .await;
    assert!(
        held > 0 && written < sent,
        "{written} written, {held} held back"
    );
    let counted = protogate_tests::metric(
        &edge.metrics().render(),
        r#"protogate_downgrades_total{method="protogate.test.svc.TestService/Echo",reason="json_requested"}"#,
    );
    assert_eq!(counted, sent as f64);
}

/// The log of one test: every event of the test's thread — a `#[tokio::test]` runtime's
/// thread, where its gateway's connections and the downgrade log's flush run — captured
/// apart from the process's shared log until it is dropped.
struct ScopedLog {
    text: Arc<Mutex<Vec<u8>>>,
    _default: tracing::subscriber::DefaultGuard,
}

impl ScopedLog {
    fn start() -> ScopedLog {
        let text = Arc::new(Mutex::new(Vec::new()));
        let sink = text.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        ScopedLog {
            text,
            _default: tracing::subscriber::set_default(subscriber),
        }
    }

    /// The lines so far that contain `needle`.
    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.text.lock().unwrap_or_else(PoisonError::into_inner))
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
