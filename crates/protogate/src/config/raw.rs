//! The raw layer: the TOML file as written, before any flag is applied or any value checked
//! against another. Every table refuses keys it does not know, and relative paths are made
//! relative to the file's directory. `parse_duration` (from `crate::duration`, re-exported
//! here) reads the durations of flags and keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use crate::cli::LogFormat;
pub use crate::duration::parse_duration;

/// The TOML file: the serve flags' settings plus per-service upstreams.
///
/// ```toml
/// listen = "127.0.0.1:8080"
/// admin_listen = "127.0.0.1:9090"            # the admin endpoints here instead (--admin-listen)
/// upstream = "http://127.0.0.1:50051"        # default for every service; or a list of URLs
/// dns_refresh = "5s"                         # upstream host names resolved again this often
/// health_check = false                       # grpc.health.v1 checks of every upstream
/// health_interval = "5s"
/// descriptor_sets = ["api.pb"]               # or:
/// protos = ["shop/v1/shop.proto"]
/// includes = ["proto"]
/// schema_source = "files"                    # or "reflection": the upstreams' server
///                                            #   reflection, asked again every schema_refresh
///                                            #   (default "60s")
/// max_body_bytes = 4194304
/// max_response_bytes = 67108864
/// upstream_timeout = "30s"
/// retry_budget = 0.2                         # retries: at most this share of calls (10 s)
/// consecutive_failures = 5                   # UNAVAILABLE/INTERNAL in a row: ejected
/// strict_accept = false
/// log_format = "text"                        # or "json"
/// downgrade_log_interval = "60s"
/// downgrade_log_max_lines = 100              # in all, per interval
/// header_read_timeout = "10s"
/// body_read_timeout = "30s"
/// max_header_bytes = 16384
/// max_stream_bytes = 67108864                # a client stream's whole body
/// max_concurrent_requests = 4096             # in flight in all; more are 503
/// max_concurrent_requests_per_upstream = 1000  # default: no limit of its own
/// max_inflight_bytes = 268435456             # request bodies (and answers) held
/// max_concurrent_streams = 250               # per HTTP/2 connection
/// max_connections = 10000                    # the longest-idle one closed for a new one
/// idle_timeout = "90s"                       # no request in flight: closed (h2: GOAWAY)
/// drain_delay = "5s"                         # after SIGTERM: /readyz 503, still serving
/// access_log = false                         # one INFO line per request
/// upstream_compression = "none"              # "gzip": requests to upstreams compressed
/// client_id_header = "x-app-name"            # names clients after x-client-id
/// worker_threads = 0                         # 0: one per CPU (single-threaded when one)
/// unknown_query_parameters = "reject"        # or "ignore"
/// readyz_requires = "none"                   # or "any-upstream", "all-upstreams"
/// openapi_path = "/openapi.json"             # where the OpenAPI document is; "" for nowhere
/// forward_headers = ["x-tenant", "x-feature-*"]   # client headers sent upstream (REST)
/// forward_response_headers = ["x-ratelimit-*"]    # upstream metadata answered as is (REST)
/// trusted_proxies = ["10.0.0.0/8"]           # whose X-Forwarded-* are believed
/// path_templates = "spec"                    # or "envoy": templates as Envoy's transcoder
///
/// ca = "tls/upstream-ca.pem"                 # https:// upstreams: their CA (default: the
/// client_cert = "tls/gateway.pem"            #   system's roots), the gateway's client
/// client_key = "tls/gateway.key"             #   certificate (mTLS), and the name their
/// server_name = "shop.internal"              #   certificate must carry (default: the host)
///
/// [json]                                     # how JSON answers are rendered
/// emit_unpopulated = false                   # true: fields at their defaults too (0, "", [])
/// use_proto_names = false                    # true: user_id, not userId
/// enums_as_ints = false                      # true: enum values as numbers
/// indent = 0                                 # spaces per level; 0: compact
/// stream = "array"                           # JSON answer streams: "array", "ndjson", "sse"
///
/// [cors]                                     # absent: no CORS headers
/// allow_origins = ["https://app.example.com", "https://*.example.com"]
/// allow_headers = ["content-type", "authorization"]   # default: the usual request headers
/// expose_headers = ["x-served-by"]           # besides grpc-status/-message, x-request-id
/// allow_credentials = false                  #   and the answer's grpc-metadata-* headers
/// max_age = "10m"
///
/// [compression]                              # answers compressed by Accept-Encoding
/// enabled = true                             # with the section; without it: off
/// min_bytes = 1024                           # whole answers below stay as they are
/// algorithms = ["zstd", "br", "gzip", "deflate"]   # offered, best first
/// level = "default"                          # "fastest", "best", or a number
/// protobuf = false                           # compress protobuf answers too
///
/// [migration]
/// max_clients = 1000                         # (method, client) rows in the migration report
/// export_clients = 50                        # clients per method with Prometheus series
/// export_unverified = true                   # default: true unless [auth] or client_ca is set
/// fleet_prometheus = "http://prometheus:9090" # the page shows the fleet from there
///
/// [[json_sunset]]                            # ending JSON, per method, service or package
/// selector = "demo.shop.v1.Shop.*"
/// deprecation = "2027-01-01T00:00:00Z"       # JSON answers carry Deprecation from then on
/// sunset = "2027-06-30T00:00:00Z"            # Sunset header; after it JSON is refused
/// link = "https://wiki.example/protobuf-migration"
/// brownouts = ["2027-05-01T10:00:00Z/PT1H"]  # windows where JSON is refused already
/// exempt_clients = ["legacy-billing"]           # verified identities (mTLS, tokens, keys)
/// exempt_unverified = false                  # true: x-client-id names count too
///
/// [auth]                                     # who may call: bearer tokens, API keys
/// jwks_file = "jwks.json"                    # the token keys (re-read when it changes), or:
/// # jwks_url = "https://idp.example.com/.well-known/jwks.json"
/// # jwks_refresh = "5m"                      # fetched again this often
/// # jwks_ca = "tls/idp-ca.pem"               # default: the system's roots
/// issuer = "https://idp.example.com/"
/// audiences = ["protogate"]
/// leeway = "60s"
/// client_claim = "sub"                       # names the client
/// forward_claims = { tenant = "x-tenant" }   # claim → metadata header upstream
/// required = false                           # true: no credentials, 401
/// api_key_header = "x-api-key"
/// identity_header = "x-protogate-client"     # the verified client, sent upstream
/// token_cache = 4096                         # verified tokens kept (0: none)
/// forward_token = false                      # true: a verified token goes on upstream
/// [[auth.api_keys]]
/// client = "billing-legacy"
/// sha256 = "c1d91a32657cef85a2805dab9d0984628abaeb7de20109d9d212c1fc861ef013"
/// [[auth.rules]]
/// selector = "grpc.health.v1.*"
/// required = false
///
/// [rate_limit]                               # per client: verified name, else address
/// per_client = 100                           # requests a second
/// burst = 200                                # default: per_client
/// max_clients = 100000                       # buckets kept
/// redis = "redis://127.0.0.1:6379"           # one budget for the fleet (rediss://: TLS, ca)
/// redis_timeout = "20ms"                     # slower: this replica's own budget decides
/// [[rate_limit.rules]]
/// selector = "demo.shop.v1.Shop.PlaceOrder"
/// per_client = 5
///
/// [otel]                                     # OpenTelemetry export (built with --features otel)
/// endpoint = "http://127.0.0.1:4317"         # an OTLP/gRPC collector
/// service_name = "protogate"
/// sample_ratio = 1.0                         # of new traces; a client's sampled flag is followed
///
/// [tls]                                      # TLS on the listener (or --tls-cert/--tls-key)
/// cert = "tls/server.pem"                    # PEM chain, re-read when it changes
/// key = "tls/server.key"                     # PEM private key (PKCS#8, PKCS#1 or SEC1)
/// client_ca = "tls/clients-ca.pem"           # ask clients for certificates from this CA
/// client_auth = "required"                   # or "optional"
///
/// [services."demo.shop.v1.Shop"]
/// upstream = ["https://shop-a.internal:8443", "https://shop-b.internal:8443"]
/// health_check = true                        # Health/Check for "demo.shop.v1.Shop"
/// reflect = false                            # true: its schema from its server reflection
///                                            # ca, client_cert, client_key, server_name
/// ca = "tls/shop-ca.pem"                     #   here override the top level's
/// timeout = "10s"                            # its calls' deadline cap (over upstream_timeout)
/// retry = { codes = ["UNAVAILABLE"], attempts = 3, backoff = "25ms", max_backoff = "250ms" }
/// [services."demo.shop.v1.Shop".json]        # [json] keys for this service's answers
/// use_proto_names = true
/// [services."demo.shop.v1.Shop.ListOrders"]  # one method's: timeout, retry and json only
/// timeout = "2s"
/// retry = { attempts = 2, per_try_timeout = "500ms" }  # over the service's keys
/// [services."demo.shop.v1.Shop.ListOrders".json]
/// stream = "ndjson"
///
/// # google.api.http rules for methods whose protos cannot be annotated; a rule here
/// # replaces the annotations of the method it selects.
/// [[http_rules]]
/// selector = "demo.shop.v1.Shop.GetOrder"
/// get = "/v1/orders/{id}"                    # or put / post / delete / patch,
///                                            # or custom = { kind = "SEARCH", path = "/v1/orders" }
/// body = ""                                  # "*", "" or a top-level field
/// response_body = ""
/// [[http_rules.additional_bindings]]
/// post = "/v1/orders/{id}:get"
/// body = "*"
/// ```
/// Relative paths are relative to the file's directory. The sample is parsed by a test
/// (`raw::tests::the_sample_parses`): a key under the wrong table fails it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub admin_listen: Option<String>,
    pub upstream: Option<Urls>,
    /// Host names of upstreams are resolved again this often (default 5s).
    pub dns_refresh: Option<String>,
    /// Every upstream's endpoints are asked `grpc.health.v1.Health/Check` (a service's own
    /// `health_check` wins), every `health_interval` (default 5s).
    pub health_check: Option<bool>,
    pub health_interval: Option<String>,
    #[serde(default)]
    pub descriptor_sets: Vec<PathBuf>,
    #[serde(default)]
    pub protos: Vec<PathBuf>,
    #[serde(default)]
    pub includes: Vec<PathBuf>,
    /// `reflection`: the schema comes from every upstream's server reflection; `files`
    /// (default): from the files given.
    pub schema_source: Option<SchemaSource>,
    /// How often the reflected schema is asked for again (default 60s).
    pub schema_refresh: Option<String>,
    pub max_body_bytes: Option<usize>,
    pub max_response_bytes: Option<usize>,
    pub upstream_timeout: Option<String>,
    /// The share of calls with a retry policy that may be retries, per upstream over 10 s
    /// (default 0.2).
    pub retry_budget: Option<f64>,
    /// Calls in a row answered UNAVAILABLE or INTERNAL that eject an endpoint (default 5;
    /// 0: never).
    pub consecutive_failures: Option<u32>,
    pub strict_accept: Option<bool>,
    pub log_format: Option<LogFormat>,
    pub downgrade_log_interval: Option<String>,
    pub downgrade_log_max_lines: Option<u64>,
    pub header_read_timeout: Option<String>,
    pub body_read_timeout: Option<String>,
    pub max_header_bytes: Option<usize>,
    pub max_stream_bytes: Option<usize>,
    pub max_concurrent_requests: Option<usize>,
    pub max_concurrent_requests_per_upstream: Option<usize>,
    pub max_inflight_bytes: Option<usize>,
    pub max_concurrent_streams: Option<u32>,
    pub max_connections: Option<usize>,
    pub idle_timeout: Option<String>,
    pub drain_delay: Option<String>,
    pub access_log: Option<bool>,
    pub cors: Option<CorsFileConfig>,
    pub compression: Option<CompressionFileConfig>,
    pub upstream_compression: Option<UpstreamCompression>,
    pub otel: Option<OtelFileConfig>,
    pub client_id_header: Option<String>,
    pub migration: Option<MigrationFileConfig>,
    #[serde(default)]
    pub json_sunset: Vec<SunsetFileRule>,
    pub auth: Option<AuthFileConfig>,
    pub rate_limit: Option<RateLimitFileConfig>,
    pub worker_threads: Option<usize>,
    pub unknown_query_parameters: Option<UnknownQueryConfig>,
    /// What `/readyz` asks of the upstreams (default `none`).
    pub readyz_requires: Option<ReadyzRequiresConfig>,
    /// Where the OpenAPI document is served (default `/openapi.json`; `""`: not served).
    pub openapi_path: Option<String>,
    pub json: Option<JsonFileConfig>,
    #[serde(default)]
    pub forward_headers: Vec<String>,
    #[serde(default)]
    pub forward_response_headers: Vec<String>,
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    pub path_templates: Option<PathTemplatesConfig>,
    pub tls: Option<TlsFileConfig>,
    /// The default TLS settings of `https://` upstreams.
    pub ca: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub server_name: Option<String>,
    #[serde(default)]
    pub services: BTreeMap<String, ServiceConfig>,
    #[serde(default)]
    pub http_rules: Vec<HttpRuleConfig>,
}

/// `[cors]`: CORS for browsers on other origins.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorsFileConfig {
    pub allow_origins: Vec<String>,
    pub allow_headers: Option<Vec<String>>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    #[serde(default)]
    pub allow_credentials: bool,
    pub max_age: Option<String>,
}

/// `[compression]`: answers compressed by `Accept-Encoding`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressionFileConfig {
    pub enabled: Option<bool>,
    pub min_bytes: Option<usize>,
    pub algorithms: Option<Vec<String>>,
    pub level: Option<LevelConfig>,
    pub protobuf: Option<bool>,
}

/// `level = "fastest" | "default" | "best"` or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum LevelConfig {
    Number(u32),
    Name(String),
}

/// `[migration]`: the migration report's bounds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationFileConfig {
    pub max_clients: Option<usize>,
    pub export_clients: Option<usize>,
    pub export_unverified: Option<bool>,
    pub fleet_prometheus: Option<String>,
}

/// One `[[json_sunset]]` rule, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SunsetFileRule {
    pub selector: String,
    pub deprecation: Option<String>,
    pub sunset: Option<String>,
    pub link: Option<String>,
    #[serde(default)]
    pub brownouts: Vec<String>,
    #[serde(default)]
    pub exempt_clients: Vec<String>,
    /// `exempt_clients` match self-declared names too (default: verified identities only).
    pub exempt_unverified: Option<bool>,
}

/// `[auth]`: bearer tokens and API keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFileConfig {
    /// The JWKS the tokens are verified with (re-read when it changes)…
    pub jwks_file: Option<PathBuf>,
    /// …or fetched over https, again every `jwks_refresh` (default 5m), its server's
    /// certificate checked against `jwks_ca` (default: the system's roots).
    pub jwks_url: Option<String>,
    pub jwks_refresh: Option<String>,
    pub jwks_ca: Option<PathBuf>,
    pub issuer: Option<String>,
    #[serde(default)]
    pub audiences: Vec<String>,
    pub leeway: Option<String>,
    pub client_claim: Option<String>,
    /// claim → the metadata header it goes upstream in.
    #[serde(default)]
    pub forward_claims: BTreeMap<String, String>,
    pub required: Option<bool>,
    pub api_key_header: Option<String>,
    #[serde(default)]
    pub api_keys: Vec<ApiKeyFileConfig>,
    #[serde(default)]
    pub rules: Vec<AuthRuleFileConfig>,
    /// The header naming the verified client upstream (default `x-protogate-client`).
    pub identity_header: Option<String>,
    /// Verified tokens kept (default 4096; 0 checks every token's signature every time).
    pub token_cache: Option<usize>,
    /// A verified token goes on upstream in `authorization` (default false).
    pub forward_token: Option<bool>,
}

/// `[[auth.api_keys]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyFileConfig {
    pub client: String,
    pub sha256: String,
}

/// `[[auth.rules]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthRuleFileConfig {
    pub selector: String,
    pub required: bool,
}

/// `[rate_limit]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitFileConfig {
    pub per_client: f64,
    pub burst: Option<u32>,
    pub max_clients: Option<usize>,
    #[serde(default)]
    pub rules: Vec<RateRuleFileConfig>,
    /// `redis://host:port` or `rediss://…`: one budget per client for the whole fleet.
    pub redis: Option<String>,
    /// How long a Redis check may take before the replica's own bucket decides (default 20ms).
    pub redis_timeout: Option<String>,
}

/// `[[rate_limit.rules]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateRuleFileConfig {
    pub selector: String,
    pub per_client: f64,
    pub burst: Option<u32>,
}

/// `[otel]`: OpenTelemetry export.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelFileConfig {
    pub endpoint: String,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
}

/// `upstream_compression`: how request messages travel to upstreams.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamCompression {
    None,
    Gzip,
}

/// `readyz_requires`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadyzRequiresConfig {
    None,
    AnyUpstream,
    AllUpstreams,
}

/// `unknown_query_parameters`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnknownQueryConfig {
    Reject,
    Ignore,
}

/// A google.api.HttpRule in TOML, spelled as in the proto (and in grpc-gateway's YAML).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRuleConfig {
    pub selector: Option<String>,
    pub get: Option<String>,
    pub put: Option<String>,
    pub post: Option<String>,
    pub delete: Option<String>,
    pub patch: Option<String>,
    pub custom: Option<CustomPatternConfig>,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub response_body: String,
    #[serde(default)]
    pub additional_bindings: Vec<HttpRuleConfig>,
}

/// `custom = { kind = "SEARCH", path = "/v1/things" }`: a pattern of another HTTP method.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomPatternConfig {
    pub kind: String,
    pub path: String,
}

/// `[json]`, and `[services.NAME.json]`: how JSON answers are rendered.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonFileConfig {
    pub emit_unpopulated: Option<bool>,
    pub use_proto_names: Option<bool>,
    pub enums_as_ints: Option<bool>,
    pub indent: Option<u8>,
    pub stream: Option<JsonStreamConfig>,
}

/// `path_templates`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathTemplatesConfig {
    Spec,
    Envoy,
}

/// `[json] stream`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonStreamConfig {
    Array,
    Ndjson,
    Sse,
}

/// `[services."pkg.Service"]`: one service's upstream, health checks, schema, TLS, deadline
/// cap, retry policy and JSON rendering; `[services."pkg.Service.Method"]`: one method's
/// deadline cap, retry policy and JSON rendering.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// Default: the top level's.
    pub upstream: Option<Urls>,
    pub health_check: Option<bool>,
    /// This service's schema comes from its upstream's server reflection.
    pub reflect: Option<bool>,
    /// Its TLS settings, over the top level's.
    pub ca: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub server_name: Option<String>,
    /// Cap of the upstream deadline of its calls (default `upstream_timeout`).
    pub timeout: Option<String>,
    pub json: Option<JsonFileConfig>,
    /// Its unary calls' retry policy.
    pub retry: Option<RetryFileConfig>,
}

/// `[services."…"] retry`: gRPC's retryPolicy, with Envoy's per-try timeout.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryFileConfig {
    /// Status codes retried (default `["UNAVAILABLE"]`).
    pub codes: Option<Vec<String>>,
    /// Attempts in all, the first included (default 3; 1: no retry).
    pub attempts: Option<u32>,
    pub backoff: Option<String>,
    pub max_backoff: Option<String>,
    pub per_try_timeout: Option<String>,
}

impl ServiceConfig {
    /// Its TLS files, to be made relative to the file's directory.
    fn tls_paths(&mut self) -> impl Iterator<Item = &mut PathBuf> {
        self.ca
            .iter_mut()
            .chain(self.client_cert.iter_mut())
            .chain(self.client_key.iter_mut())
    }
}

/// `schema_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaSource {
    Files,
    Reflection,
}

/// An upstream: one URL, or a list of them (its endpoints are every address each resolves
/// to).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Urls {
    One(String),
    Many(Vec<String>),
}

/// `[tls]`: TLS on the listener.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFileConfig {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub client_ca: Option<PathBuf>,
    pub client_auth: Option<crate::tls::ClientAuth>,
}

impl FileConfig {
    /// Parses TOML text; `base` is the file's directory, for relative paths.
    pub fn parse(text: &str, base: &Path) -> Result<FileConfig, ConfigError> {
        let mut c: FileConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        let listener_tls = c.tls.iter_mut().flat_map(|t| {
            t.cert
                .iter_mut()
                .chain(t.key.iter_mut())
                .chain(t.client_ca.iter_mut())
        });
        let upstream_tls =
            c.ca.iter_mut()
                .chain(c.client_cert.iter_mut())
                .chain(c.client_key.iter_mut())
                .chain(c.services.values_mut().flat_map(ServiceConfig::tls_paths));
        for p in c
            .descriptor_sets
            .iter_mut()
            .chain(c.protos.iter_mut())
            .chain(c.includes.iter_mut())
            .chain(listener_tls)
            .chain(upstream_tls)
            .chain(
                c.auth
                    .iter_mut()
                    .flat_map(|a| a.jwks_file.iter_mut().chain(a.jwks_ca.iter_mut())),
            )
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(c)
    }
}

/// `text` (a flag's over its key's) as the duration of `key`; `default` without one.
pub(super) fn duration(
    text: Option<&str>,
    key: &str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match text {
        Some(text) => parse_duration(text).map_err(|e| ConfigError(format!("{key} {text:?}: {e}"))),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TOML sample in `FileConfig`'s documentation, as a file's text.
    fn sample() -> String {
        include_str!("raw.rs")
            .lines()
            .skip_while(|l| l.trim() != "/// ```toml")
            .skip(1)
            .take_while(|l| l.trim() != "/// ```")
            .map(|l| {
                let l = l.trim_start().strip_prefix("///").unwrap();
                format!("{}\n", l.strip_prefix(' ').unwrap_or(l))
            })
            .collect()
    }

    /// Every key of the sample is under the table it belongs to (any other table refuses it),
    /// and the sample is a configuration `serve` takes.
    #[test]
    fn the_sample_parses() {
        let text = sample();
        assert!(
            text.starts_with("listen = ") && text.ends_with("body = \"*\"\n"),
            "the sample is not where it was: {text}"
        );
        let mut file = FileConfig::parse(&text, Path::new("/etc/pg"))
            .unwrap_or_else(|e| panic!("the sample: {e}\n{text}"));
        // The top level's keys, wherever they are written.
        assert_eq!(file.worker_threads, Some(0));
        assert_eq!(file.upstream_compression, Some(UpstreamCompression::None));
        assert_eq!(file.client_id_header.as_deref(), Some("x-app-name"));
        assert!(matches!(
            file.unknown_query_parameters,
            Some(UnknownQueryConfig::Reject)
        ));
        assert_eq!(file.ca, Some(PathBuf::from("/etc/pg/tls/upstream-ca.pem")));
        assert_eq!(file.server_name.as_deref(), Some("shop.internal"));
        assert_eq!(
            file.services["demo.shop.v1.Shop"].ca,
            Some(PathBuf::from("/etc/pg/tls/shop-ca.pem"))
        );
        // Resolving opens no file; `[otel]` needs the feature.
        if !cfg!(feature = "otel") {
            file.otel = None;
        }
        let resolved = crate::config::resolve(crate::cli::ServeArgs::default(), file)
            .unwrap_or_else(|e| panic!("the sample: {e}"));
        assert_eq!(resolved.edge.http_rules.len(), 1);
        assert_eq!(resolved.edge.json_sunset.len(), 1);
    }
}
