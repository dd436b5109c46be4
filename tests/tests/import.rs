//! `protogate import --envoy`: an Envoy configuration in the shape of its transcoder's
//! documentation, in front of the library backend, imported and served by the real gateway.
//! The answers are what Envoy's options print — json_format's `MessageToJson` with the same
//! options (tests/oracle/render_json.py) — on Envoy's routes: the annotated REST templates
//! and `POST /pkg.Service/Method`.

use protogate_tests::{Http, TempDir, config_from_toml, library, start_resolved};
use serde_json::Value;

use crate::python::python;

/// The Envoy configuration: `{descriptor}` and `{port}` filled in by the test.
const ENVOY: &str = r#"
static_resources:
  listeners:
  - name: listener1
    address:
      socket_address: {address: 127.0.0.1, port_value: 0}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: grpc_json
          codec_type: AUTO
          route_config:
            name: local_route
            virtual_hosts:
            - name: local_service
              domains: ["*"]
              routes:
              - match: {prefix: "/library.v1.Library"}
                route:
                  cluster: library
                  timeout: 5s
                  retry_policy: {retry_on: unavailable, num_retries: 2}
          http_filters:
          - name: envoy.filters.http.grpc_json_transcoder
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder
              proto_descriptor: "{descriptor}"
              services: ["library.v1.Library"]
              print_options:
                add_whitespace: true
                always_print_primitive_fields: true
                preserve_proto_field_names: true
              auto_mapping: true
              convert_grpc_status: true
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: library
    type: STATIC
    lb_policy: ROUND_ROBIN
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}
    load_assignment:
      cluster_name: library
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {address: 127.0.0.1, port_value: {port}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_envoy_configuration_serves_what_envoy_would() {
    let test = "an_imported_envoy_configuration_serves_what_envoy_would";
    let Some(py) = python(test, "google.protobuf") else {
        return;
    };
    let (backend, _) = library::start().await;
    let dir = TempDir::new("import-envoy");
    let set = dir.write("library.pb", library::schema().to_descriptor_set());
    let envoy = ENVOY
        .replace("{descriptor}", &set.display().to_string())
        .replace("{port}", &backend.addr.port().to_string());
    let imported = protogate::import::envoy::import(&envoy).unwrap();
    let text = imported.render("envoy.yaml");
    // What the route and cluster said, as keys.
    let t: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        t["upstream"].as_str(),
        Some(&*format!("http://{}", backend.addr))
    );
    assert_eq!(t["upstream_timeout"].as_str(), Some("5s"));
    assert_eq!(t["consecutive_failures"].as_integer(), Some(0));
    let retry = &t["services"]["library.v1.Library"]["retry"];
    assert_eq!(retry["attempts"].as_integer(), Some(3), "{text}");

    let resolved = config_from_toml(&text, dir.path());
    let (gw, _) = start_resolved(library::schema(), resolved);
    let http = Http::h1();
    // Envoy's routes: a REST binding with a body, a `**` template, the gRPC path.
    let body = r#"{"parent":"shelves/1","pageSize":3,"genres":["FICTION"]}"#;
    let asks: [(&str, &str, Option<&str>); 3] = [
        ("POST", "/v1/echo", Some(body)),
        ("GET", "/v1/echo/shelves/1/drafts?pageSize=3", None),
        ("POST", "/library.v1.Library/Echo", Some(body)),
    ];
    let mut cases = String::new();
    let mut ours = Vec::new();
    for (method, path, body) in asks {
        let send = |accept: &'static str| {
            let request = http::Request::builder()
                .method(method)
                .uri(format!("http://{}{path}", gw.addr))
                .header("content-type", "application/json")
                .header("accept", accept)
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    body.unwrap_or("").to_owned(),
                )))
                .unwrap();
            http.send(request)
        };
        let json = send("application/json").await;
        assert_eq!(json.status, 200, "{method} {path}: {:?}", json.body);
        let pb = send("application/x-protobuf").await;
        assert_eq!(pb.status, 200, "{method} {path}: {:?}", pb.body);
        use base64::Engine as _;
        let case = serde_json::json!({
            "message": "library.v1.ListBooksRequest",
            "proto": base64::engine::general_purpose::STANDARD.encode(&pb.body),
            "emit_unpopulated": true,
            "use_proto_names": true,
            "enums_as_ints": false,
            "indent": 2,
        });
        cases.push_str(&format!("{case}\n"));
        ours.push((
            format!("{method} {path}"),
            String::from_utf8(json.body.to_vec()).unwrap(),
        ));
    }
    let theirs = crate::json_options::json_format(&py, &set, cases);
    assert_eq!(theirs.len(), ours.len());
    for ((what, ours), theirs) in ours.iter().zip(&theirs) {
        let (a, b): (Value, Value) = (
            serde_json::from_str(ours).unwrap(),
            serde_json::from_str(theirs).unwrap(),
        );
        assert_eq!(a, b, "{what}:\nours   {ours}\ntheirs {theirs}");
        // Printed with Envoy's add_whitespace: two spaces a level, as json_format.
        assert!(ours.contains("\n  \"page_size\": 3"), "{what}: {ours}");
    }
    // convert_grpc_status: an error is a google.rpc.Status body.
    let missing = http.get(gw.addr, "/v1/shelves/1/books/missing").await;
    assert_eq!(missing.status, 404, "{:?}", missing.body);
    assert_eq!(missing.json()["code"], 5);
}
