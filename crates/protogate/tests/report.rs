//! `protogate report` through the real binary, against a tiny HTTP server in the test that
//! answers with a document the real `edge::migration` code built (a `Tracker` after a scripted
//! mix of three clients × three formats on two methods, unknown-field drops, conversion costs,
//! a sunset policy): the table, `--format json`, `--method` (sent to the server, and applied
//! again for a server that ignores it), and each failure's one line and exit code.
//!
//! The server binds port 0, every wait has a deadline (`support::run`), and the server's
//! thread is stopped and joined when its guard drops.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use edge::migration::{
    ClientId, Conversion, Finished, SunsetPolicy, SunsetRule, Tracker, parse_brownout, parse_time,
    render_json,
};
use serde_json::Value;
use transcode::{Format, UnknownField};

mod support;
use support::{DEADLINE, run, stderr};

fn t(s: &str) -> SystemTime {
    parse_time(s).unwrap()
}

const NOW: &str = "2027-03-01T20:00:00Z";
const GET: &str = "demo.shop.v1.Shop/GetOrder";
const LIST: &str = "demo.shop.v1.Shop/ListOrders";

/// The scripted gateway: requests per (method, client, format); the answer in the format sent.
///
/// GetOrder: android 6 JSON, 2 msgpack, 2 protobuf; ios 1, 1, 8; web 4, 0, 0 (24 requests,
/// 11 JSON). ListOrders: android 1, 0, 9; ios 0, 2, 8; web 0, 0, 5 (25 requests, 1 JSON).
/// android's JSON answers on GetOrder drop field 7 of `items[0]`, its msgpack answers field 9
/// of the root; every JSON answer is 3.2× the protobuf bytes and took 25 µs.
fn scripted() -> (Tracker, SunsetPolicy) {
    let tracker = Tracker::new(100);
    let get: Arc<str> = Arc::from(GET);
    let list: Arc<str> = Arc::from(LIST);
    let clients = [("android", "4.12.0"), ("ios", "2.1"), ("web", "5.0")];
    let mix: [(&Arc<str>, [[u32; 3]; 3]); 2] = [
        (&get, [[6, 2, 2], [1, 1, 8], [4, 0, 0]]),
        (&list, [[1, 0, 9], [0, 2, 8], [0, 0, 5]]),
    ];
    let items = [UnknownField {
        path: "items[0]".into(),
        number: 7,
    }];
    let root = [UnknownField {
        path: String::new(),
        number: 9,
    }];
    let start = t("2027-03-01T18:00:00Z");
    let mut minute = 0;
    for (method, counts) in mix {
        for ((name, version), per_format) in clients.iter().zip(counts) {
            let id = ClientId::new(name, Some(version));
            for (format, n) in [Format::Json, Format::Msgpack, Format::Protobuf]
                .into_iter()
                .zip(per_format)
            {
                for _ in 0..n {
                    let mut f = Finished::new(format, format);
                    // ios moved its protobuf calls to a generated gRPC client.
                    if format == Format::Protobuf && *name == "ios" {
                        f.protocol = edge::protocol::Protocol::Grpc;
                    }
                    if format == Format::Json {
                        f.answer_conversion = Some(Conversion {
                            format,
                            protobuf_bytes: 100,
                            format_bytes: 320,
                            elapsed: Duration::from_micros(25),
                        });
                    }
                    if Arc::ptr_eq(method, &get) && *name == "android" {
                        match format {
                            Format::Json => f.dropped = &items,
                            Format::Msgpack => f.dropped = &root,
                            Format::Protobuf => {}
                        }
                    }
                    minute += 1;
                    tracker.record(method, &id, &f, start + Duration::from_secs(minute * 60));
                }
            }
        }
    }
    let policy = SunsetPolicy::new(vec![
        SunsetRule {
            selector: "demo.shop.v1.Shop.GetOrder".into(),
            deprecation: Some(t("2027-01-01T00:00:00Z")),
            sunset: Some(t("2027-06-30T00:00:00Z")),
            link: Some("https://wiki.example/protobuf-migration".into()),
            brownouts: vec![parse_brownout("2027-05-01T10:00:00Z/PT1H").unwrap()],
            exempt_clients: vec!["legacy-billing".into()],
            exempt_unverified: false,
        },
        SunsetRule {
            selector: "demo.shop.v1.Shop.ListOrders".into(),
            deprecation: Some(t("2027-04-01T00:00:00Z")),
            ..SunsetRule::default()
        },
    ])
    .unwrap();
    (tracker, policy)
}

/// The document for `glob` (all methods without one), as `/admin/migration.json` renders it.
fn document(glob: Option<&str>) -> String {
    let (tracker, policy) = scripted();
    render_json(&tracker.report(&policy, glob, t(NOW)))
}

/// What the test server answers: status, content type and body; `None` keeps the connection
/// open without an answer.
type Answer = Option<(u16, &'static str, Vec<u8>)>;

/// A one-request-per-connection HTTP/1.1 server on port 0 in a thread; every request target
/// it was sent is kept. Stopped and joined when dropped.
struct Server {
    addr: SocketAddr,
    targets: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(handler: impl Fn(&str) -> Answer + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let targets = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopping) = (targets.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // Connections left unanswered, closed when the server stops.
            let mut held = Vec::new();
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                conn.set_read_timeout(Some(DEADLINE)).unwrap();
                conn.set_write_timeout(Some(DEADLINE)).unwrap();
                let Some(target) = read_head(&mut conn) else {
                    continue;
                };
                seen.lock().unwrap().push(target.clone());
                match handler(&target) {
                    None => held.push(conn),
                    Some((status, content_type, body)) => {
                        let reason = match status {
                            200 => "OK",
                            404 => "Not Found",
                            500 => "Internal Server Error",
                            _ => "Other",
                        };
                        let head = format!(
                            "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = conn.write_all(head.as_bytes());
                        let _ = conn.write_all(&body);
                    }
                }
            }
        });
        Server {
            addr,
            targets,
            stop,
            thread: Some(thread),
        }
    }

    /// Answers every request with `body` as JSON.
    fn json(body: String) -> Server {
        Server::start(move |_| Some((200, "application/json", body.clone().into_bytes())))
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn targets(&self) -> Vec<String> {
        self.targets.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, DEADLINE);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The request line's target, once the whole head has arrived.
fn read_head(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(head).ok()?;
    let line = text.lines().next()?;
    let mut parts = line.split(' ');
    (parts.next()? == "GET").then_some(())?;
    Some(parts.next()?.to_string())
}

/// A query parameter's value, percent-decoded.
fn query_param(target: &str, name: &str) -> Option<String> {
    let query = target.split_once('?')?.1;
    let value = query
        .split('&')
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))?;
    let bytes = value.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn report(args: &[&str]) -> Output {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    run(&all, b"")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Succeeded, no stderr; the stdout.
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        stderr(out)
    );
    assert_eq!(stderr(out), "");
    stdout(out)
}

/// Exit 1, nothing on stdout, one line on stderr: that line.
fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(out),
        stderr(out)
    );
    assert_eq!(stdout(out), "");
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("protogate: "), "{err}");
    err
}

/// The line that contains `needle`.
fn line<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// The cells of a table line (columns are two or more spaces apart).
fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn the_table_shows_methods_clients_shares_costs_and_the_sunset_state() {
    let server = Server::json(document(None));
    let out = ok(&report(&["--admin-url", &server.url()]));
    println!("{out}");
    assert_eq!(server.targets(), ["/admin/migration.json"]);

    assert!(out.starts_with(&format!(
        "Migration report from {}/admin/migration.json, generated 2027-03-01 20:00:00Z; 6 of 100 client rows in use\n",
        server.url()
    )));
    for l in out.lines() {
        assert_eq!(l, l.trim_end(), "a trailing space: {l:?}");
    }
    // The overview, JSON-heavy first.
    assert_eq!(
        cells(line(&out, "method  ")),
        ["method", "requests", "JSON", "share", "sunset"]
    );
    let get = out.find("demo.shop.v1.Shop.GetOrder: ").unwrap();
    let list = out.find("demo.shop.v1.Shop.ListOrders: ").unwrap();
    assert!(get < list);
    let (get_part, list_part) = (&out[get..list], &out[list..]);
    assert_eq!(
        line(get_part, "  Protocols:"),
        "  Protocols: grpc 8, http 16"
    );
    assert_eq!(
        cells(line(&out, "demo.shop.v1.Shop.GetOrder  ")),
        [
            "demo.shop.v1.Shop.GetOrder",
            "24",
            "11",
            "46 %",
            "deprecated"
        ]
    );
    assert_eq!(
        cells(line(&out, "demo.shop.v1.Shop.ListOrders  ")),
        [
            "demo.shop.v1.Shop.ListOrders",
            "25",
            "1",
            "4.0 %",
            "scheduled"
        ]
    );

    // GetOrder: header, mix, clients (by JSON answers), drops, cost, sunset.
    assert_eq!(
        line(get_part, "GetOrder: "),
        "demo.shop.v1.Shop.GetOrder: 24 requests, 46 % JSON (46 % over the last 24 h)"
    );
    assert!(line(get_part, "JSON share by hour").ends_with("·▄· (now at the right)"));
    assert_eq!(
        cells(line(get_part, "    JSON  ")),
        ["JSON", "11", "0", "0", "11"]
    );
    assert_eq!(
        cells(line(get_part, "    MessagePack  ")),
        ["MessagePack", "0", "3", "0", "3"]
    );
    assert_eq!(
        cells(line(get_part, "    all  ")),
        ["all", "11", "3", "10", "24"]
    );
    assert!(get_part.contains("  Top JSON clients (3 of 3 tracked clients got JSON):\n"));
    let android = get_part.find("    android  ").unwrap();
    let web = get_part.find("    web  ").unwrap();
    let ios = get_part.find("    ios  ").unwrap();
    assert!(android < web && web < ios, "by JSON answers");
    assert_eq!(
        cells(line(get_part, "    android  ")),
        [
            "android",
            "4.12.0",
            "10",
            "6",
            "60 %",
            "2027-03-01 18:10:00Z (1 h ago)"
        ]
    );
    assert_eq!(
        cells(line(get_part, "    web  ")),
        [
            "web",
            "5.0",
            "4",
            "4",
            "100 %",
            "2027-03-01 18:24:00Z (1 h ago)"
        ]
    );
    assert_eq!(
        cells(line(get_part, "    ios  "))[..5],
        ["ios", "2.1", "10", "1", "10 %"]
    );
    assert_eq!(cells(line(get_part, "(other)")), ["(other)", "0", "0", "–"]);
    assert_eq!(
        cells(line(get_part, "    #7  ")),
        [
            "#7",
            "items[]",
            "6",
            "android (6)",
            "2027-03-01 18:06:00Z (1 h ago)"
        ]
    );
    assert_eq!(
        cells(line(get_part, "    #9  "))[..4],
        ["#9", "(root)", "2", "android (2)"]
    );
    assert!(get_part.contains(
        "  Cost: JSON answers on this method are 3.2× the protobuf bytes and cost 25 µs of gateway CPU each.\n"
    ));
    assert!(get_part.contains(
        "  Sunset: deprecated since 2027-01-01 00:00:00Z (59 days ago): JSON answers carry \
         Deprecation, Sunset and Link; JSON ends on 2027-06-30 00:00:00Z (in 120 days).\n"
    ));
    assert_eq!(
        cells(line(get_part, "    rule  ")),
        ["rule", "demo.shop.v1.Shop.GetOrder"]
    );
    assert_eq!(
        cells(line(get_part, "    next brownout  ")),
        [
            "next brownout",
            "2027-05-01 10:00:00Z (in 60 days) to 2027-05-01 11:00:00Z"
        ]
    );
    assert_eq!(
        cells(line(get_part, "    link  ")),
        ["link", "https://wiki.example/protobuf-migration"]
    );
    assert_eq!(
        cells(line(get_part, "    exempt  ")),
        ["exempt", "legacy-billing"]
    );

    // ListOrders: one JSON client, two without JSON, nothing dropped, scheduled.
    assert_eq!(
        line(list_part, "ListOrders: "),
        "demo.shop.v1.Shop.ListOrders: 25 requests, 4.0 % JSON (4.0 % over the last 24 h)"
    );
    assert!(list_part.contains("  Top JSON clients (1 of 3 tracked clients got JSON):\n"));
    assert_eq!(
        cells(line(list_part, "    android  "))[..5],
        ["android", "4.12.0", "10", "1", "10 %"]
    );
    assert!(!list_part.contains("    ios  "));
    assert!(list_part.contains("    2 more tracked clients got no JSON.\n"));
    assert!(list_part.contains("  Fields clients do not receive: none"));
    assert!(list_part.contains(
        "  Sunset: scheduled: JSON is deprecated from 2027-04-01 00:00:00Z (in 30 days).\n"
    ));

    // Columns line up: every row of the mix table is as wide as its header's right edge.
    let mix: Vec<&str> = get_part
        .lines()
        .skip_while(|l| !l.starts_with("  Format mix"))
        .skip(1)
        .take(5)
        .collect();
    assert!(mix.iter().all(|l| l.len() == mix[0].len()), "{mix:#?}");
}

#[test]
fn json_is_the_document_as_received() {
    let doc = document(None);
    let server = Server::json(doc.clone());
    let out = ok(&report(&["--admin-url", &server.url(), "--format", "json"]));
    assert!(out.starts_with("{\n  \""), "pretty-printed: {out}");
    assert!(out.ends_with("}\n"));
    let got: Value = serde_json::from_str(&out).unwrap();
    let want: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(got, want);
}

#[test]
fn method_goes_to_the_server_and_is_applied_again() {
    // A gateway that honours ?method=.
    let server = Server::start(|target| {
        let glob = query_param(target, "method");
        Some((
            200,
            "application/json",
            document(glob.as_deref()).into_bytes(),
        ))
    });
    let glob = "demo.shop.v1.Shop.List*";
    let out = ok(&report(&["--admin-url", &server.url(), "--method", glob]));
    assert_eq!(
        server.targets(),
        ["/admin/migration.json?method=demo.shop.v1.Shop.List*"]
    );
    assert!(out.contains("demo.shop.v1.Shop.ListOrders: 25 requests"));
    assert!(!out.contains("GetOrder"), "{out}");

    // Characters a query cannot carry as they are arrive percent-encoded, and decoded.
    let odd = "demo.shop.v1.Shop/List*+ &x=y";
    let out = ok(&report(&["--admin-url", &server.url(), "--method", odd]));
    let targets = server.targets();
    assert_eq!(
        targets[1],
        "/admin/migration.json?method=demo.shop.v1.Shop%2FList*%2B%20%26x%3Dy"
    );
    assert_eq!(query_param(&targets[1], "method").as_deref(), Some(odd));
    assert!(out.contains("No method matching demo.shop.v1.Shop/List*+ &x=y has had a request."));

    // A gateway that ignores it: the same answer, in both formats.
    let older = Server::json(document(None));
    let table = ok(&report(&["--admin-url", &older.url(), "--method", glob]));
    assert!(table.contains("demo.shop.v1.Shop.ListOrders: 25 requests"));
    assert!(!table.contains("GetOrder"), "{table}");
    let json = ok(&report(&[
        "--admin-url",
        &older.url(),
        "--method",
        "demo.shop.v1.Shop/ListOrders",
        "--format",
        "json",
    ]));
    let got: Value = serde_json::from_str(&json).unwrap();
    let want: Value = serde_json::from_str(&document(Some("*.ListOrders"))).unwrap();
    assert_eq!(got, want);
}

#[test]
fn an_empty_report_says_so() {
    let tracker = Tracker::new(10);
    let doc = render_json(&tracker.report(&SunsetPolicy::default(), None, t(NOW)));
    let server = Server::json(doc);
    let out = ok(&report(&["--admin-url", &server.url()]));
    assert!(out.ends_with("\n\nNo requests yet.\n"), "{out}");
}

#[test]
fn the_other_row_counts_clients_without_a_row() {
    // Two rows for the whole gateway, five clients: the rest count under other.
    let tracker = Tracker::new(2);
    let method: Arc<str> = Arc::from(GET);
    let start = t("2027-03-01T19:00:00Z");
    for i in 0..50u64 {
        let name = format!("client-{}", i % 5);
        let f = Finished::new(Format::Json, Format::Json);
        tracker.record(
            &method,
            &ClientId::new(&name, None),
            &f,
            start + Duration::from_secs(i),
        );
    }
    let doc = render_json(&tracker.report(&SunsetPolicy::default(), None, t(NOW)));
    let other = serde_json::from_str::<Value>(&doc).unwrap()["methods"][0]["other"].clone();
    let requests = other["requests"].as_u64().unwrap();
    assert!(requests > 0, "{other}");
    let server = Server::json(doc);
    let out = ok(&report(&["--admin-url", &server.url()]));
    assert_eq!(
        cells(line(&out, "    (other)  ")),
        [
            "(other)",
            &requests.to_string(),
            &requests.to_string(),
            "100 %"
        ]
    );
    assert!(
        out.contains("    (other) counts the clients without a row"),
        "{out}"
    );
    assert!(out.contains("  Sunset: none (no json_sunset rule: JSON is served as always).\n"));
    assert!(
        out.contains("  Top JSON clients (2 of 2 tracked clients got JSON):\n"),
        "{out}"
    );
}

#[test]
fn failures_are_one_line_naming_the_url_and_exit_1() {
    // Nothing listens.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}");
    let err = failed(&report(&["--admin-url", &url]));
    assert!(
        err.contains(&format!(
            "{url}/admin/migration.json: cannot connect to {closed}"
        )),
        "{err}"
    );

    // Not found, with a google.rpc.Status body.
    let server = Server::start(|_| {
        Some((
            404,
            "application/json",
            br#"{"code":5,"message":"no route for GET /admin/migration.json"}"#.to_vec(),
        ))
    });
    let err = failed(&report(&["--admin-url", &server.url()]));
    assert_eq!(
        err,
        format!(
            "protogate: {}/admin/migration.json: answered 404 Not Found: no route for GET /admin/migration.json\n",
            server.url()
        )
    );

    // Not JSON.
    let server = Server::start(|_| Some((200, "text/html", b"<!doctype html><p>hi".to_vec())));
    let err = failed(&report(&["--admin-url", &server.url()]));
    assert!(
        err.contains(&format!(
            "{}/admin/migration.json: the answer is not JSON",
            server.url()
        )),
        "{err}"
    );
    assert!(err.contains("content-type text/html"), "{err}");

    // JSON, but not the document.
    for (body, want) in [
        (
            r#"{"hello": 1}"#,
            "not a migration report (no \"version\": 1)",
        ),
        (
            r#"{"version": 2, "methods": []}"#,
            "the migration report is version 2",
        ),
        (
            r#"{"version": 1}"#,
            "not a migration report (missing field `methods`)",
        ),
        (
            r#"{"version": 1, "methods": [{"method": "a.B.C"}]}"#,
            "not a migration report (missing field `requests`)",
        ),
    ] {
        let server = Server::json(body.to_string());
        for format in ["table", "json"] {
            let err = failed(&report(&["--admin-url", &server.url(), "--format", format]));
            assert!(
                err.contains(&format!("{}/admin/migration.json: {want}", server.url())),
                "{err}"
            );
        }
    }

    // No answer: --timeout bounds the whole request.
    let server = Server::start(|_| None);
    let err = failed(&report(&[
        "--admin-url",
        &server.url(),
        "--timeout",
        "300ms",
    ]));
    assert!(
        err.contains(&format!(
            "{}/admin/migration.json: no answer within 300ms",
            server.url()
        )),
        "{err}"
    );
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["--admin-url", "https://127.0.0.1:9090"][..],
        &["--admin-url", "127.0.0.1:9090"],
        &["--admin-url", "http://127.0.0.1:9090", "--format", "xml"],
        &["--admin-url", "http://127.0.0.1:9090", "--timeout", "0"],
        &[],
    ] {
        let out = report(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "");
    }
    let err = stderr(&report(&["--admin-url", "https://127.0.0.1:9090"]));
    assert!(err.contains("https is not supported"), "{err}");
}
