//! An Envoy configuration's gRPC-JSON transcoder set-up as protogate keys: the
//! `grpc_json_transcoder` filter (descriptor, services, print options, query parameter and
//! validation options), its listener (address, TLS), the routes of its services (cluster,
//! timeout, retry policy) and their clusters (endpoints, TLS, outlier detection, health checks,
//! circuit breakers' retry budget). Only `static_resources` is read: xDS is named as not
//! carried over. The mapping follows docs/coming-from-envoy.md.

use yaml_rust2::{Yaml, YamlLoader};

use super::{Imported, service_table, strings};

const TRANSCODER: &str = "envoy.filters.http.grpc_json_transcoder";

/// The protogate configuration of the Envoy configuration `text` (YAML or JSON).
pub fn import(text: &str) -> Result<Imported, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let root = docs.first().ok_or("the file is empty")?;
    let mut out = Imported::default();
    let resources = get(root, "static_resources")
        .ok_or("no static_resources (a configuration served by xDS cannot be imported)")?;
    for key in ["dynamic_resources", "layered_runtime", "overload_manager"] {
        if get(root, key).is_some() {
            out.not_carried(format!("{key}: protogate has no xDS or runtime layers"));
        }
    }
    // Every transcoder of every listener's connection managers; the first one is imported.
    let mut found = Vec::new();
    for listener in list(get(resources, "listeners")) {
        for chain in list(get(listener, "filter_chains")) {
            for filter in list(get(chain, "filters")) {
                let Some(hcm) = typed(filter, "http_connection_manager", "HttpConnectionManager")
                else {
                    continue;
                };
                for http_filter in list(get(hcm, "http_filters")) {
                    if let Some(t) =
                        typed(http_filter, "grpc_json_transcoder", "GrpcJsonTranscoder")
                    {
                        found.push((listener, chain, hcm, t));
                    }
                }
            }
        }
    }
    let Some(&(listener, chain, hcm, transcoder)) = found.first() else {
        return Err(format!(
            "no {TRANSCODER} filter in static_resources.listeners[].filter_chains[].filters[] (an http_connection_manager's http_filters)"
        ));
    };
    for (other, ..) in found.iter().skip(1) {
        out.not_carried(format!(
            "listener {}: a second transcoder (protogate serves one listener; import each on its own)",
            name_of(other)
        ));
    }
    read_listener(&mut out, listener, chain);
    let services = read_transcoder(&mut out, transcoder)?;
    read_connection_manager(&mut out, hcm);
    let routes = routes_of(&mut out, hcm);
    read_upstreams(&mut out, resources, &services, &routes);
    if let Some(admin) = get(root, "admin") {
        if let Some(addr) = get(admin, "address").and_then(socket_address) {
            out.set("admin_listen", addr);
        }
        out.built_in(
            "admin: protogate's admin endpoints are /healthz, /readyz, /metrics and /admin/* (on admin_listen), not Envoy's",
        );
    }
    Ok(out)
}

// === the listener and its connection manager ===

fn read_listener(out: &mut Imported, listener: &Yaml, chain: &Yaml) {
    if let Some(addr) = get(listener, "address").and_then(socket_address) {
        out.set("listen", addr);
    }
    let Some(tls) =
        get(chain, "transport_socket").and_then(|t| typed(t, "tls", "DownstreamTlsContext"))
    else {
        return;
    };
    let common = get(tls, "common_tls_context");
    let cert = common.and_then(|c| list(get(c, "tls_certificates")).first());
    match cert.map(|c| (file_of(c, "certificate_chain"), file_of(c, "private_key"))) {
        Some((Some(chain), Some(key))) => {
            out.set_in("tls", "cert", chain);
            out.set_in("tls", "key", key);
        }
        _ => out.not_carried(
            "the listener's TLS certificate: only certificate_chain and private_key given as filename are read (inline_string, SDS: write them to files)",
        ),
    }
    if let Some(ca) = common
        .and_then(|c| get(c, "validation_context"))
        .and_then(|v| file_of(v, "trusted_ca"))
    {
        out.set_in("tls", "client_ca", ca);
        let required = get(tls, "require_client_certificate").and_then(Yaml::as_bool) == Some(true);
        out.set_in(
            "tls",
            "client_auth",
            if required { "required" } else { "optional" },
        );
    }
}

fn read_connection_manager(out: &mut Imported, hcm: &Yaml) {
    for filter in list(get(hcm, "http_filters")) {
        let name = name_of(filter);
        let kind = |s: &str| name.contains(s) || type_of(filter).is_some_and(|t| t.contains(s));
        if kind("grpc_json_transcoder")
            || kind("GrpcJsonTranscoder")
            || kind("router")
            || kind("Router")
        {
            continue;
        }
        if kind("grpc_web") || kind("GrpcWeb") {
            out.built_in(format!(
                "http_filters {name}: gRPC-Web is served on the same listener"
            ));
        } else if kind("cors") || kind("Cors") {
            out.not_carried(format!(
                "http_filters {name}: write the policy as [cors] (docs/configuration.md)"
            ));
        } else if kind("jwt_authn") || kind("JwtAuthentication") {
            out.not_carried(format!(
                "http_filters {name}: write the providers as [auth] (docs/auth.md)"
            ));
        } else if kind("ratelimit") || kind("RateLimit") {
            out.not_carried(format!(
                "http_filters {name}: write the limits as [rate_limit] (docs/auth.md)"
            ));
        } else {
            out.not_carried(format!("http_filters {name}"));
        }
    }
    if get(hcm, "access_log").is_some() {
        out.set("access_log", true);
    }
    for key in keys(hcm) {
        if !matches!(
            key,
            "@type"
                | "stat_prefix"
                | "codec_type"
                | "route_config"
                | "rds"
                | "http_filters"
                | "access_log"
        ) {
            out.not_carried(format!("http_connection_manager.{key}"));
        }
    }
}

// === the transcoder ===

/// Reads the filter's options; its services.
fn read_transcoder(out: &mut Imported, t: &Yaml) -> Result<Vec<String>, String> {
    match (get(t, "proto_descriptor").and_then(Yaml::as_str), get(t, "proto_descriptor_bin")) {
        (Some(path), _) => out.set("descriptor_sets", strings(&[path])),
        (None, Some(_)) => out.not_carried(
            "proto_descriptor_bin: write the descriptor set to a file (base64 -d) and name it in descriptor_sets",
        ),
        (None, None) => return Err(format!("the {TRANSCODER} filter has no proto_descriptor")),
    }
    let services: Vec<String> = list(get(t, "services"))
        .iter()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    if services.is_empty() {
        return Err(format!("the {TRANSCODER} filter names no services"));
    }
    out.not_carried(format!(
        "services: protogate serves every service of its schema, not only {}",
        services.join(", ")
    ));
    // Templates as Envoy's path matcher reads them.
    out.set("path_templates", "envoy");
    if let Some(p) = get(t, "print_options") {
        let flag = |key| get(p, key).and_then(Yaml::as_bool) == Some(true);
        if flag("add_whitespace") {
            out.set_in("json", "indent", 2);
        }
        if flag("always_print_primitive_fields") {
            out.set_in("json", "emit_unpopulated", true);
        }
        if flag("always_print_enums_as_ints") {
            out.set_in("json", "enums_as_ints", true);
        }
        if flag("preserve_proto_field_names") {
            out.set_in("json", "use_proto_names", true);
        }
        if flag("stream_newline_delimited") {
            out.set_in("json", "stream", "ndjson");
        }
        if flag("stream_sse_style_delimited") {
            out.set_in("json", "stream", "sse");
        }
        for key in keys(p) {
            if !matches!(
                key,
                "add_whitespace"
                    | "always_print_primitive_fields"
                    | "always_print_enums_as_ints"
                    | "preserve_proto_field_names"
                    | "stream_newline_delimited"
                    | "stream_sse_style_delimited"
            ) {
                out.not_carried(format!("print_options.{key}"));
            }
        }
    }
    let flag = |key| get(t, key).and_then(Yaml::as_bool);
    if flag("ignore_unknown_query_parameters") == Some(true) {
        out.set("unknown_query_parameters", "ignore");
    }
    let ignored: Vec<&str> = list(get(t, "ignored_query_parameters"))
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    if !ignored.is_empty() && flag("ignore_unknown_query_parameters") != Some(true) {
        out.not_carried(format!(
            "ignored_query_parameters ({}): protogate refuses a query parameter naming no field (400) unless unknown_query_parameters = \"ignore\", which ignores every such parameter",
            ignored.join(", ")
        ));
    }
    if flag("auto_mapping") == Some(true) {
        out.built_in("auto_mapping: POST /pkg.Service/Method is served for every method");
    }
    if flag("convert_grpc_status") == Some(true) {
        out.built_in(
            "convert_grpc_status: errors are google.rpc.Status bodies in the answer's format",
        );
    }
    if flag("match_incoming_request_route") == Some(true) {
        out.not_carried(
            "match_incoming_request_route: protogate routes a transcoded call by its gRPC method, as Envoy does without it",
        );
    }
    if let Some(v) = get(t, "request_validation_options") {
        let flag = |key| get(v, key).and_then(Yaml::as_bool) == Some(true);
        if flag("reject_unknown_method") {
            out.built_in(
                "request_validation_options.reject_unknown_method: an unknown path is 404",
            );
        } else {
            out.built_in(
                "request_validation_options: protogate never passes a request it cannot map to the upstream (unknown path: 404)",
            );
        }
        if flag("reject_unknown_query_parameters") {
            out.set("unknown_query_parameters", "reject");
        }
        if flag("reject_binding_body_field_collisions") {
            out.not_carried("request_validation_options.reject_binding_body_field_collisions");
        }
    }
    if let Some(n) = get(t, "max_request_body_size").and_then(number) {
        out.set("max_body_bytes", n as i64);
    }
    if let Some(n) = get(t, "max_response_body_size").and_then(number) {
        out.set("max_response_bytes", n as i64);
    }
    for key in [
        "case_insensitive_enum_parsing",
        "query_param_unescape_plus",
        "match_unregistered_custom_verb",
        "capture_unknown_query_parameters",
    ] {
        if flag(key) == Some(true) {
            out.not_carried(key);
        }
    }
    if let Some(spec) = get(t, "url_unescape_spec").and_then(Yaml::as_str)
        && spec != "ALL_CHARACTERS_EXCEPT_RESERVED"
    {
        out.not_carried(format!(
            "url_unescape_spec: {spec} (protogate decodes as the default)"
        ));
    }
    for key in keys(t) {
        if !matches!(
            key,
            "@type"
                | "proto_descriptor"
                | "proto_descriptor_bin"
                | "services"
                | "print_options"
                | "ignore_unknown_query_parameters"
                | "ignored_query_parameters"
                | "auto_mapping"
                | "convert_grpc_status"
                | "match_incoming_request_route"
                | "request_validation_options"
                | "max_request_body_size"
                | "max_response_body_size"
                | "case_insensitive_enum_parsing"
                | "query_param_unescape_plus"
                | "match_unregistered_custom_verb"
                | "capture_unknown_query_parameters"
                | "url_unescape_spec"
        ) {
            out.not_carried(format!("{TRANSCODER}.{key}"));
        }
    }
    Ok(services)
}

// === routes ===

/// What a route says for the calls it takes.
#[derive(Clone, Debug)]
struct Route {
    /// The gRPC path prefix or path it matches.
    prefix: String,
    exact: bool,
    cluster: Option<String>,
    timeout: Option<String>,
    retry: Option<toml::Value>,
}

/// The routes of the connection manager's inline route configuration, in order.
fn routes_of(out: &mut Imported, hcm: &Yaml) -> Vec<Route> {
    if get(hcm, "rds").is_some() {
        out.not_carried("rds: routes from a route discovery service are not read (each service goes to the first cluster)");
    }
    let mut routes = Vec::new();
    for vhost in list(get(hcm, "route_config").and_then(|r| get(r, "virtual_hosts"))) {
        let vhost_retry = get(vhost, "retry_policy");
        for route in list(get(vhost, "routes")) {
            let Some(m) = get(route, "match") else {
                continue;
            };
            let (prefix, exact) = match (
                get(m, "prefix").and_then(Yaml::as_str),
                get(m, "path").and_then(Yaml::as_str),
            ) {
                (Some(p), _) => (p.to_owned(), false),
                (None, Some(p)) => (p.to_owned(), true),
                _ => {
                    out.not_carried(format!(
                        "route {}: only prefix and path matches are read",
                        name_of(route)
                    ));
                    continue;
                }
            };
            for key in keys(m) {
                if !matches!(key, "prefix" | "path" | "grpc") {
                    out.not_carried(format!("route {prefix}: match.{key}"));
                }
            }
            let Some(action) = get(route, "route") else {
                out.not_carried(format!(
                    "route {prefix}: only route actions are read (direct_response, redirect)"
                ));
                continue;
            };
            let name = format!("route {prefix}");
            let retry = get(action, "retry_policy")
                .or(vhost_retry)
                .and_then(|p| retry_policy(out, &name, p));
            if get(action, "weighted_clusters").is_some() {
                out.not_carried(format!(
                    "{name}: weighted_clusters (protogate sends a service to one upstream)"
                ));
            }
            for key in keys(action) {
                if !matches!(
                    key,
                    "cluster" | "timeout" | "retry_policy" | "weighted_clusters"
                ) {
                    out.not_carried(format!("{name}: route.{key}"));
                }
            }
            routes.push(Route {
                prefix,
                exact,
                cluster: get(action, "cluster")
                    .and_then(Yaml::as_str)
                    .map(str::to_owned),
                timeout: duration_at(out, &name, action, "timeout"),
                retry,
            });
        }
    }
    routes
}

/// A route's `retry_policy` as a `retry` inline table (none when it retries no gRPC status).
fn retry_policy(out: &mut Imported, route: &str, p: &Yaml) -> Option<toml::Value> {
    let retry_on = get(p, "retry_on").and_then(Yaml::as_str).unwrap_or("");
    let mut codes = Vec::new();
    for on in retry_on.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match on {
            "cancelled" | "deadline-exceeded" | "internal" | "resource-exhausted" | "unavailable" => {
                codes.push(on.replace('-', "_").to_ascii_uppercase());
            }
            "connect-failure" | "refused-stream" | "reset" | "reset-before-request" => out.built_in(format!(
                "{route}: retry_on {on}: a call that never reached the upstream is sent once more on its own"
            )),
            other => out.not_carried(format!("{route}: retry_on {other} (only gRPC statuses are retried)")),
        }
    }
    for key in keys(p) {
        if !matches!(
            key,
            "retry_on" | "num_retries" | "per_try_timeout" | "retry_back_off"
        ) {
            out.not_carried(format!("{route}: retry_policy.{key}"));
        }
    }
    if codes.is_empty() {
        return None;
    }
    let mut t = toml::Table::new();
    t.insert("codes".into(), strings(&codes));
    // Envoy retries once unless told otherwise.
    let retries = match get(p, "num_retries") {
        None => 1,
        Some(n) => number(n).unwrap_or_else(|| {
            out.not_carried(format!(
                "{route}: num_retries {n:?} is not a count (Envoy's default, 1, taken)"
            ));
            1
        }),
    };
    let attempts = retries.saturating_add(1);
    t.insert(
        "attempts".into(),
        toml::Value::Integer(attempts.min(10) as i64),
    );
    if attempts > 10 {
        out.not_carried(format!(
            "{route}: num_retries {retries} (protogate makes 10 attempts at most)"
        ));
    }
    if let Some(d) = duration_at(out, route, p, "per_try_timeout") {
        t.insert("per_try_timeout".into(), d.into());
    }
    if let Some(b) = get(p, "retry_back_off") {
        if let Some(d) = duration_at(out, route, b, "base_interval") {
            t.insert("backoff".into(), d.into());
        }
        if let Some(d) = duration_at(out, route, b, "max_interval") {
            t.insert("max_backoff".into(), d.into());
        }
    }
    Some(toml::Value::Table(t))
}

// === upstreams ===

/// One cluster as protogate keys: its URLs and TLS files.
#[derive(Debug, PartialEq)]
struct Upstream {
    urls: Vec<String>,
    tls: Vec<(&'static str, String)>,
    health_check: bool,
}

/// Each service's route and cluster: `[services."…"]` tables, or top-level keys when every
/// service goes to one cluster with one timeout.
fn read_upstreams(out: &mut Imported, resources: &Yaml, services: &[String], routes: &[Route]) {
    let clusters = list(get(resources, "clusters"));
    let cluster = |name: &str| clusters.iter().find(|c| name_of(c) == name);
    // A service's route: one matching the whole service (`/pkg.Service/` or shorter).
    let mut chosen: Vec<(&String, Option<&Route>)> = Vec::new();
    for service in services {
        let at = routes
            .iter()
            .position(|r| !r.exact && format!("/{service}/").starts_with(&r.prefix));
        let route = at.map(|at| &routes[at]);
        if route.is_none() {
            out.not_carried(format!("service {service}: no route takes its calls"));
        }
        chosen.push((service, route));
        // Routes of single methods inside the service before the service's own (Envoy takes
        // the first route that matches: one after it is never taken).
        for r in &routes[..at.unwrap_or(routes.len())] {
            let Some(method) = r.prefix.strip_prefix(&format!("/{service}/")) else {
                continue;
            };
            if method.is_empty() || method.contains('/') {
                continue;
            }
            let table = service_table(&format!("{service}.{method}"));
            if let Some(t) = &r.timeout {
                out.set_in(&table, "timeout", t.as_str());
            }
            if let Some(retry) = &r.retry {
                out.set_in(&table, "retry", retry.clone());
            }
            if r.cluster != route.and_then(|r| r.cluster.clone()) {
                out.not_carried(format!(
                    "route {}: one method to another cluster (protogate sends a service to one upstream)",
                    r.prefix
                ));
            }
        }
    }
    let mut made: Vec<(&String, Option<Upstream>, &Yaml)> = Vec::new();
    let null = &Yaml::Null;
    for (service, route) in &chosen {
        let named = route.and_then(|r| r.cluster.as_deref());
        let Some(c) = named.and_then(cluster) else {
            if let Some(name) = named {
                out.not_carried(format!("cluster {name}: not in static_resources.clusters"));
            }
            made.push((service, None, null));
            continue;
        };
        made.push((service, upstream_of(out, c), c));
    }
    // One cluster for every service: the top level's upstream.
    let first = made.first().and_then(|(_, u, _)| u.as_ref());
    let shared = first.is_some() && made.iter().all(|(_, u, _)| u.as_ref() == first);
    // Envoy's route timeout is 15 s when the route gives none; 0s turns it off.
    let timeouts: Vec<String> = chosen
        .iter()
        .map(|(_, r)| {
            r.and_then(|r| r.timeout.clone())
                .unwrap_or_else(|| "15s".into())
        })
        .collect();
    let same = timeouts.iter().all(|t| *t == timeouts[0]);
    for (((service, upstream, _), (_, route)), timeout) in made.iter().zip(&chosen).zip(&timeouts) {
        let table = service_table(service);
        if let Some(u) = upstream.as_ref().filter(|_| !shared) {
            put_upstream(out, Some(&table), u);
        }
        if timeout == "0s" {
            out.not_carried(format!(
                "service {service}: a route timeout of 0s (none): protogate caps every call's deadline (upstream_timeout)"
            ));
        } else if !same {
            out.set_in(&table, "timeout", timeout.as_str());
        }
        if let Some(retry) = route.and_then(|r| r.retry.clone()) {
            out.set_in(&table, "retry", retry);
        }
    }
    if same && timeouts[0] != "0s" {
        out.set("upstream_timeout", timeouts[0].as_str());
    }
    if let (true, Some(u)) = (shared, first) {
        put_upstream(out, None, u);
    }
    read_cluster_policies(
        out,
        &made
            .iter()
            .map(|(_, _, c)| *c)
            .filter(|c| !c.is_null())
            .collect::<Vec<_>>(),
    );
}

fn put_upstream(out: &mut Imported, table: Option<&str>, u: &Upstream) {
    let urls = if u.urls.len() == 1 {
        toml::Value::String(u.urls[0].clone())
    } else {
        strings(&u.urls)
    };
    let mut set = |key: &str, value: toml::Value| match table {
        Some(t) => out.set_in(t, key, value),
        None => out.set(key, value),
    };
    set("upstream", urls);
    for (key, value) in &u.tls {
        set(key, value.as_str().into());
    }
    if u.health_check {
        set("health_check", true.into());
    }
}

/// A cluster's endpoints and TLS.
fn upstream_of(out: &mut Imported, c: &Yaml) -> Option<Upstream> {
    let name = name_of(c);
    let mut addresses = Vec::new();
    for group in list(get(c, "load_assignment").and_then(|l| get(l, "endpoints"))) {
        for e in list(get(group, "lb_endpoints")) {
            if let Some(a) = get(e, "endpoint")
                .and_then(|e| get(e, "address"))
                .and_then(socket_address)
            {
                addresses.push(a);
            }
        }
    }
    for h in list(get(c, "hosts")) {
        if let Some(a) = socket_address(h) {
            addresses.push(a);
        }
    }
    if let Some(kind) = get(c, "type").and_then(Yaml::as_str)
        && kind == "EDS"
    {
        out.not_carried(format!(
            "cluster {name}: endpoints from EDS (write the upstream's URLs)"
        ));
    }
    if addresses.is_empty() {
        out.not_carried(format!(
            "cluster {name}: no endpoint address in load_assignment"
        ));
        return None;
    }
    let mut tls = Vec::new();
    let secure = get(c, "transport_socket").and_then(|t| typed(t, "tls", "UpstreamTlsContext"));
    if let Some(t) = secure {
        if let Some(sni) = get(t, "sni").and_then(Yaml::as_str) {
            tls.push(("server_name", sni.to_owned()));
        }
        let common = get(t, "common_tls_context");
        if let Some(ca) = common
            .and_then(|c| get(c, "validation_context"))
            .and_then(|v| file_of(v, "trusted_ca"))
        {
            tls.push(("ca", ca));
        }
        let cert = common.and_then(|c| list(get(c, "tls_certificates")).first());
        if let Some((Some(chain), Some(key))) =
            cert.map(|c| (file_of(c, "certificate_chain"), file_of(c, "private_key")))
        {
            tls.push(("client_cert", chain));
            tls.push(("client_key", key));
        }
    }
    let scheme = if secure.is_some() { "https" } else { "http" };
    let health_check = list(get(c, "health_checks"))
        .iter()
        .any(|h| get(h, "grpc_health_check").is_some());
    Some(Upstream {
        urls: addresses
            .iter()
            .map(|a| format!("{scheme}://{a}"))
            .collect(),
        tls,
        health_check,
    })
}

/// Outlier detection, health-check interval, DNS refresh, circuit breakers and retry budget
/// of the clusters in use: protogate has one of each (the first cluster's, the others named
/// when they differ).
fn read_cluster_policies(out: &mut Imported, clusters: &[&Yaml]) {
    let mut seen = Vec::new();
    for c in clusters {
        if seen.iter().any(|s: &&Yaml| std::ptr::eq(*s, *c)) {
            continue;
        }
        seen.push(c);
    }
    let once = |out: &mut Imported, key: &str, value: toml::Value, what: &str| match out.get(key) {
        Some(v) if *v != value => out.not_carried(format!(
            "{what}: {value} beside {v} (protogate has one {key})"
        )),
        Some(_) => {}
        None => out.set(key, value),
    };
    let mut detecting = false;
    for c in &seen {
        let name = name_of(c);
        if let Some(o) = get(c, "outlier_detection") {
            detecting = true;
            // Envoy's default is 5 when the block is there.
            let n = get(o, "consecutive_5xx").and_then(number).unwrap_or(5);
            once(
                out,
                "consecutive_failures",
                (n as i64).into(),
                &format!("cluster {name}: outlier_detection.consecutive_5xx"),
            );
            for key in keys(o) {
                if key != "consecutive_5xx" {
                    out.not_carried(format!("cluster {name}: outlier_detection.{key}"));
                }
            }
        }
        for h in list(get(c, "health_checks")) {
            if get(h, "grpc_health_check").is_none() {
                out.not_carried(format!(
                    "cluster {name}: a health check that is not grpc_health_check"
                ));
            } else if let Some(i) = duration_at(out, &format!("cluster {name}"), h, "interval") {
                once(
                    out,
                    "health_interval",
                    i.into(),
                    &format!("cluster {name}: health_checks.interval"),
                );
            }
        }
        if let Some(d) = duration_at(out, &format!("cluster {name}"), c, "dns_refresh_rate") {
            once(
                out,
                "dns_refresh",
                d.into(),
                &format!("cluster {name}: dns_refresh_rate"),
            );
        }
        if let Some(policy) = get(c, "lb_policy").and_then(Yaml::as_str)
            && !matches!(policy, "ROUND_ROBIN" | "LEAST_REQUEST" | "RANDOM")
        {
            out.not_carried(format!(
                "cluster {name}: lb_policy {policy} (protogate balances by power of two choices)"
            ));
        }
        if get(c, "connect_timeout").is_some() {
            out.not_carried(format!(
                "cluster {name}: connect_timeout (protogate dials within 5 s)"
            ));
        }
        for t in list(get(c, "circuit_breakers").and_then(|b| get(b, "thresholds"))) {
            if let Some(n) = get(t, "max_requests").and_then(number) {
                once(
                    out,
                    "max_concurrent_requests_per_upstream",
                    (n as i64).into(),
                    &format!("cluster {name}: circuit_breakers max_requests"),
                );
            }
            if let Some(b) = get(t, "retry_budget") {
                let percent = get(b, "budget_percent")
                    .and_then(|p| get(p, "value").or(Some(p)))
                    .and_then(real)
                    .unwrap_or(20.0);
                once(
                    out,
                    "retry_budget",
                    (percent / 100.0).into(),
                    &format!("cluster {name}: retry_budget"),
                );
                if get(b, "min_retry_concurrency").is_some() {
                    out.not_carried(format!("cluster {name}: retry_budget.min_retry_concurrency (protogate allows 10 retries per 10 s whatever the share)"));
                }
            }
        }
    }
    // Without outlier detection Envoy ejects nothing for its answers.
    if !detecting && !seen.is_empty() {
        out.set("consecutive_failures", 0);
    }
}

// === YAML ===

/// `y[key]`, none when absent or null.
fn get<'a>(y: &'a Yaml, key: &str) -> Option<&'a Yaml> {
    match &y[key] {
        Yaml::BadValue | Yaml::Null => None,
        v => Some(v),
    }
}

fn list(y: Option<&Yaml>) -> &[Yaml] {
    y.and_then(Yaml::as_vec).map_or(&[], Vec::as_slice)
}

fn keys(y: &Yaml) -> Vec<&str> {
    y.as_hash()
        .map(|h| h.keys().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

fn name_of(y: &Yaml) -> &str {
    get(y, "name").and_then(Yaml::as_str).unwrap_or("(unnamed)")
}

fn type_of(y: &Yaml) -> Option<&str> {
    get(y, "typed_config")
        .and_then(|t| get(t, "@type"))
        .and_then(Yaml::as_str)
}

/// The `typed_config` of a filter or socket named `…name…` or typed `…type_name`.
fn typed<'a>(y: &'a Yaml, name: &str, type_name: &str) -> Option<&'a Yaml> {
    let by_name = get(y, "name")
        .and_then(Yaml::as_str)
        .is_some_and(|n| n.ends_with(name));
    let by_type = type_of(y).is_some_and(|t| t.ends_with(&format!(".{type_name}")));
    (by_name || by_type)
        .then(|| get(y, "typed_config"))
        .flatten()
}

/// A `socket_address` (under `address` or itself) as `host:port`.
fn socket_address(y: &Yaml) -> Option<String> {
    let s = get(y, "socket_address").unwrap_or(y);
    let host = get(s, "address").and_then(Yaml::as_str)?;
    let port = get(s, "port_value").and_then(number)?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// A data source's `filename`.
fn file_of(y: &Yaml, key: &str) -> Option<String> {
    get(y, key)
        .and_then(|d| get(d, "filename"))
        .and_then(Yaml::as_str)
        .map(str::to_owned)
}

/// An unsigned number, also as a string or a wrapper's `{value: n}`.
fn number(y: &Yaml) -> Option<u64> {
    match y {
        Yaml::Integer(n) => u64::try_from(*n).ok(),
        Yaml::String(s) => s.trim().parse().ok(),
        Yaml::Hash(_) => get(y, "value").and_then(number),
        _ => None,
    }
}

fn real(y: &Yaml) -> Option<f64> {
    match y {
        Yaml::Real(s) | Yaml::String(s) => s.trim().parse().ok(),
        Yaml::Integer(n) => Some(*n as f64),
        _ => None,
    }
}

/// `y[key]` as a duration; one that is not a protobuf JSON duration is named as not carried
/// over (`what`: where it is), never silently dropped.
fn duration_at(out: &mut Imported, what: &str, y: &Yaml, key: &str) -> Option<String> {
    let value = get(y, key)?;
    let d = duration(value);
    if d.is_none() {
        out.not_carried(format!(
            "{what}: {key} {value:?} is not a duration as Envoy writes one (\"1.5s\")"
        ));
    }
    d
}

/// A protobuf JSON duration (`"60s"`, `"0.25s"`) as protogate writes one (`60s`, `250ms`).
fn duration(y: &Yaml) -> Option<String> {
    let text = y.as_str()?.trim();
    let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Some(if seconds.fract() == 0.0 {
        format!("{}s", seconds as u64)
    } else {
        format!("{}ms", (seconds * 1000.0).round() as u64)
    })
}

#[cfg(test)]
mod tests;
