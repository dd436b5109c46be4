//! Snapshots swapped under load: a request in flight when a new snapshot goes in
//! ends on the one it started with (its answer rendered by the old schema), the next ones see
//! the new one, and what outlives snapshots — the metrics, the upstream pools configured as
//! before — carries over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use protogate_tests::pb::test_service_server::TestServiceServer;
use protogate_tests::{Backend, Http, proto_source, v1_schema, within};
use tokio::net::TcpListener;
use tokio::sync::watch;

const PATIENCE: Duration = Duration::from_secs(30);

const SLOW: &str = "/protogate.test.svc.TestService/Slow";

/// The v1 test schema with `Thing.name` called `label`: the same field number, another
/// JSON name, so which schema rendered an answer shows in it.
fn renamed_schema() -> transcode::Schema {
    let open = proto_source("test/svc/v1");
    transcode::Schema::compile(&["testsvc.proto".to_owned()], move |name| {
        open(name).map(|text| text.replace("string name = 2;", "string label = 2;"))
    })
    .unwrap()
}

/// The v2 backend behind a gate: the first Slow call is held, received and not answered, until
/// the test opens the gate. It counts the connections it accepts and notes the peer (the
/// gateway's end) of every call: a pool kept across a reload dials nothing new.
struct HeldUpstream {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    gate: Arc<Gate>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

struct Gate {
    /// Slow calls that reached the backend, and those it answered.
    received: AtomicUsize,
    answered: AtomicUsize,
    /// The remote address of each call's connection.
    peers: Mutex<Vec<Option<SocketAddr>>>,
    open: watch::Sender<bool>,
}

impl HeldUpstream {
    async fn start() -> HeldUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let incoming = futures_util::stream::unfold(listener, move |listener| {
            let counted = counted.clone();
            async move {
                let accepted = listener.accept().await.map(|(stream, _)| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    stream
                });
                Some((accepted, listener))
            }
        });
        let gate = Arc::new(Gate {
            received: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
            peers: Mutex::new(Vec::new()),
            open: watch::channel(false).0,
        });
        let service = Held {
            inner: TestServiceServer::new(Backend),
            gate: gate.clone(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(service, Box::pin(incoming), async {
                    let _ = stopped.await;
                })
                .await;
        });
        HeldUpstream {
            addr,
            connections,
            gate,
            _stop: stop,
        }
    }
}

/// The backend's service with the gate in front of it.
#[derive(Clone)]
struct Held {
    inner: TestServiceServer<Backend>,
    gate: Arc<Gate>,
}

impl tower::Service<http::Request<tonic::body::Body>> for Held {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let mut inner = self.inner.clone();
        let gate = self.gate.clone();
        Box::pin(async move {
            let peer = req
                .extensions()
                .get::<tonic::transport::server::TcpConnectInfo>()
                .and_then(|info| info.remote_addr());
            gate.peers.lock().unwrap().push(peer);
            let slow = req.uri().path() == SLOW;
            if slow && gate.received.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = gate.open.subscribe().wait_for(|open| *open).await;
            }
            let answer = tower::Service::call(&mut inner, req).await;
            if slow {
                gate.answered.fetch_add(1, Ordering::SeqCst);
            }
            answer
        })
    }
}

impl tonic::server::NamedService for Held {
    const NAME: &'static str = "protogate.test.svc.TestService";
}

#[tokio::test]
async fn a_request_in_flight_finishes_on_the_snapshot_it_started_with() {
    let backend = HeldUpstream::start().await;
    let gate = backend.gate.clone();
    let upstream = format!("http://{}", backend.addr);
    let upstreams = edge::Upstreams::new(Some(&upstream), &[], 1 << 26).unwrap();
    let first =
        Arc::new(edge::Edge::new(v1_schema(), upstreams, edge::EdgeConfig::default()).unwrap());
    let live = edge::Live::new(first.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(edge::serve(listener, live.clone(), async {
        let _ = stopped.await;
    }));

    // A call started on the first snapshot, held by the upstream until the test lets it go.
    let slow = tokio::spawn(async move {
        Http::h1()
            .post(addr, SLOW, "application/json", &[], r#"{"delay":"0s"}"#)
            .await
    });
    protogate_tests::eventually("the slow call to reach the upstream", PATIENCE, || {
        (gate.received.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert_eq!(first.metrics().in_flight.get(), 1);
    // The new snapshot: another schema, the upstreams rebuilt from the same configuration.
    let upstreams = first
        .upstreams()
        .rebuild(
            Some(edge::UpstreamSpec::single(edge::Target::plain(&upstream))),
            Vec::new(),
            1 << 26,
            edge::UpstreamOptions::default(),
            Arc::new(edge::SystemResolver),
        )
        .unwrap();
    let second = first
        .reload(renamed_schema(), upstreams, edge::EdgeConfig::default())
        .unwrap();
    assert_ne!(second.digest(), first.digest());
    // At the swap the call is in flight: the upstream has it and has not answered.
    assert_eq!(gate.received.load(Ordering::SeqCst), 1);
    assert_eq!(
        gate.answered.load(Ordering::SeqCst),
        0,
        "answered before the swap"
    );
    assert!(!slow.is_finished(), "the call ended before the swap");
    live.swap(Arc::new(second));

    // A call after the swap is rendered by the new schema, while the first is still held…
    let now = Http::h1()
        .post(addr, SLOW, "application/json", &[], r#"{"delay":"0s"}"#)
        .await;
    assert_eq!(now.status, 200, "{:?}", now.body);
    assert!(now.json().get("label").is_some(), "{}", now.json());
    assert_eq!(gate.answered.load(Ordering::SeqCst), 1);
    assert!(
        !slow.is_finished(),
        "the held call ended before it was let go"
    );
    // …and the one in flight, let go now, by the old.
    gate.open.send_replace(true);
    let then = within("the slow call", PATIENCE, slow).await.unwrap();
    assert_eq!(then.status, 200, "{:?}", then.body);
    assert!(
        then.json().get("name").is_some() && then.json().get("label").is_none(),
        "{}",
        then.json()
    );
    // The metrics are the same registry across the swap: both calls counted, one digest.
    let metrics = Http::h1().get(addr, "/metrics").await;
    let text = String::from_utf8_lossy(&metrics.body);
    let slow_calls = text
        .lines()
        .filter(|l| l.starts_with("protogate_requests_total{") && l.contains("TestService/Slow"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum::<u64>();
    assert_eq!(slow_calls, 2, "{text}");
    assert_eq!(text.matches("protogate_schema_info{").count(), 1, "{text}");
    // The upstream configured as before kept its pool: the call on the new snapshot went
    // over the connection the old one dialed (a rebuilt pool dials its own), and the
    // endpoint gauge counts one endpoint, not one per snapshot.
    let peers = gate.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 2, "{peers:?}");
    assert!(peers[0].is_some() && peers[0] == peers[1], "{peers:?}");
    assert_eq!(backend.connections.load(Ordering::SeqCst), 1, "{peers:?}");
    let healthy = text
        .lines()
        .find(|l| l.starts_with("protogate_upstream_endpoints{") && l.contains("healthy"))
        .unwrap_or_default();
    assert!(healthy.ends_with(" 1"), "{text}");
    let _ = stop.send(());
    let _ = within("the gateway to stop", Duration::from_secs(30), served).await;
}
