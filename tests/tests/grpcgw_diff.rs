//! The same requests to protogate and to grpc-gateway (Debian's 1.6.4, built from the same
//! google.api.http rules by tests/grpcgw/build.sh), both in front of the same tonic backend:
//! same status codes and JSON bodies, except where grpc-gateway departs from the
//! google.api.http spec or from the canonical JSON mapping. Those departures are asserted
//! here as they are (a change in either gateway shows up) and listed in the README. Without
//! the grpc-gateway build the test prints one `SKIPPED:` line and passes, unless
//! `PROTOGATE_REQUIRE_ORACLES=1` (set by `make test`): then it fails.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use protogate_tests::library;
use protogate_tests::{Answer, Http};
use serde_json::Value;

use crate::external;

/// grpc-gateway, run as a child process and killed (by its handle) when dropped.
struct GrpcGateway {
    _child: external::Killed,
    addr: String,
}

/// Where grpc-gateway is: `PROTOGATE_GRPCGW_BIN`, else what tests/grpcgw/build.sh builds.
fn grpc_gateway_bin() -> String {
    std::env::var("PROTOGATE_GRPCGW_BIN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/grpcgw/bin/grpcgw").to_owned()
    })
}

/// Starts grpc-gateway in front of `upstream` and reads the address it prints first.
fn grpc_gateway(bin: &str, upstream: &str) -> GrpcGateway {
    let child = Command::new(bin)
        .args(["-listen", "127.0.0.1:0", "-upstream", upstream])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run grpc-gateway at {bin}: {e}"));
    let mut child = external::Killed(child);
    // Read on a thread, so that a grpc-gateway that never prints fails the test instead of
    // hanging it (the child is killed on the way out, which ends the read).
    let stdout = child.0.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(read);
    });
    // It prints at once; 30 s allows for a loaded machine.
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("grpc-gateway prints its address within 30 s")
        .expect("grpc-gateway prints its address");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    GrpcGateway {
        _child: child,
        addr,
    }
}

async fn send(
    http: &Http,
    base: &str,
    method: &str,
    path: &str,
    ct: Option<&str>,
    body: &str,
) -> Answer {
    let headers: Vec<(&str, &str)> = ct.map(|ct| ("content-type", ct)).into_iter().collect();
    http.request(method, base, path, &headers, body.to_owned())
        .await
}

fn json(a: &Answer) -> Value {
    if a.body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&a.body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&a.body).into_owned()))
}

#[tokio::test]
async fn protogate_answers_as_grpc_gateway_does() {
    let bin = grpc_gateway_bin();
    if !Path::new(&bin).is_file() {
        external::oracle_missing(
            "protogate_answers_as_grpc_gateway_does",
            &format!(
                "grpc-gateway is not built at {bin} (tests/grpcgw/build.sh builds it offline \
                 from Go and Debian's grpc-gateway sources; PROTOGATE_GRPCGW_BIN selects \
                 another build)"
            ),
            "grpcgw",
        );
        return;
    }
    let stack = library::start_with_gateway(edge::EdgeConfig::default()).await;
    let (upstream, pg) = (stack.backend.addr.to_string(), &stack.gw);
    let gw = grpc_gateway(&bin, &upstream);
    let pg_addr = pg.addr.to_string();
    let http = Http::h1();
    const J: Option<&str> = Some("application/json");
    use Expect::*;
    let cases: &[(&str, &str, Option<&str>, &str, Expect)] = &[
        ("GET", "/v1/shelves/1/books/2", None, "", Same),
        (
            "GET",
            "/v1/shelves/1/books?pageSize=2&pageToken=abc",
            None,
            "",
            Same,
        ),
        ("GET", "/v1/books?pageSize=1", None, "", Same),
        (
            "POST",
            "/v1/shelves/7/books?requestId=r1",
            J,
            r#"{"title":"Dune","pages":"412","genre":"FICTION","tags":["a","b"],"labels":{"k":"v"}}"#,
            Same,
        ),
        (
            "POST",
            "/v1/shelves/7/books",
            J,
            r#"{"title":"T","published":"2024-01-02T03:04:05Z"}"#,
            Same,
        ),
        ("DELETE", "/v1/shelves/1/books/2", None, "", Same),
        ("POST", "/v1/shelves/1/books/2:archive", J, "{}", Same),
        (
            "GET",
            "/v1/echo/a/b/c?pageSize=3&genres=FICTION&genres=HISTORY&includeDrafts=true&ids=1&ids=2&filter.author=Le%20Guin&filter.pages.min=5&minRating=2.5&big=18446744073709551615",
            None,
            "",
            Same,
        ),
        (
            "GET",
            "/v1/echo/x?publishedAfter=2024-01-02T03:04:05Z&maxAge=3s&minPages=7&cursor=AAEC",
            None,
            "",
            Same,
        ),
        ("GET", "/v1/echo/x?genres=2", None, "", Same),
        ("GET", "/v1/echo/x?page_size=4", None, "", Same),
        (
            "POST",
            "/v1/echo",
            J,
            r#"{"parent":"p","pageSize":5,"filter":{"author":"x"}}"#,
            Same,
        ),
        (
            "PUT",
            "/v1/echo/p/filter",
            J,
            r#"{"author":"a","pages":{"max":"9"}}"#,
            Same,
        ),
        ("GET", "/v1/shelves/1/books/2/published", None, "", Same),
        // Errors: the same status and google.rpc.Code; grpc-gateway 1.6.4 adds an `error`
        // member (a copy of `message`) and words messages after Go's parsers.
        ("GET", "/v1/shelves/1/books/missing", None, "", SameError),
        ("GET", "/v1/echo/x?pageSize=ten", None, "", SameError),
        (
            "POST",
            "/v1/shelves/7/books",
            J,
            r#"{"pages":"x"}"#,
            SameError,
        ),
        // Departures, each asserted as it is.
        (
            "PATCH",
            "/v1/shelves/1/books/2?updateMask=title",
            J,
            r#"{"title":"New"}"#,
            Departs {
                why: "grpc-gateway 1.6.4 appends the Go field name (`Title`) to a FieldMask given in the query",
                protogate: (
                    200,
                    r#"{"name":"shelves/1/books/2","tags":["title"],"title":"New"}"#,
                ),
                grpc_gateway: (
                    200,
                    r#"{"name":"shelves/1/books/2","tags":["Title","title"],"title":"New"}"#,
                ),
            },
        ),
        (
            "GET",
            "/v1/echo/%2Fa%20b",
            None,
            "",
            Departs {
                why: "google.api.http: a multi-segment variable ({parent=**}) keeps %2F; grpc-gateway 1.6.4 decodes it",
                protogate: (200, r#"{"parent":"%2Fa b"}"#),
                grpc_gateway: (200, r#"{"parent":"/a b"}"#),
            },
        ),
        (
            "GET",
            "/v1/echo/x?nope=1",
            None,
            "",
            Departs {
                why: "unknown query parameters: 400 in protogate by default (unknown_query_parameters = \"ignore\" to accept them); grpc-gateway ignores them",
                protogate: (
                    400,
                    r#"{"code":3,"message":"query parameter nope: unknown parameter (library.v1.ListBooksRequest has no field nope)"}"#,
                ),
                grpc_gateway: (200, r#"{"parent":"x"}"#),
            },
        ),
        (
            "POST",
            "/library.v1.Library/Unannotated",
            J,
            r#"{"name":"y"}"#,
            Departs {
                why: "protogate also serves POST /pkg.Service/Method for every method; grpc-gateway only the annotated routes",
                protogate: (200, r#"{"name":"y","title":"Title of y"}"#),
                grpc_gateway: (404, r#""Not Found\n""#),
            },
        ),
        (
            "GET",
            "/v1/nothing/here",
            None,
            "",
            Departs {
                why: "protogate answers 404 and 405 with a google.rpc.Status in the negotiated format; grpc-gateway with plain text",
                protogate: (
                    404,
                    r#"{"code":5,"message":"no method or HTTP rule for GET /v1/nothing/here"}"#,
                ),
                grpc_gateway: (404, r#""Not Found\n""#),
            },
        ),
        (
            "PUT",
            "/v1/shelves/1/books/2",
            J,
            "{}",
            Departs {
                why: "as above, for 405 (protogate also sends Allow)",
                protogate: (
                    405,
                    r#"{"code":12,"message":"path /v1/shelves/1/books/2 accepts DELETE, GET, PATCH only"}"#,
                ),
                grpc_gateway: (405, r#""Method Not Allowed\n""#),
            },
        ),
    ];
    let mut failures = Vec::new();
    for (method, path, ct, body, expect) in cases {
        let a = send(&http, &pg_addr, method, path, *ct, body).await;
        let b = send(&http, &gw.addr, method, path, *ct, body).await;
        let (ja, jb) = (json(&a), json(&b));
        let (sa, sb) = (a.status.as_u16(), b.status.as_u16());
        let ok = match expect {
            Same => sa == sb && ja == jb,
            SameError => sa == sb && sa >= 400 && ja["code"] == jb["code"] && ja["code"].is_u64(),
            Departs {
                protogate,
                grpc_gateway,
                ..
            } => {
                let want = |(s, j): &(u16, &str)| (*s, serde_json::from_str::<Value>(j).unwrap());
                (sa, ja.clone()) == want(protogate) && (sb, jb.clone()) == want(grpc_gateway)
            }
        };
        if !ok {
            failures.push(format!(
                "{method} {path} ({expect:?})\n  protogate    {sa} {ja}\n  grpc-gateway {sb} {jb}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[derive(Debug)]
enum Expect {
    /// Same status, same JSON body.
    Same,
    /// Same error status and google.rpc.Code.
    SameError,
    /// A known departure: both answers as they are.
    Departs {
        #[allow(dead_code)]
        why: &'static str,
        protogate: (u16, &'static str),
        grpc_gateway: (u16, &'static str),
    },
}

/// Without the grpc-gateway build the test skips with one line, unless oracles are required:
/// this test binary, run again on it with a binary that is not there.
#[test]
fn a_missing_grpc_gateway_skips_loudly_or_fails_when_required() {
    let test = "protogate_answers_as_grpc_gateway_does";
    external::assert_missing_oracle_skips_or_fails(
        test,
        ("PROTOGATE_GRPCGW_BIN", "/nonexistent/grpcgw"),
        &format!("{test}: grpc-gateway is not built at /nonexistent/grpcgw"),
        "grpcgw",
        Duration::from_secs(60),
    );
}
