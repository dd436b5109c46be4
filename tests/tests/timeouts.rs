//! Per-service and per-method `timeout`: the cap of the upstream deadline, over
//! `upstream_timeout`, through the real gateway (the backend's `Slow` answers with the
//! `grpc-timeout` it received).

use std::time::Duration;

use protogate_tests::{Http, start_backend, start_gateway_toml};

use crate::gateway::grpc_timeout;

const SLOW: &str = "/protogate.test.svc.TestService/Slow";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_timeout_caps_the_deadline_over_its_service_and_the_global_one() {
    let backend = start_backend().await;
    let upstream = format!("http://{}", backend.addr);
    let http = Http::h1();
    let sent = |toml: &'static str, client: Option<&'static str>| {
        let (upstream, http) = (upstream.clone(), http.clone());
        async move {
            let (gw, _) = start_gateway_toml(toml, &upstream).await;
            let headers: Vec<(&str, &str)> =
                client.map(|t| ("grpc-timeout", t)).into_iter().collect();
            let a = http
                .post(
                    gw.addr,
                    SLOW,
                    "application/json",
                    &headers,
                    r#"{"delay": "0s"}"#,
                )
                .await;
            assert_eq!(a.status, 200, "{toml}: {:?}", a.body);
            grpc_timeout(a.json()["name"].as_str().unwrap())
        }
    };
    let global = "upstream_timeout = \"20s\"\n";
    let service = "upstream_timeout = \"20s\"\n[services.\"protogate.test.svc.TestService\"]\ntimeout = \"8s\"\n";
    let method = "upstream_timeout = \"20s\"\n[services.\"protogate.test.svc.TestService\"]\ntimeout = \"8s\"\n[services.\"protogate.test.svc.TestService.Slow\"]\ntimeout = \"3s\"\n";
    let within =
        |d: Duration, cap: u64| d <= Duration::from_secs(cap) && d > Duration::from_secs(cap - 2);
    let d = sent(global, None).await;
    assert!(within(d, 20), "{d:?}");
    let d = sent(service, None).await;
    assert!(within(d, 8), "{d:?}");
    let d = sent(method, None).await;
    assert!(within(d, 3), "{d:?}");
    // A client's shorter deadline still wins; a longer one is capped.
    let d = sent(method, Some("2S")).await;
    assert!(d <= Duration::from_secs(2), "{d:?}");
    let d = sent(method, Some("1M")).await;
    assert!(within(d, 3), "{d:?}");

    // The cap ends a call the upstream does not answer in time: 504, DEADLINE_EXCEEDED.
    let (gw, _) = start_gateway_toml(
        "[services.\"protogate.test.svc.TestService.Slow\"]\ntimeout = \"200ms\"\n",
        &upstream,
    )
    .await;
    let a = http
        .post(
            gw.addr,
            SLOW,
            "application/json",
            &[],
            r#"{"delay": "20s"}"#,
        )
        .await;
    assert_eq!(a.status, 504, "{:?}", a.body);
    assert_eq!(a.json()["code"], 4);

    // A name that is no service or method stops the start, naming it.
    let text = protogate_tests::gateway_toml(
        &upstream,
        protogate_tests::V1_PROTO,
        "[services.\"protogate.test.svc.TestService.Nope\"]\ntimeout = \"1s\"\n",
    );
    let resolved = protogate_tests::config_from_toml(&text, protogate_tests::workspace());
    let upstreams = protogate::build_upstreams(&resolved).unwrap();
    let Err(e) = edge::Edge::new(protogate_tests::v1_schema(), upstreams, resolved.edge) else {
        panic!("a timeout for a method the schema lacks was taken");
    };
    let e = e.to_string();
    assert!(
        e.contains("TestService.Nope") && e.contains(".timeout"),
        "{e}"
    );
}
