//! Retry policies (`[services."…"] retry`), the retry budget (`retry_budget`) and outlier
//! detection (`consecutive_failures`) through the real gateway, in front of a backend that
//! fails a fixed share of its calls and writes down every attempt by the request's id: what
//! it did with it and the `grpc-previous-rpc-attempts` / `grpc-timeout` it came with.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use protogate_tests::pb::Thing;
use protogate_tests::{BytesCodec, Http, Running, log_lines, metric, start_gateway_toml};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::body::Body as TonicBody;

const SERVICE: &str = "protogate.test.svc.TestService";
const ECHO: &str = "/protogate.test.svc.TestService/Echo";

/// What the backend did with one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Did {
    /// Answered with an error before doing anything.
    Refused,
    /// Did the work and answered it.
    Processed,
    /// Held the call, never answering it (the gateway cancels it).
    Stalled,
}

/// What the backend does with the `n`th call it gets (from 0, all ids together).
#[derive(Clone, Debug)]
enum Rule {
    /// Refuses with `code` each call but every `every`th (numbers `every - 1`,
    /// `2 × every - 1`, …): a fixed share of `1 - 1/every` of the calls fails.
    FailAllBut { every: u64, code: tonic::Code },
    /// Holds the first attempt of every id unanswered, answers the others at once.
    StallFirst,
    /// Refuses every call UNAVAILABLE with `grpc-retry-pushback-ms: ms`.
    Pushback(&'static str),
}

/// One attempt as the backend saw it.
#[derive(Clone, Debug)]
struct Seen {
    did: Did,
    previous: Option<String>,
    timeout: Option<String>,
}

#[derive(Default)]
struct Ledger {
    calls: AtomicU64,
    by_id: Mutex<HashMap<i64, Vec<Seen>>>,
}

impl Ledger {
    fn attempts(&self, id: i64) -> Vec<Seen> {
        self.by_id
            .lock()
            .unwrap()
            .get(&id)
            .cloned()
            .unwrap_or_default()
    }

    fn all(&self) -> HashMap<i64, Vec<Seen>> {
        self.by_id.lock().unwrap().clone()
    }

    fn note(&self, id: i64, seen: Seen) {
        self.by_id.lock().unwrap().entry(id).or_default().push(seen);
    }
}

/// The flaky backend: Echo under its [`Rule`], every attempt in its [`Ledger`].
#[derive(Clone)]
struct Flaky {
    rule: Rule,
    ledger: Arc<Ledger>,
}

struct FlakyEcho(Flaky, Option<String>, Option<String>);

impl tonic::server::UnaryService<Bytes> for FlakyEcho {
    type Response = Bytes;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<Bytes>, tonic::Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let FlakyEcho(flaky, previous, timeout) = self;
        let (flaky, previous, timeout) = (flaky.clone(), previous.take(), timeout.take());
        Box::pin(async move {
            let bytes = request.into_inner();
            let id = Thing::decode(bytes.clone()).map(|t| t.id).unwrap_or(-1);
            let n = flaky.ledger.calls.fetch_add(1, Ordering::SeqCst);
            let first = flaky.ledger.attempts(id).is_empty();
            let seen = |did| Seen {
                did,
                previous: previous.clone(),
                timeout: timeout.clone(),
            };
            match &flaky.rule {
                Rule::FailAllBut { every, code } if n % every != every - 1 => {
                    flaky.ledger.note(id, seen(Did::Refused));
                    Err(tonic::Status::new(*code, "not now"))
                }
                Rule::Pushback(ms) => {
                    flaky.ledger.note(id, seen(Did::Refused));
                    let mut status = tonic::Status::unavailable("busy");
                    status
                        .metadata_mut()
                        .insert("grpc-retry-pushback-ms", ms.parse().unwrap());
                    Err(status)
                }
                Rule::StallFirst if first => {
                    // Held until the gateway gives up on it (its stream reset drops this).
                    flaky.ledger.note(id, seen(Did::Stalled));
                    std::future::pending().await
                }
                _ => {
                    flaky.ledger.note(id, seen(Did::Processed));
                    Ok(tonic::Response::new(bytes))
                }
            }
        })
    }
}

impl tower::Service<http::Request<TonicBody>> for Flaky {
    type Response = http::Response<TonicBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<TonicBody>) -> Self::Future {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let echo = FlakyEcho(
            self.clone(),
            header("grpc-previous-rpc-attempts"),
            header("grpc-timeout"),
        );
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(BytesCodec);
            Ok(grpc.unary(echo, req).await)
        })
    }
}

impl tonic::server::NamedService for Flaky {
    const NAME: &'static str = SERVICE;
}

async fn start_flaky(rule: Rule) -> (Running, Arc<Ledger>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ledger = Arc::new(Ledger::default());
    let flaky = Flaky {
        rule,
        ledger: ledger.clone(),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(flaky, incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    (Running::new(addr, stop, task), ledger)
}

/// Echo of the thing with `id`, in JSON; the HTTP status.
async fn echo(http: &Http, gw: std::net::SocketAddr, id: i64) -> u16 {
    let body = format!(r#"{{"id":"{id}","name":"retry me"}}"#);
    let a = http.post(gw, ECHO, "application/json", &[], body).await;
    if a.status == 200 {
        assert_eq!(a.json()["id"], id.to_string(), "{:?}", a.body);
    }
    a.status.as_u16()
}

/// Echo of the thing with `id` over gRPC (relayed, not converted); the answer's gRPC code.
async fn echo_grpc(gw: std::net::SocketAddr, id: i64) -> tonic::Code {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{gw}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let thing = Thing {
        id,
        ..Thing::default()
    };
    let request = tonic::Request::new(Bytes::from(thing.encode_to_vec()));
    let path = http::uri::PathAndQuery::from_static(ECHO);
    match grpc.unary(request, path, BytesCodec).await {
        Ok(answer) => {
            assert_eq!(Thing::decode(answer.into_inner()).unwrap().id, id);
            tonic::Code::Ok
        }
        Err(status) => status.code(),
    }
}

fn retries(metrics: &str, upstream: &str, code: &str) -> f64 {
    metric(
        metrics,
        &format!("protogate_upstream_retries_total{{upstream=\"{upstream}\",code=\"{code}\"}}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_goes_again_and_no_processed_call_is_repeated() {
    // Every other call fails UNAVAILABLE: one call in two, in the order they come.
    let (backend, ledger) = start_flaky(Rule::FailAllBut {
        every: 2,
        code: tonic::Code::Unavailable,
    })
    .await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml(
        "retry_budget = 1.0\n\
         [services.\"protogate.test.svc.TestService\"]\n\
         retry = { attempts = 3, backoff = \"1ms\", max_backoff = \"5ms\" }\n",
        &upstream,
    )
    .await;
    let http = Http::h1();
    // One at a time, so the backend's order is the calls' order: each call's first attempt
    // is refused, its second processed — both converted calls (JSON) and relayed ones (gRPC).
    for id in 1..=20 {
        assert_eq!(echo(&http, gw.addr, id).await, 200, "{id}");
    }
    for id in 21..=30 {
        assert_eq!(echo_grpc(gw.addr, id).await, tonic::Code::Ok, "{id}");
    }
    for id in 1..=30 {
        let attempts = ledger.attempts(id);
        let did: Vec<Did> = attempts.iter().map(|s| s.did).collect();
        assert_eq!(did, [Did::Refused, Did::Processed], "{id}: {attempts:?}");
        let previous: Vec<Option<&str>> = attempts.iter().map(|s| s.previous.as_deref()).collect();
        assert_eq!(previous, [None, Some("1")], "{id}");
    }
    let metrics = http.metrics(gw.addr).await;
    assert_eq!(
        retries(&metrics, &upstream, "Unavailable"),
        30.0,
        "{metrics}"
    );
    assert!(
        log_lines("call retried by its retry policy").len() >= 20,
        "the retries are logged at debug"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_bounds_retries_to_a_share_of_the_calls() {
    // Three calls in four fail; three attempts would carry most calls through.
    let (backend, ledger) = start_flaky(Rule::FailAllBut {
        every: 4,
        code: tonic::Code::Unavailable,
    })
    .await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml(
        "retry_budget = 0.2\n\
         [services.\"protogate.test.svc.TestService.Echo\"]\n\
         retry = { codes = [\"UNAVAILABLE\"], attempts = 3, backoff = \"1ms\", max_backoff = \"2ms\" }\n",
        &upstream,
    )
    .await;
    let http = Http::h1();
    const CALLS: i64 = 200;
    let began = Instant::now();
    // Four clients at once: the share holds whatever the order.
    let mut answered: HashMap<i64, u16> = HashMap::new();
    for chunk in (1..=CALLS).collect::<Vec<_>>().chunks(4) {
        let calls = chunk.iter().map(|&id| {
            let http = http.clone();
            let addr = gw.addr;
            async move { (id, echo(&http, addr, id).await) }
        });
        answered.extend(futures_util::future::join_all(calls).await);
    }
    let elapsed = began.elapsed();
    let metrics = http.metrics(gw.addr).await;
    let made = retries(&metrics, &upstream, "Unavailable");
    let refused = metric(
        &metrics,
        &format!("protogate_upstream_retries_refused_total{{upstream=\"{upstream}\"}}"),
    );
    // Within one ten-second window the budget allows max(10, 20 % of the calls) retries;
    // a machine slow enough to spread the calls over more windows gets a floor per window.
    let windows = elapsed.as_secs() / 10 + 1;
    let bound = 0.2 * CALLS as f64 * windows.min(2) as f64 + 10.0 * windows as f64;
    assert!(
        made >= 10.0 && made <= bound,
        "{made} retries in {elapsed:?} (bound {bound})"
    );
    assert!(refused > 0.0, "the budget refused none: {metrics}");
    // Every attempt the backend saw is a first attempt or a retry the metric counted.
    let all = ledger.all();
    let attempts: usize = all.values().map(Vec::len).sum();
    assert_eq!(attempts as f64, CALLS as f64 + made, "{all:?}");
    for (id, seen) in &all {
        let processed = seen.iter().filter(|s| s.did == Did::Processed).count();
        // No call the backend processed went again, and the client heard what happened.
        assert!(processed <= 1, "{id}: {seen:?}");
        assert_eq!(
            seen.last().unwrap().did == Did::Processed,
            processed == 1,
            "{id}"
        );
        let want = if processed == 1 { 200 } else { 503 };
        assert_eq!(answered[id], want, "{id}: {seen:?}");
        for (n, s) in seen.iter().enumerate() {
            let previous = (n > 0).then(|| n.to_string());
            assert_eq!(s.previous, previous, "{id}: {seen:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_named_codes_are_retried_and_pushback_decides() {
    // INTERNAL is not in the default codes: no retry.
    let (backend, ledger) = start_flaky(Rule::FailAllBut {
        every: u64::MAX,
        code: tonic::Code::Internal,
    })
    .await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml(
        "[services.\"protogate.test.svc.TestService\"]\nretry = { backoff = \"1ms\" }\n",
        &upstream,
    )
    .await;
    let http = Http::h1();
    assert_eq!(echo(&http, gw.addr, 2).await, 500);
    assert_eq!(ledger.attempts(2).len(), 1);

    // A negative pushback says: do not retry; a pushback of 50 ms is waited.
    for (ms, attempts) in [("-1", 1), ("50", 3)] {
        let (backend, ledger) = start_flaky(Rule::Pushback(ms)).await;
        let upstream = format!("http://{}", backend.addr);
        let (gw, _) = start_gateway_toml(
            "retry_budget = 1.0\n[services.\"protogate.test.svc.TestService\"]\nretry = { backoff = \"1ms\" }\n",
            &upstream,
        )
        .await;
        let began = Instant::now();
        assert_eq!(echo(&http, gw.addr, 7).await, 503, "{ms}");
        assert_eq!(ledger.attempts(7).len(), attempts, "{ms}");
        if attempts == 3 {
            assert!(began.elapsed() >= Duration::from_millis(100), "{ms}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_try_timeout_bounds_each_attempt() {
    let (backend, ledger) = start_flaky(Rule::StallFirst).await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, _) = start_gateway_toml(
        "upstream_timeout = \"20s\"\n\
         [services.\"protogate.test.svc.TestService\"]\n\
         retry = { codes = [\"DEADLINE_EXCEEDED\"], per_try_timeout = \"300ms\", backoff = \"1ms\" }\n",
        &upstream,
    )
    .await;
    let http = Http::h1();
    let began = Instant::now();
    assert_eq!(echo(&http, gw.addr, 5).await, 200);
    assert!(began.elapsed() < Duration::from_secs(20));
    let attempts = ledger.attempts(5);
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    // The held attempt was cancelled, never processed; each attempt had its own deadline.
    assert_eq!(attempts[0].did, Did::Stalled, "{attempts:?}");
    assert_eq!(attempts[1].did, Did::Processed);
    assert_eq!(attempts[1].previous.as_deref(), Some("1"));
    for a in &attempts {
        let t = crate::gateway::grpc_timeout(a.timeout.as_deref().unwrap());
        assert!(t <= Duration::from_millis(300), "{a:?}");
    }
    // Without DEADLINE_EXCEEDED among the codes, the expired attempt is the answer: 504.
    let (backend, ledger) = start_flaky(Rule::StallFirst).await;
    let (gw, _) = start_gateway_toml(
        "[services.\"protogate.test.svc.TestService\"]\nretry = { per_try_timeout = \"200ms\" }\n",
        &format!("http://{}", backend.addr),
    )
    .await;
    assert_eq!(echo(&http, gw.addr, 6).await, 504);
    assert_eq!(ledger.attempts(6).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_failing_calls_in_a_row_is_ejected() {
    // Two endpoints: one refuses every call UNAVAILABLE (`every: u64::MAX`), the other
    // none (`every: 1`).
    let (bad, bad_ledger) = start_flaky(Rule::FailAllBut {
        every: u64::MAX,
        code: tonic::Code::Unavailable,
    })
    .await;
    let (good, _) = start_flaky(Rule::FailAllBut {
        every: 1,
        code: tonic::Code::Unavailable,
    })
    .await;
    let toml = format!(
        "consecutive_failures = 3\n[services.\"{SERVICE}\"]\nupstream = [\"http://{}\", \"http://{}\"]\n",
        bad.addr, good.addr
    );
    let (gw, _) = start_gateway_toml(&toml, &format!("http://{}", good.addr)).await;
    let http = Http::h1();
    let ejected = |addr: std::net::SocketAddr| {
        log_lines("3 calls in a row answered UNAVAILABLE or INTERNAL")
            .into_iter()
            .filter(|l| l.contains(&format!("addr={addr} ")))
            .count()
    };
    let mut id = 0;
    protogate_tests::eventually_async(
        "the failing endpoint to be ejected",
        Duration::from_secs(30),
        || {
            id += 1;
            let (http, id) = (http.clone(), id);
            async move {
                echo(&http, gw.addr, id).await;
                (ejected(bad.addr) > 0).then_some(())
            }
        },
    )
    .await;
    // It failed three calls at least; the answering one is never ejected.
    assert!(bad_ledger.calls.load(Ordering::SeqCst) >= 3);
    assert_eq!(ejected(good.addr), 0);

    // With outlier detection off, the same endpoint is never ejected for its answers.
    let (bad, bad_ledger) = start_flaky(Rule::FailAllBut {
        every: u64::MAX,
        code: tonic::Code::Internal,
    })
    .await;
    let upstream = format!("http://{}", bad.addr);
    let (gw, _) = start_gateway_toml("consecutive_failures = 0\n", &upstream).await;
    for id in 1..=12 {
        echo(&http, gw.addr, id).await;
    }
    assert_eq!(bad_ledger.calls.load(Ordering::SeqCst), 12);
    assert_eq!(ejected(bad.addr), 0);
    let metrics = http.metrics(gw.addr).await;
    let healthy =
        format!("protogate_upstream_endpoints{{upstream=\"{upstream}\",state=\"healthy\"}}");
    assert_eq!(metric(&metrics, &healthy), 1.0, "{metrics}");
}
