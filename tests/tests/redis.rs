//! `[rate_limit] redis`: two gateways sharing one real `redis-server` (Debian's package,
//! installed by `.ci/run`) hold one budget per client together; with Redis killed requests are
//! still served, the failures counted, and each gateway's own budget holds until Redis is
//! back.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use protogate_tests::{
    Http, eventually, eventually_async, sha256_hex, start_backend, start_gateway_toml,
};

const ECHO: &str = "/protogate.test.svc.TestService/Echo";
/// How long a change the test made may take to show (only a failing test waits it out).
const WAIT: Duration = Duration::from_secs(30);

/// A `redis-server` of the test's own, killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Redis {
    /// A Redis on a free port of 127.0.0.1 (on `port` when given), answering PING; `None`
    /// (and a loud line, or a failure under `PROTOGATE_REQUIRE_ORACLES`) without the binary.
    async fn start(port: Option<u16>) -> Option<Redis> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            let required =
                std::env::var("PROTOGATE_REQUIRE_ORACLES").is_ok_and(|v| !v.is_empty() && v != "0");
            assert!(
                !required,
                "redis-server is missing (Debian's redis-server package); PROTOGATE_REQUIRE_ORACLES is set"
            );
            eprintln!("SKIPPED: redis-server is missing (Debian's redis-server package)");
            return None;
        }
        for _ in 0..5 {
            let port = port.unwrap_or_else(|| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            let mut redis = Redis { child, port };
            // Up when it answers PING; gone when the port was taken meanwhile (then another).
            let up = eventually("redis-server to answer PING", WAIT, || {
                if redis.ping() {
                    Some(true)
                } else {
                    redis.child.try_wait().unwrap().map(|_| false)
                }
            })
            .await;
            if up {
                return Some(redis);
            }
        }
        panic!("redis-server never answered PING");
    }

    fn ping(&self) -> bool {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }
}

/// A backend-error count from a gateway's metrics.
async fn backend_errors(http: &Http, gw: SocketAddr) -> u64 {
    let metrics = http.metrics(gw).await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("protogate_rate_limit_backend_errors_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test]
async fn two_gateways_share_one_budget_and_fail_open_without_redis() {
    let Some(redis) = Redis::start(None).await else {
        return;
    };
    let port = redis.port;
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    // Four requests, then one every 100 s: nothing comes back during the test. A generous
    // timeout: a loaded machine must not fall back while Redis is up.
    let toml = format!(
        r#"
[auth]
[[auth.api_keys]]
client = "billing"
sha256 = "{}"
[rate_limit]
per_client = 0.01
burst = 4
redis = "redis://127.0.0.1:{port}"
redis_timeout = "5s"
"#,
        sha256_hex("k-1")
    );
    let (a, _) = start_gateway_toml(&toml, &upstream).await;
    let (b, _) = start_gateway_toml(&toml, &upstream).await;
    let http = Http::h1();
    let echo = async |gw: SocketAddr| {
        http.post(
            gw,
            ECHO,
            "application/json",
            &[("x-api-key", "k-1")],
            r#"{"name":"n"}"#,
        )
        .await
    };
    // One budget of four across both gateways.
    let mut statuses = Vec::new();
    for gw in [a.addr, b.addr, a.addr, b.addr, a.addr, b.addr] {
        statuses.push(echo(gw).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    let refused = echo(b.addr).await;
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"default\";q=4;w=400")
    );
    assert_eq!(backend_errors(&http, a.addr).await, 0);
    assert_eq!(backend_errors(&http, b.addr).await, 0);

    // Redis gone: served, counted, each gateway's own budget of four.
    drop(redis);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(echo(a.addr).await.status.as_u16());
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 429],
        "the local bucket, fresh"
    );
    assert_eq!(echo(b.addr).await.status, 200, "b's own");
    assert!(backend_errors(&http, a.addr).await >= 5);

    // Redis back (empty): the shared budget decides again, once the connection is made.
    let _redis = Redis::start(Some(port)).await.expect("redis-server again");
    let (http, echo) = (&http, &echo);
    let status = eventually_async("the gateway to use Redis again", WAIT, || async move {
        let before = backend_errors(http, b.addr).await;
        let status = echo(b.addr).await.status;
        (backend_errors(http, b.addr).await == before).then_some(status)
    })
    .await;
    assert_eq!(status, 200, "a fresh budget in the new Redis");
}
