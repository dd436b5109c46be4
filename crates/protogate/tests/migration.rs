//! Migration insight through the real binary: the format mix per client after a scripted mix
//! of clients, the report's bound under 100,000 client ids (the gateway's RSS measured), the
//! JSON sunset policy's headers, brownouts, refusals and exempt clients with dates relative
//! to now, `protogate report` against the running gateway, and the page in a real headless
//! browser (Debian's chromium), with JavaScript off.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;

mod support;
use support::*;

const GET_ORDER: &str = "/demo.shop.v1.Shop/GetOrder";

/// A raw HTTP/1.1 exchange on a kept-alive connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// An answer: status, headers (lowercase names), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, DEADLINE).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        let mut head = format!("{method} {path} HTTP/1.1\r\nhost: x\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        self.stream.write_all(head.as_bytes()).unwrap();
        self.stream.write_all(body).unwrap();
        self.read_answer()
    }

    fn read_answer(&mut self) -> Answer {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            self.fill();
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next().unwrap()[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        self.buf.drain(..end + 4);
        while self.buf.len() < len {
            self.fill();
        }
        let body = self.buf.drain(..len).collect();
        Answer {
            status,
            headers,
            body,
        }
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 16384];
        let n = self.stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the gateway closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }
}

/// The gateway in front of the demo shop with `config` (TOML) and `--log-format json`.
fn gateway(shop: &Shop, scratch: &Scratch, config: &str) -> Proc {
    // No drain at the end: the tests stop the gateway with nothing in flight.
    let config = scratch.file("protogate.toml", &format!("drain_delay = \"0s\"\n{config}"));
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--config", &config];
    let extra = shop_args(shop);
    args.extend(strs(&extra));
    Proc::spawn(&args)
}

fn report(addr: SocketAddr, query: &str) -> Value {
    let mut c = Conn::open(addr);
    let a = c.send("GET", &format!("/admin/migration.json{query}"), &[], b"");
    assert_eq!(a.status, 200);
    a.json()
}

fn method<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

fn client<'a>(method: &'a Value, name: &str) -> &'a Value {
    method["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no client {name} in {method}"))
}

/// GetOrderRequest{id: 1} in each format.
const JSON_BODY: &[u8] = br#"{"id": "1"}"#;
const MSGPACK_BODY: &[u8] = b"\x81\xa2id\x01";
const PROTOBUF_BODY: &[u8] = b"\x08\x01";
/// A valid CreateOrderRequest in JSON: two cups at 12.50 EUR.
const CREATE_ORDER_BODY: &[u8] = br#"{"customerId": "42", "items": [{"productId": "7", "name": "espresso cup", "quantity": 2, "unitPrice": {"currencyCode": "EUR", "units": "12", "nanos": 500000000}}]}"#;

/// Three clients, each in its own mix of the three formats.
fn scripted_mix(addr: SocketAddr) {
    let mut c = Conn::open(addr);
    let plan: [(&str, &str, usize, usize, usize); 3] = [
        // (client, user agent, json, msgpack, protobuf)
        ("web-checkout", "Mozilla/5.0 (X11)", 5, 0, 0),
        ("ios-app", "ShopApp/3.1 CFNetwork/1.0", 2, 3, 0),
        ("billing", "okhttp/4.12.0", 1, 1, 4),
    ];
    for (id, agent, json, msgpack, protobuf) in plan {
        for (n, ct, body) in [
            (json, "application/json", JSON_BODY),
            (msgpack, "application/msgpack", MSGPACK_BODY),
            (protobuf, "application/x-protobuf", PROTOBUF_BODY),
        ] {
            for _ in 0..n {
                let a = c.send(
                    "POST",
                    GET_ORDER,
                    &[
                        ("content-type", ct),
                        ("x-client-id", id),
                        ("user-agent", agent),
                    ],
                    body,
                );
                assert_eq!(a.status, 200);
            }
        }
    }
    // No id: named by its User-Agent's product token.
    let a = c.send(
        "POST",
        GET_ORDER,
        &[
            ("content-type", "application/json"),
            ("user-agent", "curl/8.5.0"),
        ],
        JSON_BODY,
    );
    assert_eq!(a.status, 200);
}

#[test]
fn the_format_mix_per_client_after_a_scripted_mix() {
    let shop = shop();
    let scratch = Scratch::new("migration-mix");
    let mut gw = gateway(&shop, &scratch, "");
    let addr = gw.addr();
    scripted_mix(addr);
    let r = report(addr, "");
    assert_eq!(r["version"], 1);
    let m = method(&r, "demo.shop.v1.Shop.GetOrder");
    assert_eq!(m["requests"], 17, "{m}");
    assert_eq!(m["json_answers"], 9, "{m}");
    assert_eq!(m["format_mix"]["json"]["json"], 9, "{m}");
    assert_eq!(m["format_mix"]["msgpack"]["msgpack"], 4, "{m}");
    assert_eq!(m["format_mix"]["protobuf"]["protobuf"], 4, "{m}");
    let web = client(m, "web-checkout");
    assert_eq!(web["requests"], 5);
    assert_eq!(web["json_answers"], 5);
    assert_eq!(web["downgrades"]["json_requested"], 5);
    let ios = client(m, "ios-app");
    assert_eq!(ios["format_mix"]["json"]["json"], 2, "{ios}");
    assert_eq!(ios["format_mix"]["msgpack"]["msgpack"], 3, "{ios}");
    assert_eq!(ios["versions"][0]["version"], "ShopApp/3.1", "{ios}");
    let billing = client(m, "billing");
    assert_eq!(
        billing["format_mix"]["protobuf"]["protobuf"], 4,
        "{billing}"
    );
    assert_eq!(billing["json_answers"], 1, "{billing}");
    let curl = client(m, "curl");
    assert_eq!(curl["versions"][0]["version"], "8.5.0", "{curl}");
    // The demo's v2 shop sends Order fields 7 and 8, which the v1 schema lacks: JSON and
    // msgpack clients do not receive them.
    let fields: Vec<u64> = m["unknown_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["number"].as_u64().unwrap())
        .collect();
    assert!(fields.contains(&7) && fields.contains(&8), "{m}");
    // What JSON costs, measured: bytes against protobuf's, and time.
    let cost = &m["cost"]["answers"];
    assert_eq!(cost["json"]["count"], 9, "{cost}");
    assert_eq!(cost["protobuf"]["count"], 4, "{cost}");
    assert!(
        cost["json"]["bytes_ratio"].as_f64().unwrap() > 1.0,
        "{cost}"
    );
    assert!(
        m["cost"]["summary"]
            .as_str()
            .unwrap()
            .contains("JSON answers on this method are"),
        "{m}"
    );
    // The JSON share of the last 24 h: this minute has them all.
    let series = &m["json_share_24h"];
    let requests: u64 = series["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(requests, 17);
    // `protogate report` against the running gateway: the same figures in a terminal.
    let admin = format!("http://{addr}");
    let out = run(&["report", "--admin-url", &admin], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "demo.shop.v1.Shop.GetOrder: 17 requests, 53 % JSON",
        "web-checkout",
        "ios-app",
        "#7",
        "JSON answers on this method are",
    ] {
        assert!(table.contains(needle), "no {needle:?} in\n{table}");
    }
    let out = run(&["report", "--admin-url", &admin, "--format", "json"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(method(&doc, "demo.shop.v1.Shop.GetOrder")["requests"], 17);
    // A method filter.
    let filtered = report(addr, "?method=demo.shop.v1.Shop.List%2A");
    assert!(
        filtered["methods"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["method"]
                .as_str()
                .unwrap()
                .starts_with("demo.shop.v1.Shop.List")),
        "{filtered}"
    );
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// The gateway's resident memory, from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 100,000 distinct client ids cannot grow the report: at most `max_clients` rows, the rest
/// in the `other` row, totals exact, and the gateway's RSS grows by less than 24 MiB (the
/// table holds ~1,000 rows of a few hundred bytes; the rest is the allocator's slack).
#[test]
fn a_hundred_thousand_client_ids_stay_bounded() {
    const IDS: usize = 100_000;
    const THREADS: usize = 4;
    let shop = shop();
    let scratch = Scratch::new("migration-bound");
    let mut gw = gateway(&shop, &scratch, "[migration]\nmax_clients = 1000\n");
    let addr = gw.addr();
    let pid = gw.child.id();
    // Warm up (connections, buffers, the method's state) before the first measure.
    let send = |from: usize, to: usize| {
        let mut c = Conn::open(addr);
        for i in from..to {
            let id = format!("random-client-{i}");
            let a = c.send(
                "POST",
                GET_ORDER,
                &[("content-type", "application/json"), ("x-client-id", &id)],
                JSON_BODY,
            );
            assert_eq!(a.status, 200);
        }
    };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || send(t * 500, (t + 1) * 500));
        }
    });
    let before = rss_kib(pid);
    std::thread::scope(|s| {
        let per = (IDS - 2000) / THREADS;
        for t in 0..THREADS {
            s.spawn(move || send(2000 + t * per, 2000 + (t + 1) * per));
        }
    });
    let after = rss_kib(pid);
    let r = report(addr, "");
    assert!(
        r["tracked_clients"].as_u64().unwrap() <= 1000,
        "{}",
        r["tracked_clients"]
    );
    let m = method(&r, "demo.shop.v1.Shop.GetOrder");
    let rows = m["clients"].as_array().unwrap();
    assert!(rows.len() <= 1000, "{} rows", rows.len());
    let in_rows: u64 = rows.iter().map(|c| c["requests"].as_u64().unwrap()).sum();
    let other = m["other"]["requests"].as_u64().unwrap();
    assert_eq!(m["requests"], IDS as u64);
    assert_eq!(in_rows + other, IDS as u64);
    assert!(other >= (IDS - 1000) as u64, "other {other}");
    assert!(
        after.saturating_sub(before) < 24 * 1024,
        "RSS {before} KiB → {after} KiB over {IDS} client ids"
    );
    eprintln!("RSS {before} KiB → {after} KiB over {IDS} distinct client ids");
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// A `[[json_sunset]]` rule with dates relative to now.
fn rule(selector: &str, deprecation: i64, sunset: i64, extra: &str) -> String {
    let at = |offset: i64| {
        let t = if offset >= 0 {
            SystemTime::now() + Duration::from_secs(offset as u64)
        } else {
            SystemTime::now() - Duration::from_secs((-offset) as u64)
        };
        edge::migration::rfc3339(t)
    };
    format!(
        "[[json_sunset]]\nselector = \"{selector}\"\ndeprecation = \"{}\"\nsunset = \"{}\"\nlink = \"https://wiki.example/protobuf\"\n{extra}\n",
        at(deprecation),
        at(sunset)
    )
}

#[test]
fn the_json_sunset_policy_before_during_and_after() {
    const DAY: i64 = 86_400;
    let shop = shop();
    let scratch = Scratch::new("migration-sunset");
    let brownout_start = edge::migration::rfc3339(SystemTime::now() - Duration::from_secs(60));
    let config = [
        // Not yet deprecated.
        rule("demo.shop.v1.Shop.CreateOrder", DAY, 2 * DAY, ""),
        // Deprecated, sunset tomorrow.
        rule("demo.shop.v1.Shop.GetOrder", -DAY, DAY, ""),
        // Past its sunset, one client exempt (by the name it gives itself: no [auth] here).
        rule(
            "demo.shop.v1.Shop.ListOrders",
            -2 * DAY,
            -DAY,
            "exempt_clients = [\"legacy-billing\"]\nexempt_unverified = true",
        ),
        // Deprecated, in a brownout now (an hour from a minute ago).
        rule(
            "demo.shop.v1.Shop.*",
            -DAY,
            DAY,
            &format!("brownouts = [\"{brownout_start}/PT1H\"]"),
        ),
    ]
    .concat();
    let mut gw = gateway(&shop, &scratch, &config);
    let addr = gw.addr();
    // A refusal comes before the body is read, so its connection closes: one each.
    let json = |path: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend_from_slice(extra);
        let body: &[u8] = if path == GET_ORDER { JSON_BODY } else { b"{}" };
        Conn::open(addr).send("POST", path, &headers, body)
    };

    // Before the deprecation: nothing changes. The method's own rule wins over the glob's
    // brownout (which would refuse it with a 415), and the answer is what the shop gives
    // without any rule: the order created, 200, without the policy's headers.
    let a = Conn::open(addr).send(
        "POST",
        "/demo.shop.v1.Shop/CreateOrder",
        &[("content-type", "application/json")],
        CREATE_ORDER_BODY,
    );
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    for name in ["deprecation", "sunset", "link"] {
        assert_eq!(a.header(name), None, "{name}");
    }
    let order = a.json();
    assert_eq!(order["customerId"], "42", "{order}");
    assert_eq!(order["items"][0]["name"], "espresso cup", "{order}");
    assert_eq!(order["total"]["units"], "25", "{order}");

    // Deprecated: served, with Deprecation (RFC 9745), Sunset (RFC 8594) and Link.
    let a = json(GET_ORDER, &[]);
    assert_eq!(a.status, 200);
    let deprecation = a.header("deprecation").expect("Deprecation");
    assert!(deprecation.starts_with('@'), "{deprecation}");
    let sunset = a.header("sunset").expect("Sunset");
    assert!(sunset.ends_with(" GMT"), "{sunset}");
    let link = a.header("link").expect("Link");
    assert!(
        link.contains("<https://wiki.example/protobuf>; rel=\"deprecation\""),
        "{link}"
    );
    // Protobuf on the same method: no headers, no downgrade.
    let p = Conn::open(addr).send(
        "POST",
        GET_ORDER,
        &[("content-type", "application/x-protobuf")],
        PROTOBUF_BODY,
    );
    assert_eq!(p.status, 200);
    assert_eq!(p.header("deprecation"), None);

    // After the sunset: a JSON body is 415, a JSON answer to a protobuf body 406; the
    // refusal is a google.rpc.Status in JSON naming the date and the link.
    let a = json("/demo.shop.v1.Shop/ListOrders", &[]);
    assert_eq!(a.status, 415);
    assert_eq!(a.header("content-type"), Some("application/json"));
    let message = a.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("https://wiki.example/protobuf"),
        "{message}"
    );
    assert!(message.contains("ListOrders"), "{message}");
    let a = Conn::open(addr).send(
        "POST",
        "/demo.shop.v1.Shop/ListOrders",
        &[
            ("content-type", "application/x-protobuf"),
            ("accept", "application/json"),
        ],
        b"",
    );
    assert_eq!(a.status, 406);
    assert_eq!(a.header("content-type"), Some("application/json"));
    // Protobuf both ways is served.
    let a = Conn::open(addr).send(
        "POST",
        "/demo.shop.v1.Shop/ListOrders",
        &[("content-type", "application/x-protobuf")],
        b"",
    );
    assert_eq!(a.status, 200);
    // The exempt client is served, with the headers.
    let a = json(
        "/demo.shop.v1.Shop/ListOrders",
        &[("x-client-id", "legacy-billing")],
    );
    assert_eq!(a.status, 200);
    assert!(a.header("sunset").is_some());

    // In a brownout: refused, as after a sunset.
    let a = json("/demo.shop.v1.Shop/WatchOrders", &[]);
    assert_eq!(a.status, 415, "{}", String::from_utf8_lossy(&a.body));
    assert!(
        a.json()["message"].as_str().unwrap().contains("brownout"),
        "{}",
        a.json()
    );

    // Counted: downgrades, refusals by reason, and the report's sunset state.
    let metrics = String::from_utf8_lossy(&Conn::open(addr).send("GET", "/metrics", &[], b"").body)
        .into_owned();
    let line = |needle: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{metrics}"))
            .to_owned()
    };
    assert!(
        line(r#"protogate_downgrades_total{method="demo.shop.v1.Shop/GetOrder",reason="json_deprecated"}"#)
            .ends_with(" 1")
    );
    assert!(
        line(
            r#"protogate_json_refused_total{method="demo.shop.v1.Shop/ListOrders",reason="sunset"}"#
        )
        .ends_with(" 2")
    );
    assert!(
        line(r#"protogate_json_refused_total{method="demo.shop.v1.Shop/WatchOrders",reason="brownout"}"#)
            .ends_with(" 1")
    );
    let r = report(addr, "");
    let list = method(&r, "demo.shop.v1.Shop.ListOrders");
    assert_eq!(list["sunset"]["phase"], "sunset", "{list}");
    assert_eq!(list["json_refused"]["sunset"], 2, "{list}");
    assert_eq!(list["exempt"], 1, "{list}");
    assert_eq!(
        method(&r, "demo.shop.v1.Shop.GetOrder")["sunset"]["phase"],
        "deprecated"
    );
    assert_eq!(
        method(&r, "demo.shop.v1.Shop.WatchOrders")["sunset"]["phase"],
        "brownout"
    );
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// The page in a real browser: Debian's chromium, headless, JavaScript off, renders the
/// method sections, the client names and the SVG chart; a screenshot is left under target/
/// for people to look at. Skipped with one `SKIPPED:` line that shows under plain `cargo
/// test` when chromium is missing, unless `PROTOGATE_REQUIRE_ORACLES` (make test, CI) makes
/// that a failure: the oracle tests' rule.
#[test]
fn the_migration_page_renders_in_a_headless_browser() {
    let Some(chromium) = browser() else {
        oracle_missing(NO_BROWSER);
        return;
    };
    let shop = shop();
    let scratch = Scratch::new("migration-page");
    let config = rule("demo.shop.v1.Shop.GetOrder", -86_400, 86_400, "");
    let mut gw = gateway(&shop, &scratch, &config);
    let addr = gw.addr();
    scripted_mix(addr);
    // A client id that would be markup if it were not escaped.
    let mut c = Conn::open(addr);
    let a = c.send(
        "POST",
        GET_ORDER,
        &[
            ("content-type", "application/json"),
            ("x-client-id", "<script>alert(1)</script>"),
        ],
        JSON_BODY,
    );
    assert_eq!(a.status, 200);
    let url = format!("http://{addr}/admin/migration");
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&target).unwrap();
    let screenshot = target.join("migration-page.png");
    let _ = std::fs::remove_file(&screenshot);
    let browse = |extra: &[&str]| {
        let profile = scratch.0.join(format!("profile-{}", extra.len()));
        headless(chromium, &profile, extra, &url)
    };
    // JavaScript off: the page has no script and is served with a Content-Security-Policy
    // that lets none run (chromium's own switch for it, blink-settings=scriptEnabled=false,
    // also stops --dump-dom and --screenshot from producing anything).
    let head = Conn::open(addr).send("GET", "/admin/migration", &[], b"");
    let csp = head.header("content-security-policy").expect("a CSP");
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("script-src"),
        "{csp}"
    );
    let dom = browse(&["--dump-dom"]);
    assert!(!dom.contains("<script"), "a script in the page");
    assert!(
        dom.contains("data-method=\"demo.shop.v1.Shop.GetOrder\""),
        "{dom}"
    );
    for name in ["web-checkout", "ios-app", "billing"] {
        assert!(dom.contains(name), "no {name} in the DOM");
    }
    assert!(dom.contains("json-share-chart"), "no chart in the DOM");
    assert!(dom.contains("<svg"), "no SVG in the DOM");
    assert!(
        dom.contains("data-phase=\"deprecated\""),
        "no sunset state in the DOM"
    );
    assert!(
        !dom.contains("<script>alert(1)"),
        "a client id rendered as markup"
    );
    assert!(
        dom.contains("&lt;script&gt;alert(1)"),
        "the client id is not shown escaped"
    );
    let window = "--window-size=1280,2000".to_owned();
    let shot = format!("--screenshot={}", screenshot.display());
    browse(&[&window, &shot]);
    let png = std::fs::read(&screenshot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    eprintln!("the migration page's screenshot: {}", screenshot.display());
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

const PAGE_TEST: &str = "the_migration_page_renders_in_a_headless_browser";
const NO_BROWSER: &str = "the_migration_page_renders_in_a_headless_browser: no chromium \
    (chromium, chromium-browser or google-chrome on PATH) — `apt install chromium` to set it up";

/// The skip decision end to end: the page test of this very binary run again with a `PATH`
/// where no browser is found passes with exactly one visible `SKIPPED:` line under the
/// harness's capture, and fails saying why when `PROTOGATE_REQUIRE_ORACLES=1`.
#[test]
fn a_missing_browser_skips_loudly_or_fails_when_required() {
    let run = |required: bool| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([PAGE_TEST, "--exact"])
            .env("PATH", "/nonexistent")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if required {
            cmd.env("PROTOGATE_REQUIRE_ORACLES", "1");
        } else {
            cmd.env_remove("PROTOGATE_REQUIRE_ORACLES");
        }
        let mut child = cmd.spawn().unwrap();
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        };
        let stdout = read(Box::new(child.stdout.take().unwrap()));
        let stderr = read(Box::new(child.stderr.take().unwrap()));
        let status = eventually("the page test to finish", || child.try_wait().unwrap());
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the page test did not finish within {DEADLINE:?}");
        };
        let text = stdout.join().unwrap() + &stderr.join().unwrap();
        (status.success(), text)
    };
    let (passed, text) = run(false);
    assert!(passed, "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert_eq!(text.matches("SKIPPED:").count(), 1, "{text}");
    assert!(text.contains(&format!("SKIPPED: {NO_BROWSER}")), "{text}");
    let (passed, text) = run(true);
    assert!(
        !passed,
        "a missing browser passed with PROTOGATE_REQUIRE_ORACLES=1:\n{text}"
    );
    assert!(
        text.contains(NO_BROWSER) && !text.contains("SKIPPED"),
        "{text}"
    );
}
