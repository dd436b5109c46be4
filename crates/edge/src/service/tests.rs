//! The request path in-process: the account room's decisions, and [`Edge::handle`] called
//! directly (no socket) for the answers that never reach an upstream.

use http_body_util::{BodyExt, Full};

use super::*;
use crate::migration::Source;

const PROTO: &str = r#"
syntax = "proto3";
package t.v1;
message Req { string name = 1; }
message Res { string name = 1; }
service Svc { rpc Get(Req) returns (Res); }
"#;

const GET: &str = "/t.v1.Svc/Get";

/// An edge in front of an upstream nobody dials (these requests end before the call).
fn edge(config: EdgeConfig) -> Arc<Edge> {
    let schema = Schema::compile(&["t.proto".to_owned()], |name| {
        (name == "t.proto").then(|| PROTO.to_owned())
    })
    .expect("schema");
    let upstreams = Upstreams::new(Some("http://127.0.0.1:9"), &[], 1 << 20).expect("upstreams");
    Arc::new(Edge::new(schema, upstreams, config).expect("edge"))
}

fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "gw");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(()).expect("request").into_parts().0
}

async fn handle(
    edge: &Arc<Edge>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> (Response<()>, String) {
    let head = head(method, path, headers);
    let req = Request::from_parts(head, Full::new(Bytes::from_static(body.as_bytes())));
    let (parts, body) = edge.clone().handle(req).await.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    (
        Response::from_parts(parts, ()),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// `protogate_requests_total` for `method` and `code`, from the edge's own /metrics text.
fn requests(edge: &Edge, method: &str, code: u16) -> f64 {
    let labels = [format!("method=\"{method}\""), format!("code=\"{code}\"")];
    edge.metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("protogate_requests_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn with_client_header() -> EdgeConfig {
    let mut config = EdgeConfig::default();
    config.migration.client_id_header = Some(http::HeaderName::from_static("x-app"));
    config
}

#[tokio::test]
async fn one_identity_names_the_client_for_every_reader() {
    let edge = edge(with_client_header());
    // The configured header names the client for the report and the logs alike.
    let h = head(
        "POST",
        GET,
        &[
            ("x-app", "billing"),
            ("user-agent", "okhttp/4.12.0 (Linux)"),
        ],
    );
    let caller = edge.identify(&h);
    assert_eq!(caller.id.name(), "billing");
    assert_eq!(caller.id.version(), Some("okhttp/4.12.0"));
    assert_eq!(caller.id.source(), Source::ConfiguredHeader);
    assert_eq!(caller.client.client_id.as_deref(), Some("billing"));
    assert_eq!(&*caller.client.user_agent, "okhttp/4.12.0 (Linux)");
    // x-client-id comes first.
    let h = head("POST", GET, &[("x-app", "billing"), ("x-client-id", "ios")]);
    let caller = edge.identify(&h);
    assert_eq!(caller.id.name(), "ios");
    assert_eq!(caller.id.source(), Source::ClientIdHeader);
    assert_eq!(caller.client.client_id.as_deref(), Some("ios"));
    // A User-Agent alone names the report's row, but declares no client id for the logs.
    let h = head("POST", GET, &[("user-agent", "curl/8.5.0")]);
    let caller = edge.identify(&h);
    assert_eq!(caller.id.name(), "curl");
    assert_eq!(caller.id.source(), Source::UserAgent);
    assert_eq!(caller.client.client_id, None);
    assert_eq!(&*caller.client.user_agent, "curl/8.5.0");
    // Nothing at all.
    let h = head("POST", GET, &[]);
    let caller = edge.identify(&h);
    assert_eq!(caller.id.name(), crate::migration::UNKNOWN);
    assert_eq!(caller.id.source(), Source::Unknown);
    assert_eq!(&*caller.client.user_agent, "-");
    // The verified certificate, before any header naming the client.
    let mut h = head("POST", GET, &[("x-client-id", "legacy-billing")]);
    h.extensions
        .insert(crate::server::PeerIdentity("spiffe://corp/billing".into()));
    let caller = edge.identify(&h);
    assert_eq!(caller.id.name(), "spiffe://corp/billing");
    assert_eq!(caller.id.source(), Source::Certificate);
    assert_eq!(
        caller.client.client_id.as_deref(),
        Some("spiffe://corp/billing")
    );
}

#[test]
fn a_downgrade_is_decided_by_one_rule() {
    use Reason::*;
    let set = |r: &[Reason]| r.iter().copied().collect::<DowngradeSet>();
    for (to, fallback, dropped, expected) in [
        (Format::Json, false, false, set(&[JsonRequested])),
        (Format::Json, true, false, set(&[AcceptFallback])),
        (
            Format::Json,
            false,
            true,
            set(&[JsonRequested, UnknownFields]),
        ),
        (Format::Msgpack, false, true, set(&[UnknownFields])),
        (Format::Msgpack, true, false, set(&[])),
        (Format::Protobuf, false, false, set(&[])),
    ] {
        assert_eq!(
            account::reasons(to, fallback, dropped),
            expected,
            "{to:?} fallback {fallback} dropped {dropped}"
        );
    }
    assert_eq!(account::Names(set(&[])).to_string(), "");
    assert_eq!(
        account::Names(set(&[UnknownFields, JsonRequested, JsonDeprecated])).to_string(),
        "json_requested,unknown_fields,json_deprecated"
    );
}

#[tokio::test]
async fn the_request_set_joins_the_answer_and_the_sunset_verdict() {
    let edge = edge(EdgeConfig::default());
    let h = head("POST", GET, &[]);
    let method = edge.schema.methods().next().expect("a method");
    let mut ctx = edge.begin(&h);
    assert_eq!(
        account::request_downgrades(&ctx),
        DowngradeSet::default(),
        "no plan, no downgrade"
    );
    ctx.method = Some(method);
    ctx.plan = Some(Plan {
        request: Format::Json,
        body_type: Some(Format::Json),
        in_framing: None,
        response: Format::Json,
        out_framing: None,
        fallback: false,
        deadline: None,
        enveloped_request: false,
        message_coding: None,
    });
    ctx.noted.verdict = Verdict::Deprecated;
    ctx.noted.dropped.push(transcode::UnknownField {
        number: 7,
        path: String::new(),
    });
    let expected: DowngradeSet = [
        Reason::JsonRequested,
        Reason::UnknownFields,
        Reason::JsonDeprecated,
    ]
    .into_iter()
    .collect();
    assert_eq!(account::request_downgrades(&ctx), expected);
    // Every outcome carries it: the one a request whose client left is recorded with too.
    assert_eq!(ctx.outcome(StatusCode::OK, Code::Ok).downgrades, expected);
}

#[tokio::test]
async fn every_refusal_is_a_status_in_the_error_form_and_is_recorded() {
    let mut config = with_client_header();
    config.cors = Some(crate::cors::CorsConfig {
        allow_origins: vec!["https://app.example".into()],
        ..Default::default()
    });
    // The upstream (nothing listens) then makes `/readyz` unready.
    config.readyz_requires = crate::ReadyzRequires::AllUpstreams;
    let edge = edge(config);

    // An own endpoint refusing a method: google.rpc.Status, Allow, a request id, counted.
    let (a, body) = handle(&edge, "POST", "/healthz", &[], "").await;
    assert_eq!(a.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(a.headers()[header::ALLOW], "GET, HEAD");
    assert_eq!(a.headers()[header::CONTENT_TYPE], "application/json");
    assert_eq!(a.headers()["grpc-status"], "12");
    assert!(a.headers().contains_key(X_REQUEST_ID));
    let status: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(status["code"], 12, "{body}");
    assert_eq!(
        status["message"], "path /healthz accepts GET, HEAD only",
        "{body}"
    );
    assert_eq!(requests(&edge, "unknown", 405), 1.0);

    // Its success is not one of the API's requests, nor in flight: a scrape does not see
    // itself.
    let (a, body) = handle(&edge, "GET", "/healthz", &[], "").await;
    assert_eq!((a.status(), body.as_str()), (StatusCode::OK, "ok\n"));
    assert_eq!(requests(&edge, "unknown", 200), 0.0);
    // Nor is an unready /readyz (its 503 is an answer, not a refusal).
    let (a, body) = handle(&edge, "GET", "/readyz", &[], "").await;
    assert_eq!(a.status(), StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(requests(&edge, "unknown", 503), 0.0);
    let (_, metrics) = handle(&edge, "GET", "/metrics", &[], "").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "protogate_requests_in_flight 0"),
        "{metrics}"
    );

    // A preflight from an origin not allowed: 403, in the format Accept asks for.
    let preflight = [
        ("origin", "https://evil.example"),
        ("access-control-request-method", "POST"),
        ("accept", "application/msgpack"),
    ];
    let (a, body) = handle(&edge, "OPTIONS", GET, &preflight, "").await;
    assert_eq!(a.status(), StatusCode::FORBIDDEN);
    assert_eq!(a.headers()[header::CONTENT_TYPE], "application/msgpack");
    assert_eq!(a.headers()["grpc-status"], "7");
    assert!(!body.is_empty());
    assert_eq!(requests(&edge, "unknown", 403), 1.0);
    // From an allowed one: 204 with the CORS headers, not counted.
    let allowed = [
        ("origin", "https://app.example"),
        ("access-control-request-method", "POST"),
    ];
    let (a, _) = handle(&edge, "OPTIONS", GET, &allowed, "").await;
    assert_eq!(a.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        a.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://app.example"
    );
    // As before the pipeline: the negotiation's Vary and CORS's, once each.
    let vary: Vec<_> = a.headers().get_all(header::VARY).iter().collect();
    assert_eq!(vary, ["Accept", "Origin"]);
    assert_eq!(requests(&edge, "unknown", 204), 0.0);

    // A path that names no method.
    let (a, body) = handle(&edge, "GET", "/nothing", &[], "").await;
    assert_eq!(a.status(), StatusCode::NOT_FOUND);
    assert!(
        body.contains("no method or HTTP rule for GET /nothing"),
        "{body}"
    );
    assert_eq!(requests(&edge, "unknown", 404), 1.0);

    // A bad body, ended before any upstream call: the migration report names the client
    // by the configured header, as the logs do.
    let json = [
        ("content-type", "application/json"),
        ("x-app", "billing"),
        ("user-agent", "okhttp/4.12.0"),
    ];
    let (a, body) = handle(&edge, "POST", GET, &json, r#"{"nope": 1}"#).await;
    assert_eq!(a.status(), StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("nope"), "{body}");
    assert_eq!(requests(&edge, "t.v1.Svc/Get", 400), 1.0);
    let report = edge
        .migration
        .report(&edge.sunset, None, std::time::SystemTime::now());
    let report = crate::migration::render_json(&report);
    assert!(report.contains("\"billing\""), "{report}");
    assert!(!report.contains("okhttp\""), "{report}");
}

#[tokio::test]
async fn the_admin_listener_answers_what_it_does_not_serve_as_a_status() {
    let edge = edge(EdgeConfig {
        admin_listener: true,
        ..EdgeConfig::default()
    });
    let req = Request::get("/nothing").body(()).expect("request");
    let (parts, body) = edge.clone().handle_admin(req).await.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    assert_eq!(parts.status, StatusCode::NOT_FOUND);
    assert_eq!(parts.headers["grpc-status"], "5");
    let status: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("/healthz") && m.contains("/admin/schema")),
        "{status}"
    );
    assert_eq!(requests(&edge, "unknown", 404), 1.0);
    // Its endpoints answer as before, uncounted.
    let req = Request::get("/healthz").body(()).expect("request");
    let answer = edge.clone().handle_admin(req).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(requests(&edge, "unknown", 200), 0.0);
}
