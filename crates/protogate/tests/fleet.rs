//! The fleet through the real binary: three gateways in front of the demo shop and one real
//! Prometheus server (Debian's `prometheus`) scraping them every second. A scripted mix of
//! clients spread over the three; `protogate report --admin-url` ×3 and `protogate report
//! --prometheus` give the same per-method and per-client totals and shares as the sum of the
//! replicas' own reports (exact counts); the fleet page (`[migration] fleet_prometheus`) in
//! headless chromium shows the merged numbers and links to the instance's own view. And the
//! `export_clients` bound under 10,000 client ids, the series counted in `/metrics`.
//!
//! Prometheus and chromium are oracles: without them the tests skip with a `SKIPPED:` line,
//! or fail under `PROTOGATE_REQUIRE_ORACLES` (make test, CI, which installs both).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use serde_json::Value;
use support::*;

const GET_ORDER: &str = "/demo.shop.v1.Shop/GetOrder";
const LIST_ORDERS: &str = "/demo.shop.v1.Shop/ListOrders";
const JSON_BODY: &[u8] = br#"{"id": "1"}"#;
const PROTOBUF_BODY: &[u8] = b"\x08\x01";

/// A real Prometheus server on `port`, its data in the scratch directory; killed when
/// dropped.
struct Prometheus {
    _proc: Child,
    url: String,
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Prometheus {
    fn start(scratch: &Scratch, port: u16, targets: &[SocketAddr]) -> Prometheus {
        let targets: Vec<String> = targets.iter().map(|a| format!("'{a}'")).collect();
        let config = scratch.file(
            "prometheus.yml",
            &format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: protogate\n    scrape_interval: 1s\n    \
                 scrape_timeout: 1s\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        );
        let data = scratch.0.join("prometheus-data");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={config}"))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus {
            _proc: Child(child),
            url: format!("http://127.0.0.1:{port}"),
        };
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        eventually("prometheus to be ready", || {
            std::net::TcpStream::connect(addr).ok()?;
            (exchange(addr, "GET", "/-/ready", &[], b"").0 == 200).then_some(())
        })
        .expect("prometheus is ready");
        prometheus
    }

    /// One instant query's samples: (labels, value).
    fn query(&self, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let addr: SocketAddr = self.url.trim_start_matches("http://").parse().unwrap();
        let path = format!("/api/v1/query?query={}", encode(promql));
        let (status, _, body) = exchange(addr, "GET", &path, &[], b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let doc: Value = serde_json::from_slice(&body).unwrap();
        doc["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect();
                (labels, s["value"][1].as_str().unwrap().parse().unwrap())
            })
            .collect()
    }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn prometheus_missing() -> bool {
    let found = Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        oracle_missing(
            "the fleet test: no `prometheus` on PATH — `apt install prometheus` to set it up",
        );
    }
    !found
}

/// A port nothing listens on now (bound and let go).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn gateway(shop: &Shop, scratch: &Scratch, name: &str, config: &str) -> Proc {
    let config = scratch.file(
        &format!("{name}.toml"),
        &format!("drain_delay = \"0s\"\n{config}"),
    );
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--config", &config];
    let extra = shop_args(shop);
    args.extend(strs(&extra));
    Proc::spawn_with(Command::new(BIN).args(&args).env("POD_NAME", name))
}

/// One line of the scripted mix: (gateway, client, path, content type, body, accept, n).
type Calls<'a> = (usize, &'a str, &'a str, &'a str, &'a [u8], &'a str, usize);

/// The scripted mix.
fn scripted_mix(gateways: &[SocketAddr]) {
    let json = "application/json";
    let proto = "application/x-protobuf";
    let plan: [Calls; 8] = [
        (0, "web", GET_ORDER, json, JSON_BODY, json, 4),
        (1, "web", GET_ORDER, json, JSON_BODY, json, 3),
        (2, "web", LIST_ORDERS, json, b"{}", json, 2),
        (0, "ios", GET_ORDER, proto, PROTOBUF_BODY, proto, 5),
        (1, "ios", GET_ORDER, proto, PROTOBUF_BODY, json, 1),
        (2, "billing", GET_ORDER, proto, PROTOBUF_BODY, proto, 6),
        (2, "billing", LIST_ORDERS, proto, b"", proto, 2),
        (1, "batch", LIST_ORDERS, json, b"{}", proto, 3),
    ];
    for (gw, client, path, ct, body, accept, n) in plan {
        for _ in 0..n {
            let (status, _, body) = exchange(
                gateways[gw],
                "POST",
                path,
                &[
                    ("content-type", ct),
                    ("accept", accept),
                    ("x-client-id", client),
                ],
                body,
            );
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        }
    }
}

fn document(addr: SocketAddr) -> Value {
    let (status, _, body) = exchange(addr, "GET", "/admin/migration.json", &[], b"");
    assert_eq!(status, 200);
    serde_json::from_slice(&body).unwrap()
}

/// method → (requests, JSON answers, client → requests), from a migration document.
type Totals = BTreeMap<String, (u64, u64, BTreeMap<String, u64>)>;

fn totals(doc: &Value) -> Totals {
    doc["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut clients: BTreeMap<String, u64> = m["clients"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_owned(),
                        c["requests"].as_u64().unwrap(),
                    )
                })
                .collect();
            let other = m["other"]["requests"].as_u64().unwrap();
            if other > 0 {
                clients.insert("other".into(), other);
            }
            (
                m["method"].as_str().unwrap().to_owned(),
                (
                    m["requests"].as_u64().unwrap(),
                    m["json_answers"].as_u64().unwrap(),
                    clients,
                ),
            )
        })
        .collect()
}

/// The sum of several documents' totals.
fn summed(docs: &[Value]) -> Totals {
    let mut out = Totals::new();
    for doc in docs {
        for (method, (requests, json, clients)) in totals(doc) {
            let entry = out.entry(method).or_default();
            entry.0 += requests;
            entry.1 += json;
            for (client, n) in clients {
                *entry.2.entry(client).or_default() += n;
            }
        }
    }
    out
}

fn report(args: &[&str]) -> String {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    let out = run(&all, b"");
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The overview table of `protogate report`'s text: its method rows.
fn overview(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("method "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn three_replicas_one_prometheus_one_picture() {
    if prometheus_missing() {
        return;
    }
    let shop = shop();
    let scratch = Scratch::new("fleet");
    let prometheus_port = free_port();
    let prometheus_url = format!("http://127.0.0.1:{prometheus_port}");
    let fleet = format!("[migration]\nfleet_prometheus = \"{prometheus_url}\"\n");
    let mut gws: Vec<Proc> = ["pod-a", "pod-b", "pod-c"]
        .iter()
        .map(|name| gateway(&shop, &scratch, name, &fleet))
        .collect();
    let addrs: Vec<SocketAddr> = gws.iter_mut().map(Proc::addr).collect();
    let prometheus = Prometheus::start(&scratch, prometheus_port, &addrs);
    scripted_mix(&addrs);

    // The replicas' own reports, summed: what every other view must say.
    let docs: Vec<Value> = addrs.iter().map(|&a| document(a)).collect();
    let expected = summed(&docs);
    let all: u64 = expected.values().map(|t| t.0).sum();
    assert_eq!(all, 26, "{expected:?}");
    assert_eq!(docs[0]["source"]["instance"], "pod-a");

    // Prometheus has scraped every replica since the last request.
    let scraped = eventually("Prometheus to hold every request", || {
        let v = prometheus.query("sum(protogate_client_requests_total)");
        (v.first().map(|s| s.1) == Some(all as f64)).then_some(())
    });
    assert!(
        scraped.is_some(),
        "Prometheus holds {:?}, the replicas {all}",
        prometheus.query("sum(protogate_client_requests_total)")
    );

    // report --admin-url ×3: merged.
    let admin: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let mut args: Vec<&str> = Vec::new();
    for url in &admin {
        args.extend(["--admin-url", url]);
    }
    let merged: Value =
        serde_json::from_str(&report(&[&args[..], &["--format", "json"]].concat())).unwrap();
    assert_eq!(totals(&merged), expected);
    assert_eq!(merged["source"]["replicas"].as_array().unwrap().len(), 3);

    // report --prometheus: the same totals, per method and per client.
    let from_prometheus: Value = serde_json::from_str(&report(&[
        "--prometheus",
        &prometheus_url,
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(totals(&from_prometheus), expected);
    assert_eq!(
        from_prometheus["source"]["prometheus"],
        prometheus_url.as_str()
    );

    // Over a window: Prometheus's increase(), extrapolated, so said to be about (a series'
    // first sample is its start, so the figures may well be below the exact ones).
    let ranged = report(&["--prometheus", &prometheus_url, "--range", "1h"]);
    assert!(
        ranged.starts_with(&format!(
            "Migration report from Prometheus {prometheus_url}, about the last 1h"
        )),
        "{ranged}"
    );
    let out = run(
        &[
            "report",
            "--prometheus",
            &prometheus_url,
            "--range",
            "1 hour",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "a range that is not PromQL's");
    assert!(stderr(&out).contains("PromQL duration"), "{}", stderr(&out));

    // The text reports: the same overview rows (method, requests, JSON, share, sunset).
    let text_merged = report(&args);
    let text_prometheus = report(&["--prometheus", &prometheus_url]);
    let rows = overview(&text_merged);
    assert_eq!(rows.len(), 2, "{text_merged}");
    assert_eq!(
        rows,
        overview(&text_prometheus),
        "{text_merged}\n{text_prometheus}"
    );
    assert!(
        text_merged.starts_with("Migration report from 3 replicas"),
        "{text_merged}"
    );
    assert!(
        text_prometheus.contains(&prometheus_url),
        "{text_prometheus}"
    );
    // GetOrder: 19 requests, 8 JSON answers (web 7, ios 1).
    let get_order = &expected["demo.shop.v1.Shop.GetOrder"];
    assert_eq!((get_order.0, get_order.1), (19, 8));
    assert!(
        rows.iter()
            .any(|r| r.starts_with("demo.shop.v1.Shop.GetOrder 19 8 42")),
        "{rows:?}"
    );

    // The fleet page of one replica, in a real browser: the fleet's numbers; its own view
    // one click away with its own.
    let Some(chromium) = browser() else {
        oracle_missing("the fleet page: no chromium on PATH — `apt install chromium`");
        return;
    };
    let page = format!("http://{}/admin/migration", addrs[0]);
    let dom = headless(
        chromium,
        &scratch.0.join("profile-fleet"),
        &["--dump-dom"],
        &page,
    );
    assert!(dom.contains("The fleet"), "{dom}");
    assert!(dom.contains(&prometheus_url), "{dom}");
    assert!(
        dom.contains("href=\"migration?view=local\""),
        "no link to the instance's own view"
    );
    let row = |dom: &str, method: &str| -> Option<String> {
        let at = dom.find(&format!("data-method=\"{method}\""))?;
        let rest = &dom[at..];
        Some(rest[..rest.find("</tr>")?].to_owned())
    };
    let fleet_row = row(&dom, "demo.shop.v1.Shop.GetOrder").expect("GetOrder's row");
    assert!(
        fleet_row.contains(">19<") && fleet_row.contains(">8<"),
        "{fleet_row}"
    );
    let local = headless(
        chromium,
        &scratch.0.join("profile-local"),
        &["--dump-dom"],
        &format!("{page}?view=local"),
    );
    assert!(local.contains("pod-a"), "the instance is named");
    let own = &totals(&docs[0])["demo.shop.v1.Shop.GetOrder"];
    let local_row = row(&local, "demo.shop.v1.Shop.GetOrder").expect("GetOrder's row");
    assert!(
        local_row.contains(&format!(">{}<", own.0)),
        "{local_row} (own {own:?})"
    );
    assert!(
        local.contains("href=\"migration\""),
        "no link back to the fleet"
    );
}

#[test]
fn ten_thousand_client_ids_export_a_bounded_number_of_series() {
    let shop = shop();
    let scratch = Scratch::new("fleet-bound");
    let mut gw = gateway(
        &shop,
        &scratch,
        "bound",
        "[migration]\nmax_clients = 20000\n",
    );
    let addr = gw.addr();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    conn.set_nodelay(true).unwrap();
    // 10,000 ids on one kept-alive connection, one request each, and one client of many.
    let send = |conn: &mut std::net::TcpStream, id: &str| {
        use std::io::Write as _;
        let head = format!(
            "POST {GET_ORDER} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             x-client-id: {id}\r\ncontent-length: {}\r\n\r\n",
            JSON_BODY.len()
        );
        // One write: head and body in one segment (no Nagle wait for the second).
        conn.write_all(&[head.as_bytes(), JSON_BODY].concat())
            .unwrap();
        read_answer(conn)
    };
    for i in 0..10_000 {
        assert_eq!(send(&mut conn, &format!("client-{i}")), 200);
    }
    for _ in 0..3 {
        assert_eq!(send(&mut conn, "heavy"), 200);
    }
    let (_, _, body) = exchange(addr, "GET", "/metrics", &[], b"");
    let text = String::from_utf8(body).unwrap();
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("protogate_client_requests_total{"))
        .collect();
    // 50 clients and other, each in one (format, format, protocol).
    assert_eq!(series.len(), 51, "{series:#?}");
    assert!(
        series.iter().any(
            |l| l.starts_with("protogate_client_requests_total{client=\"heavy\"")
                && l.ends_with(" 3")
        ),
        "{series:#?}"
    );
    let sum: u64 = series
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 10_003, "every request in a series");
    eprintln!(
        "/metrics with 10,003 clients: {} bytes, {} client series",
        text.len(),
        series.len()
    );
}

/// Reads one HTTP/1.1 answer with a content-length from `conn`: its status.
fn read_answer(conn: &mut std::net::TcpStream) -> u16 {
    use std::io::Read as _;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !complete(&answer) {
        let n = match conn.read(&mut buf) {
            // A signal for this process (another test's child ending) is not an answer.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.unwrap(),
        };
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap()
}
