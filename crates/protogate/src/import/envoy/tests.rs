use super::*;

/// An Envoy configuration in the shape of the transcoder's documentation, with the options
/// the importer reads (and some it cannot carry over).
const FULL: &str = r#"
admin:
  address:
    socket_address: {address: 127.0.0.1, port_value: 9901}
static_resources:
  listeners:
  - name: listener1
    address:
      socket_address: {address: 0.0.0.0, port_value: 51051}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          common_tls_context:
            tls_certificates:
            - certificate_chain: {filename: certs/server.pem}
              private_key: {filename: certs/server.key}
            validation_context:
              trusted_ca: {filename: certs/clients.pem}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: grpc_json
          codec_type: AUTO
          stream_idle_timeout: 300s
          access_log:
          - name: envoy.access_loggers.stdout
          route_config:
            name: local_route
            virtual_hosts:
            - name: local_service
              domains: ["*"]
              routes:
              - match: {path: "/shop.v1.Shop/GetOrder"}
                route:
                  cluster: shop
                  timeout: 2s
                  retry_policy:
                    retry_on: unavailable,resource-exhausted,connect-failure,5xx
                    num_retries: 3
                    per_try_timeout: 0.5s
                    retry_back_off: {base_interval: 0.01s, max_interval: 0.1s}
              - match: {prefix: "/shop.v1.Shop"}
                route: {cluster: shop, timeout: 60s, prefix_rewrite: "/x"}
              - match: {path: "/shop.v1.Shop/ListOrders"}
                route: {cluster: shop, timeout: 9s}
              - match: {prefix: "/billing.v1.Billing"}
                route: {cluster: billing}
          http_filters:
          - name: envoy.filters.http.grpc_web
          - name: envoy.filters.http.cors
          - name: envoy.filters.http.grpc_json_transcoder
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder
              proto_descriptor: "protos/api.pb"
              services: ["shop.v1.Shop", "billing.v1.Billing"]
              print_options:
                add_whitespace: true
                always_print_primitive_fields: true
                always_print_enums_as_ints: true
                preserve_proto_field_names: true
                stream_newline_delimited: true
              auto_mapping: true
              convert_grpc_status: true
              match_incoming_request_route: true
              ignored_query_parameters: ["api_key"]
              max_request_body_size: 1048576
              request_validation_options:
                reject_unknown_method: true
                reject_unknown_query_parameters: true
              case_insensitive_enum_parsing: true
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: shop
    type: STRICT_DNS
    lb_policy: ROUND_ROBIN
    connect_timeout: 0.25s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: shop
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: shop-a.internal, port_value: 50051}}}
        - endpoint: {address: {socket_address: {address: shop-b.internal, port_value: 50051}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: shop.internal
        common_tls_context:
          validation_context: {trusted_ca: {filename: certs/shop-ca.pem}}
    outlier_detection: {consecutive_5xx: 3, interval: 10s}
    health_checks:
    - timeout: 1s
      interval: 2s
      grpc_health_check: {}
    circuit_breakers:
      thresholds:
      - max_requests: 500
        retry_budget: {budget_percent: {value: 25.0}, min_retry_concurrency: 3}
  - name: billing
    type: LOGICAL_DNS
    lb_policy: RING_HASH
    load_assignment:
      cluster_name: billing
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: billing, port_value: 50052}}}
"#;

fn imported(text: &str) -> (Imported, toml::Table) {
    let i = import(text).unwrap_or_else(|e| panic!("{e}"));
    let table = toml::from_str(&i.render("envoy.yaml")).unwrap();
    (i, table)
}

#[test]
fn a_full_configuration_maps_to_keys() {
    let (i, t) = imported(FULL);
    assert_eq!(t["listen"].as_str(), Some("0.0.0.0:51051"));
    assert_eq!(t["admin_listen"].as_str(), Some("127.0.0.1:9901"));
    assert_eq!(t["descriptor_sets"][0].as_str(), Some("protos/api.pb"));
    assert_eq!(t["path_templates"].as_str(), Some("envoy"));
    assert_eq!(t["access_log"].as_bool(), Some(true));
    assert_eq!(t["max_body_bytes"].as_integer(), Some(1_048_576));
    assert_eq!(t["unknown_query_parameters"].as_str(), Some("reject"));
    let json = &t["json"];
    assert_eq!(json["indent"].as_integer(), Some(2));
    assert_eq!(json["emit_unpopulated"].as_bool(), Some(true));
    assert_eq!(json["enums_as_ints"].as_bool(), Some(true));
    assert_eq!(json["use_proto_names"].as_bool(), Some(true));
    assert_eq!(json["stream"].as_str(), Some("ndjson"));
    assert_eq!(t["tls"]["cert"].as_str(), Some("certs/server.pem"));
    assert_eq!(t["tls"]["client_ca"].as_str(), Some("certs/clients.pem"));
    assert_eq!(t["tls"]["client_auth"].as_str(), Some("required"));
    // Two clusters: an upstream per service, each with its cluster's TLS and health check.
    let services = &t["services"];
    let shop = &services["shop.v1.Shop"];
    assert_eq!(
        shop["upstream"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap())
            .collect::<Vec<_>>(),
        [
            "https://shop-a.internal:50051",
            "https://shop-b.internal:50051"
        ]
    );
    assert_eq!(shop["server_name"].as_str(), Some("shop.internal"));
    assert_eq!(shop["ca"].as_str(), Some("certs/shop-ca.pem"));
    assert_eq!(shop["health_check"].as_bool(), Some(true));
    assert_eq!(shop["timeout"].as_str(), Some("60s"));
    let billing = &services["billing.v1.Billing"];
    assert_eq!(billing["upstream"].as_str(), Some("http://billing:50052"));
    // Envoy's default route timeout.
    assert_eq!(billing["timeout"].as_str(), Some("15s"));
    // The method's own route: its timeout and retry policy.
    let get = &services["shop.v1.Shop.GetOrder"];
    assert_eq!(get["timeout"].as_str(), Some("2s"));
    let retry = &get["retry"];
    assert_eq!(retry["attempts"].as_integer(), Some(4));
    assert_eq!(
        retry["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect::<Vec<_>>(),
        ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
    );
    assert_eq!(retry["per_try_timeout"].as_str(), Some("500ms"));
    assert_eq!(retry["backoff"].as_str(), Some("10ms"));
    assert_eq!(retry["max_backoff"].as_str(), Some("100ms"));
    // A method's route after its service's is never taken, by Envoy or here.
    assert!(services.get("shop.v1.Shop.ListOrders").is_none(), "{t:?}");
    // Cluster policies: one of each.
    assert_eq!(t["consecutive_failures"].as_integer(), Some(3));
    assert_eq!(t["health_interval"].as_str(), Some("2s"));
    assert_eq!(
        t["max_concurrent_requests_per_upstream"].as_integer(),
        Some(500)
    );
    assert_eq!(t["retry_budget"].as_float(), Some(0.25));
    // Every option it cannot carry is named.
    for named in [
        "services: protogate serves every service",
        "http_filters envoy.filters.http.cors",
        "match_incoming_request_route",
        "ignored_query_parameters (api_key)",
        "case_insensitive_enum_parsing",
        "retry_on 5xx",
        "route.prefix_rewrite",
        "http_connection_manager.stream_idle_timeout",
        "cluster shop: connect_timeout",
        "outlier_detection.interval",
        "min_retry_concurrency",
        "lb_policy RING_HASH",
    ] {
        assert!(
            i.not_carried.iter().any(|n| n.contains(named)),
            "{named} not named: {:#?}",
            i.not_carried
        );
    }
    for named in [
        "auto_mapping",
        "convert_grpc_status",
        "grpc_web",
        "retry_on connect-failure",
    ] {
        assert!(
            i.built_in.iter().any(|n| n.contains(named)),
            "{named}: {:#?}",
            i.built_in
        );
    }
}

#[test]
fn one_cluster_is_the_top_level_upstream_and_no_outlier_detection_is_none() {
    let (i, t) = imported(include_str!("../../../../../docs/examples/envoy.yaml"));
    assert_eq!(t["upstream"].as_str(), Some("http://127.0.0.1:50051"));
    assert_eq!(t["upstream_timeout"].as_str(), Some("60s"));
    assert_eq!(t["consecutive_failures"].as_integer(), Some(0));
    assert!(t.get("services").is_none(), "{t:?}");
    assert_eq!(t["json"]["indent"].as_integer(), Some(2));
    assert!(i.not_carried.iter().any(|n| n.contains("services:")));
    // protogate reads what it printed.
    crate::check_config(&i.render("envoy.yaml")).unwrap();
    // So it does the full one's (its TLS files aside, which check_config does not open).
    crate::check_config(&import(FULL).unwrap().render("envoy.yaml")).unwrap();
}

#[test]
fn what_cannot_be_imported_is_an_error_naming_it() {
    for (text, says) in [
        ("", "empty"),
        ("a: [", "not YAML"),
        ("dynamic_resources: {}", "no static_resources"),
        (
            "static_resources: {listeners: []}",
            "no envoy.filters.http.grpc_json_transcoder",
        ),
    ] {
        let e = import(text).unwrap_err();
        assert!(e.contains(says), "{text:?}: {e}");
    }
    let no_services = FULL.replace(
        "services: [\"shop.v1.Shop\", \"billing.v1.Billing\"]",
        "services: []",
    );
    assert!(
        import(&no_services)
            .unwrap_err()
            .contains("names no services")
    );
}

#[test]
fn a_retry_count_past_what_protogate_makes_or_no_count_is_named() {
    let huge = FULL.replace("num_retries: 3", "num_retries: 9223372036854775807");
    let (i, t) = imported(&huge);
    let retry = &t["services"]["shop.v1.Shop.GetOrder"]["retry"];
    assert_eq!(retry["attempts"].as_integer(), Some(10));
    assert!(
        i.not_carried
            .iter()
            .any(|n| n.contains("num_retries 9223372036854775807"))
    );
    // A duration Envoy would not read: named, not dropped.
    let (i, _) = imported(&FULL.replace("per_try_timeout: 0.5s", "per_try_timeout: soon"));
    assert!(
        i.not_carried
            .iter()
            .any(|n| n.contains("per_try_timeout") && n.contains("not a duration"))
    );
    // Not a count at all: named, not silently defaulted.
    let (i, t) = imported(&FULL.replace("num_retries: 3", "num_retries: many"));
    let retry = &t["services"]["shop.v1.Shop.GetOrder"]["retry"];
    assert_eq!(retry["attempts"].as_integer(), Some(2));
    assert!(
        i.not_carried
            .iter()
            .any(|n| n.contains("num_retries") && n.contains("not a count"))
    );
}

#[test]
fn durations_as_protogate_writes_them() {
    for (envoy, ours) in [
        ("60s", Some("60s")),
        ("0.25s", Some("250ms")),
        ("1.5s", Some("1500ms")),
        ("0s", Some("0s")),
        ("5m", None),
        ("-1s", None),
    ] {
        assert_eq!(
            duration(&Yaml::String(envoy.into())).as_deref(),
            ours,
            "{envoy}"
        );
    }
}
