//! Snapshots swapped under load (issue 15 §2): a request in flight when a new snapshot goes in
//! ends on the one it started with (its answer rendered by the old schema), the next ones see
//! the new one, and what outlives snapshots — the metrics, the upstream pools configured as
//! before — carries over.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use protogate_tests::{Http, proto_source, start_backend, v1_schema, within};

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

#[tokio::test]
async fn a_request_in_flight_finishes_on_the_snapshot_it_started_with() {
    let backend = start_backend().await;
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

    // A call that takes a second, started on the first snapshot.
    let slow = tokio::spawn(async move {
        Http::h1()
            .post(addr, SLOW, "application/json", &[], r#"{"delay":"1s"}"#)
            .await
    });
    let edge_metrics = first.metrics();
    protogate_tests::eventually("the slow call to be in flight", PATIENCE, || {
        (edge_metrics.in_flight.get() == 1).then_some(())
    })
    .await;
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
    live.swap(Arc::new(second));

    // A call after the swap is rendered by the new schema…
    let now = Http::h1()
        .post(addr, SLOW, "application/json", &[], r#"{"delay":"0s"}"#)
        .await;
    assert_eq!(now.status, 200, "{:?}", now.body);
    assert!(now.json().get("label").is_some(), "{}", now.json());
    // …and the one in flight by the old.
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
    // The upstream configured as before kept its pool: one endpoint, not one per snapshot.
    let healthy = text
        .lines()
        .find(|l| l.starts_with("protogate_upstream_endpoints{") && l.contains("healthy"))
        .unwrap_or_default();
    assert!(healthy.ends_with(" 1"), "{text}");
    let _ = stop.send(());
    let _ = within("the gateway to stop", Duration::from_secs(30), served).await;
}
