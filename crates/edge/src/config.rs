//! [`EdgeConfig`]: the edge's settings, plain data resolved by the binary from its flags and
//! configuration file (the edge reads neither).

use std::time::Duration;

use crate::{coding, cors, migration, server, trace};

/// The edge's settings: plain data, resolved by the binary from flags and the config file.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Largest request body accepted, in bytes (default 4 MiB, gRPC's default message limit).
    pub max_body_bytes: usize,
    /// Largest upstream response accepted, in bytes (default 64 MiB).
    pub max_response_bytes: usize,
    /// Cap on the upstream deadline; a client's `grpc-timeout` / `X-Timeout` can only shorten
    /// it (default 30 s).
    pub upstream_timeout: Duration,
    /// Answer 406 instead of falling back to JSON when Accept names nothing we serve.
    pub strict_accept: bool,
    /// At most one downgrade log line per (method, reason, client) per interval (default 60 s;
    /// zero logs every occurrence).
    pub downgrade_log_interval: Duration,
    /// At most this many downgrade lines in all per interval (default 100), whatever the
    /// number of clients; what is held back is said by one summary line. Not applied when the
    /// interval is zero.
    pub downgrade_log_max_lines: u64,
    /// Time a client has to send its request head (default 10 s).
    pub header_read_timeout: Duration,
    /// Time a client may pause while sending its body (default 30 s).
    pub body_read_timeout: Duration,
    /// Largest request head, in bytes (default 16 KiB; HTTP/1 never below 8 KiB). It is also
    /// the most an HTTP/1.1 connection buffers while reading (hyper's `max_buf_size`), so it
    /// sets the memory of many connections: 64 KiB cost 6 MiB more at 64 connections.
    pub max_header_bytes: usize,
    /// Concurrent streams per HTTP/2 connection (default 250, Go's; Envoy's is 100).
    pub max_concurrent_streams: u32,
    /// Requests in flight in all (default 4,096); more are answered 503 at once.
    pub max_concurrent_requests: usize,
    /// Calls in flight to any one upstream (default: no limit but the one above).
    pub max_concurrent_requests_per_upstream: Option<usize>,
    /// Bytes of request bodies, and of the answers made for them, that requests in flight
    /// may hold (default 256 MiB: 200 concurrent 4 MB bodies peak at 190-270 MiB, BENCHMARKS.md);
    /// a request whose body does not fit is answered 503.
    pub max_inflight_bytes: usize,
    /// A connection with no request in flight for this long is closed (HTTP/2: GOAWAY)
    /// (default 90 s: longer than the 60 s load balancers keep idle connections, so the
    /// balancer, not the gateway, closes first).
    pub idle_timeout: Duration,
    /// Client connections open at once (default 10,000): at the limit the longest-idle one
    /// is closed for a new one, and a new one is refused when none is idle.
    pub max_connections: usize,
    /// Time in-flight requests get to finish after the listeners close (default: the upstream
    /// timeout, so no call that could still succeed is cut).
    pub shutdown_grace: Duration,
    /// After the shutdown signal, how long the gateway keeps accepting and serving while
    /// `/readyz` answers 503, so load balancers stop sending before the listeners close
    /// (default here 0; the binary's is 5 s). HTTP/1.1 answers say `Connection: close` and
    /// HTTP/2 connections get a GOAWAY meanwhile.
    pub drain_delay: Duration,
    /// The admin endpoints (`/healthz`, `/readyz`, `/metrics`, `/admin/migration`,
    /// `/admin/migration.json`, `/admin/schema`) are served on an admin listener of their own
    /// ([`serve_admin`](crate::serve_admin)), not on the main one (default false).
    pub admin_listener: bool,
    /// One INFO line per request (target `protogate::access`): peer, method, path, route,
    /// formats, status, gRPC code, bytes, durations, request id, user agent, client id,
    /// downgrade (default off).
    pub access_log: bool,
    /// CORS for browsers on other origins (default: none, no CORS headers).
    pub cors: Option<cors::CorsConfig>,
    /// Answers compressed by `Accept-Encoding` (default off).
    pub compression: coding::CompressionConfig,
    /// Who still speaks JSON: the bound of the client table, the header naming clients.
    pub migration: migration::MigrationConfig,
    /// JSON sunset rules (`[[json_sunset]]`): deprecation headers, brownouts, refusal.
    pub json_sunset: Vec<migration::SunsetRule>,
    /// Spans of requests and upstream calls, for distributed tracing (default none).
    pub tracer: Option<std::sync::Arc<dyn trace::Tracer>>,
    /// TLS on the main listener (default: none, plain HTTP/1.1 and h2c); the admin listener
    /// stays plain.
    pub tls: Option<server::ListenerTls>,
    /// HTTP rules beside the schema's `google.api.http` annotations; a rule here replaces the
    /// annotations of the method it selects.
    pub http_rules: Vec<transcode::rest::HttpRule>,
    /// Query parameters that name no field: 400 (default) or ignored.
    pub unknown_query: transcode::rest::UnknownQuery,
    /// Largest request stream body (client and bidirectional streaming), over all its
    /// messages; each message is held to `max_body_bytes` (default 64 MiB).
    pub max_stream_bytes: usize,
    /// Where the schema came from, as `protogate_schema_info{source}` names it: `files`
    /// (default), `reflection`, or `files+reflection`.
    pub schema_source: &'static str,
    /// Who may call (`[auth]`: bearer tokens, API keys, where they are required); default
    /// none: every caller is anonymous or self-declared.
    pub auth: Option<crate::auth::AuthConfig>,
    /// Per-client rate limits (`[rate_limit]`); default none.
    pub rate_limit: Option<crate::rate_limit::RateLimitConfig>,
    /// The revision the binary was built from (`protogate_build_info{revision}`; default
    /// "unknown"); the version is the crate's.
    pub revision: &'static str,
    /// Reads the process's own figures for `/metrics` when scraped (the binary's `/proc`
    /// reader); default none: no `process_*` series.
    pub process: Option<fn() -> Option<crate::metrics::Process>>,
    /// Set while the gateway waits for its schema (an upstream's reflection did not answer
    /// at start; why): `/readyz` answers 503 saying so, and a request for a method the
    /// snapshot lacks 503 instead of 404. The binary puts a snapshot without it in force
    /// once the schema is had.
    pub schema_waiting: Option<std::sync::Arc<str>>,
    /// Client headers sent upstream as metadata besides the fixed ones (REST/HTTP calls;
    /// `forward_headers`; default none).
    pub forward_headers: crate::forwarding::HeaderPatterns,
    /// Upstream metadata answered to REST/HTTP clients under its own name rather than as
    /// `grpc-metadata-*` (`forward_response_headers`; default none).
    pub forward_response_headers: crate::forwarding::HeaderPatterns,
    /// Peers whose `X-Forwarded-*` are believed, and through which the client's address is
    /// read from `X-Forwarded-For` (`trusted_proxies`; default none).
    pub trusted_proxies: crate::forwarding::TrustedProxies,
    /// How REST rules' path templates are read and matched (`path_templates`; default the
    /// google.api.http grammar).
    pub path_templates: transcode::rest::Dialect,
    /// Caps of the upstream deadline by service (`pkg.Service`) or method
    /// (`pkg.Service.Method`), over `upstream_timeout` (`[services."…"] timeout`; a method's
    /// wins over its service's).
    pub timeouts: Vec<(String, Duration)>,
    /// Retry policies by service or method (`[services."…"] retry`; a method's keys over its
    /// service's, over the defaults; default none).
    pub retries: Vec<(String, crate::upstream::RetrySettings)>,
    /// How JSON answers are rendered (`[json]` and its overrides; default the canonical
    /// mapping, compact, JSON array streams).
    pub json: crate::json_options::JsonConfig,
    /// Where the main listener serves the OpenAPI document (`openapi_path`; default
    /// `/openapi.json`; `None`: not served, the path is the rules').
    pub openapi_path: Option<String>,
    /// What `/readyz` asks of the upstreams besides the gateway's own readiness (default
    /// none: an upstream down makes its own methods fail, not the replica unready).
    pub readyz_requires: ReadyzRequires,
    /// Told of every request naming a method or path the schema lacks (the binary then
    /// asks the upstreams' reflection for a newer schema, at most once per interval).
    pub unknown_method: Option<std::sync::Arc<tokio::sync::Notify>>,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig {
            max_body_bytes: 4 * 1024 * 1024,
            max_response_bytes: 64 * 1024 * 1024,
            upstream_timeout: Duration::from_secs(30),
            strict_accept: false,
            downgrade_log_interval: Duration::from_secs(60),
            downgrade_log_max_lines: 100,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            max_concurrent_streams: 250,
            max_concurrent_requests: 4096,
            max_concurrent_requests_per_upstream: None,
            max_inflight_bytes: 256 * 1024 * 1024,
            idle_timeout: Duration::from_secs(90),
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(30),
            drain_delay: Duration::ZERO,
            admin_listener: false,
            access_log: false,
            cors: None,
            compression: coding::CompressionConfig::default(),
            tracer: None,
            tls: None,
            migration: migration::MigrationConfig::default(),
            json_sunset: Vec::new(),
            http_rules: Vec::new(),
            unknown_query: transcode::rest::UnknownQuery::Reject,
            max_stream_bytes: 64 * 1024 * 1024,
            schema_source: "files",
            unknown_method: None,
            auth: None,
            rate_limit: None,
            readyz_requires: ReadyzRequires::None,
            revision: "unknown",
            process: None,
            schema_waiting: None,
            openapi_path: Some("/openapi.json".to_owned()),
            json: Default::default(),
            timeouts: Vec::new(),
            retries: Vec::new(),
            path_templates: transcode::rest::Dialect::Spec,
            forward_headers: Default::default(),
            forward_response_headers: Default::default(),
            trusted_proxies: Default::default(),
        }
    }
}

/// `readyz_requires`: whether `/readyz` is 503 when upstreams cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadyzRequires {
    /// Ready whatever the upstreams' state (listed in the body).
    #[default]
    None,
    /// 503 when no upstream is reachable.
    AnyUpstream,
    /// 503 when any upstream is unreachable (the behaviour before the setting existed).
    AllUpstreams,
}
