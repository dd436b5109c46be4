//! Configuration: raw flags and TOML, resolved into the edge's settings before any port opens.
//! Flags override the file; unknown keys in the file are errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cli::{LogFormat, SchemaArgs, ServeArgs};
use crate::listen::Listen;
use crate::tls::{ListenerFiles, UpstreamFiles};

/// A configuration that cannot be used; the process exits with code 64.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The TOML file: the serve flags' settings plus per-service upstreams.
///
/// ```toml
/// listen = "127.0.0.1:8080"
/// admin_listen = "127.0.0.1:9090"             # /healthz, /readyz, /metrics here instead
/// upstream = "http://127.0.0.1:50051"        # default for every service; or a list of URLs
/// dns_refresh = "5s"                         # upstream host names resolved again this often
/// health_check = false                       # grpc.health.v1 checks of every upstream
/// health_interval = "5s"
/// descriptor_sets = ["api.pb"]               # or:
/// protos = ["shop/v1/shop.proto"]
/// includes = ["proto"]
/// max_body_bytes = 4194304
/// max_response_bytes = 67108864
/// upstream_timeout = "30s"
/// strict_accept = false
/// log_format = "text"                        # or "json"
/// downgrade_log_interval = "60s"
/// downgrade_log_max_lines = 100                # in all, per interval
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
/// upstream_compression = "none"              # "gzip": requests to upstreams compressed
///
/// client_id_header = "x-app-name"            # names clients after x-client-id
///
/// [migration]
/// max_clients = 1000                         # (method, client) rows in the migration report
///
/// [[json_sunset]]                            # ending JSON, per method, service or package
/// selector = "demo.shop.v1.Shop.*"
/// deprecation = "2027-01-01T00:00:00Z"       # JSON answers carry Deprecation from then on
/// sunset = "2027-06-30T00:00:00Z"            # Sunset header; after it JSON is refused
/// link = "https://wiki.example/protobuf-migration"
/// brownouts = ["2027-05-01T10:00:00Z/PT1H"]  # windows where JSON is refused already
/// exempt_clients = ["legacy-billing"]
///
/// [otel]                                     # OpenTelemetry export (built with --features otel)
/// endpoint = "http://127.0.0.1:4317"         # an OTLP/gRPC collector
/// service_name = "protogate"
/// sample_ratio = 1.0                         # of new traces; a client's sampled flag is followed
/// worker_threads = 0                         # 0: one per CPU (single-threaded when one)
/// unknown_query_parameters = "reject"        # or "ignore"
///
/// [tls]                                      # TLS on the listener (or --tls-cert/--tls-key)
/// cert = "tls/server.pem"                    # PEM chain, re-read when it changes
/// key = "tls/server.key"                     # PEM private key (PKCS#8, PKCS#1 or SEC1)
/// client_ca = "tls/clients-ca.pem"           # ask clients for certificates from this CA
/// client_auth = "required"                   # or "optional"
///
/// ca = "tls/upstream-ca.pem"                 # https:// upstreams: their CA (default: the
/// client_cert = "tls/gateway.pem"            #   system's roots), the gateway's client
/// client_key = "tls/gateway.key"             #   certificate (mTLS), and the name their
/// server_name = "shop.internal"              #   certificate must carry (default: the host)
///
/// [services."demo.shop.v1.Shop"]
/// upstream = ["https://shop-a.internal:8443", "https://shop-b.internal:8443"]
/// health_check = true                        # Health/Check for "demo.shop.v1.Shop"
///                                            # ca, client_cert, client_key, server_name
/// ca = "tls/shop-ca.pem"                     #   here override the top level's
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
/// Relative paths are relative to the file's directory.
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
    pub worker_threads: Option<usize>,
    pub unknown_query_parameters: Option<UnknownQueryConfig>,
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
}

impl SunsetFileRule {
    fn resolve(self) -> Result<edge::migration::SunsetRule, ConfigError> {
        use edge::migration::{parse_brownout, parse_time};
        let selector = self.selector;
        let fail = |key: &str, e: &dyn fmt::Display| {
            ConfigError(format!("json_sunset {selector:?}: {key}: {e}"))
        };
        let time = |key: &str, text: Option<String>| {
            text.map(|t| parse_time(&t).map_err(|e| fail(key, &e)))
                .transpose()
        };
        Ok(edge::migration::SunsetRule {
            deprecation: time("deprecation", self.deprecation)?,
            sunset: time("sunset", self.sunset)?,
            link: self.link,
            brownouts: self
                .brownouts
                .iter()
                .map(|b| parse_brownout(b).map_err(|e| fail("brownouts", &e)))
                .collect::<Result<_, _>>()?,
            exempt_clients: self.exempt_clients,
            selector,
        })
    }
}

/// `[otel]`: OpenTelemetry export.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelFileConfig {
    pub endpoint: String,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
}

/// `[otel]` resolved: where spans go.
#[derive(Debug, Clone)]
pub struct OtelConfig {
    /// The OTLP/gRPC collector, `http://host:4317`.
    pub endpoint: String,
    pub service_name: String,
    /// The share of new traces recorded (a client's sampled flag is followed).
    pub sample_ratio: f64,
}

impl OtelFileConfig {
    fn resolve(self) -> Result<OtelConfig, ConfigError> {
        if !cfg!(feature = "otel") {
            return Err(ConfigError(
                "[otel] is set, but this protogate was built without OpenTelemetry export (cargo build --release --features otel)".into(),
            ));
        }
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Err(ConfigError(format!(
                "otel.endpoint {:?} is not an http:// or https:// URL",
                self.endpoint
            )));
        }
        let sample_ratio = self.sample_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&sample_ratio) {
            return Err(ConfigError(format!(
                "otel.sample_ratio {sample_ratio} is not between 0 and 1"
            )));
        }
        Ok(OtelConfig {
            endpoint: self.endpoint,
            service_name: self.service_name.unwrap_or_else(|| "protogate".into()),
            sample_ratio,
        })
    }
}

/// `upstream_compression`: how request messages travel to upstreams.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamCompression {
    None,
    Gzip,
}

impl CompressionFileConfig {
    fn resolve(self) -> Result<edge::coding::CompressionConfig, ConfigError> {
        use edge::coding::{Coding, Level};
        let defaults = edge::coding::CompressionConfig::default();
        let algorithms = match self.algorithms {
            None => defaults.algorithms,
            Some(names) => {
                let mut algorithms = Vec::new();
                for name in names {
                    let coding = Coding::parse(&name).ok_or_else(|| {
                        ConfigError(format!(
                            "compression.algorithms: {name:?} is not one of zstd, br, gzip, deflate"
                        ))
                    })?;
                    if algorithms.contains(&coding) {
                        return Err(ConfigError(format!(
                            "compression.algorithms: {name:?} is listed twice"
                        )));
                    }
                    algorithms.push(coding);
                }
                if algorithms.is_empty() {
                    return Err(ConfigError(
                        "compression.algorithms is empty: set enabled = false instead".into(),
                    ));
                }
                algorithms
            }
        };
        let level = match self.level {
            None => defaults.level,
            Some(LevelConfig::Number(n)) => Level::Precise(n),
            Some(LevelConfig::Name(name)) => match name.as_str() {
                "fastest" => Level::Fastest,
                "default" => Level::Default,
                "best" => Level::Best,
                _ => {
                    return Err(ConfigError(format!(
                        "compression.level: {name:?} is not \"fastest\", \"default\", \"best\" or a number"
                    )));
                }
            },
        };
        Ok(edge::coding::CompressionConfig {
            enabled: self.enabled.unwrap_or(true),
            min_bytes: self.min_bytes.unwrap_or(defaults.min_bytes),
            algorithms,
            level,
            protobuf: self.protobuf.unwrap_or(defaults.protobuf),
        })
    }
}

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomPatternConfig {
    pub kind: String,
    pub path: String,
}

impl HttpRuleConfig {
    fn resolve(self, selector: &str) -> Result<transcode::rest::HttpRule, ConfigError> {
        let mut patterns: Vec<(String, String)> = [
            ("GET", self.get),
            ("PUT", self.put),
            ("POST", self.post),
            ("DELETE", self.delete),
            ("PATCH", self.patch),
        ]
        .into_iter()
        .filter_map(|(m, p)| p.map(|p| (m.to_owned(), p)))
        .collect();
        patterns.extend(self.custom.map(|c| (c.kind, c.path)));
        let (method, path) = match patterns.len() {
            1 => patterns.remove(0),
            n => {
                return Err(ConfigError(format!(
                    "http_rules: the rule for {selector} has {n} patterns; give exactly one of get, put, post, delete, patch or custom"
                )));
            }
        };
        let additional_bindings = self
            .additional_bindings
            .into_iter()
            .map(|b| {
                if b.selector.is_some() {
                    return Err(ConfigError(format!(
                        "http_rules: an additional binding of {selector} cannot have a selector"
                    )));
                }
                b.resolve(selector)
            })
            .collect::<Result<_, _>>()?;
        Ok(transcode::rest::HttpRule {
            selector: selector.to_owned(),
            method,
            path,
            body: self.body,
            response_body: self.response_body,
            additional_bindings,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    pub upstream: Urls,
    pub health_check: Option<bool>,
    /// This service's schema comes from its upstream's server reflection.
    pub reflect: Option<bool>,
    /// Its TLS settings, over the top level's.
    pub ca: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub server_name: Option<String>,
}

impl ServiceConfig {
    fn tls(&self) -> UpstreamFiles {
        UpstreamFiles {
            ca: self.ca.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            server_name: self.server_name.clone(),
        }
    }

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

/// The schema from the upstreams' server reflection: what to ask, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct Reflection {
    /// Every upstream lists its services (`--reflect`, `schema_source = "reflection"`).
    pub all: bool,
    /// Services with `reflect = true`.
    pub services: Vec<String>,
    /// `schema_refresh`.
    pub refresh: Duration,
}

/// The default `schema_refresh`.
const SCHEMA_REFRESH: Duration = Duration::from_secs(60);

/// An upstream: one URL, or a list of them (its endpoints are every address each resolves
/// to).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Urls {
    One(String),
    Many(Vec<String>),
}

impl Urls {
    fn into_vec(self, key: &str) -> Result<Vec<String>, ConfigError> {
        match self {
            Urls::One(url) => Ok(vec![url]),
            Urls::Many(urls) if urls.is_empty() => Err(ConfigError(format!(
                "{key}: an empty list; give at least one URL"
            ))),
            Urls::Many(urls) => Ok(urls),
        }
    }
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

/// The flags over the file they name (`--config`), resolved.
pub fn load(args: ServeArgs) -> Result<Resolved, ConfigError> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?;
            let base = path.parent().unwrap_or(Path::new("."));
            FileConfig::parse(&text, base)
                .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?
        }
        None => FileConfig::default(),
    };
    resolve(args, file)
}

/// Everything `serve` needs, validated.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub listen: Listen,
    /// Where /healthz, /readyz and /metrics are served when not on the main listener.
    pub admin_listen: Option<Listen>,
    /// The default upstream's URLs, and each service's.
    pub default_upstream: Option<Vec<String>>,
    pub service_upstreams: Vec<(String, Vec<String>)>,
    /// Whether the default upstream's endpoints are health-checked, and which services'.
    pub default_health_check: bool,
    pub health_checked: std::collections::BTreeSet<String>,
    /// The TLS settings of `https://` upstreams: the default one's, and each service's
    /// (its own over the top level's).
    pub upstream_tls: UpstreamFiles,
    pub service_upstream_tls: BTreeMap<String, UpstreamFiles>,
    /// TLS on the listener, when a certificate is given.
    pub tls: Option<ListenerFiles>,
    pub schema: SchemaArgs,
    /// The schema (also) from the upstreams' server reflection.
    pub reflection: Option<Reflection>,
    pub log_format: LogFormat,
    pub upstream_options: edge::UpstreamOptions,
    /// OpenTelemetry export, when `[otel]` is set.
    pub otel: Option<OtelConfig>,
    /// Runtime threads; 0 = one per available CPU.
    pub worker_threads: usize,
    pub edge: edge::EdgeConfig,
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
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(c)
    }
}

/// The binary's drain after SIGTERM: long enough for endpoint controllers and load balancers
/// to stop sending (Kubernetes removes a terminating pod's endpoints within a few seconds).
const DRAIN_DELAY: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves flags over the file into the edge's settings.
pub fn resolve(args: ServeArgs, file: FileConfig) -> Result<Resolved, ConfigError> {
    let listen_text = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listen = Listen::parse(&listen_text)?;
    let admin_listen = args
        .admin_listen
        .clone()
        .or(file.admin_listen.clone())
        .map(|text| Listen::parse(&text))
        .transpose()?;
    let default_upstream = match args.upstream {
        Some(url) => Some(vec![url]),
        None => file.upstream.map(|u| u.into_vec("upstream")).transpose()?,
    };
    let default_health_check = file.health_check.unwrap_or(false);
    let mut health_checked = std::collections::BTreeSet::new();
    let upstream_tls = UpstreamFiles {
        ca: file.ca,
        client_cert: file.client_cert,
        client_key: file.client_key,
        server_name: file.server_name,
    };
    let mut service_upstream_tls = BTreeMap::new();
    let mut reflected_services = Vec::new();
    let service_upstreams: Vec<(String, Vec<String>)> = file
        .services
        .into_iter()
        .map(|(name, s)| {
            let own = s.tls();
            let urls = s
                .upstream
                .clone()
                .into_vec(&format!("services.\"{name}\".upstream"))?;
            if !own.is_empty() && !urls.iter().any(|u| u.starts_with("https://")) {
                return Err(ConfigError(format!(
                    "services.\"{name}\": ca, client_cert, client_key and server_name are for https:// upstreams; its upstream is {urls:?}"
                )));
            }
            if s.health_check.unwrap_or(default_health_check) {
                health_checked.insert(name.clone());
            }
            if s.reflect == Some(true) {
                reflected_services.push(name.clone());
            }
            service_upstream_tls.insert(name.clone(), own.over(&upstream_tls));
            Ok((name, urls))
        })
        .collect::<Result<_, ConfigError>>()?;
    let any_https = default_upstream
        .iter()
        .flatten()
        .chain(service_upstreams.iter().flat_map(|(_, u)| u))
        .any(|u| u.starts_with("https://"));
    if !upstream_tls.is_empty() && !any_https {
        return Err(ConfigError(
            "ca, client_cert, client_key and server_name are for https:// upstreams; no upstream is https://".into(),
        ));
    }
    let tls = listener_tls(args.tls_cert, args.tls_key, file.tls)?;
    for uri in default_upstream
        .iter()
        .flatten()
        .chain(service_upstreams.iter().flat_map(|(_, u)| u))
    {
        check_upstream_uri(uri)?;
    }
    if default_upstream.is_none() && service_upstreams.is_empty() {
        return Err(ConfigError(
            "no upstream: pass --upstream URL or set upstream (or services.NAME.upstream) in the config file".into(),
        ));
    }
    // Flags name the schema if they name any part of it; otherwise the file does.
    let schema = if args.schema.descriptor_sets.is_empty() && args.schema.protos.is_empty() {
        SchemaArgs {
            descriptor_sets: file.descriptor_sets,
            protos: file.protos,
            includes: if args.schema.includes.is_empty() {
                file.includes
            } else {
                args.schema.includes
            },
        }
    } else {
        args.schema
    };
    let reflect_all = args
        .reflect
        .unwrap_or(file.schema_source == Some(SchemaSource::Reflection));
    let reflection = if reflect_all || !reflected_services.is_empty() {
        let refresh = match &file.schema_refresh {
            Some(text) => parse_duration(text)
                .map_err(|e| ConfigError(format!("schema_refresh {text:?}: {e}")))?,
            None => SCHEMA_REFRESH,
        };
        let refresh = positive(refresh, "schema_refresh")?;
        Some(Reflection {
            all: reflect_all,
            services: reflected_services,
            refresh,
        })
    } else {
        if file.schema_refresh.is_some() {
            return Err(ConfigError(
                "schema_refresh is for a schema from reflection; set schema_source = \"reflection\" (or --reflect, or a service's reflect = true)".into(),
            ));
        }
        None
    };
    if schema.is_empty() && reflection.is_none() {
        return Err(ConfigError(
            "no schema: pass --descriptor-set FILE or --proto FILE (with -I DIR), or --reflect"
                .into(),
        ));
    }
    let defaults = edge::EdgeConfig::default();
    let upstream_defaults = edge::UpstreamOptions::default();
    let duration =
        |flag: Option<String>, file: Option<String>, name: &str, default: Duration| match flag
            .or(file)
        {
            Some(text) => {
                parse_duration(&text).map_err(|e| ConfigError(format!("{name} {text:?}: {e}")))
            }
            None => Ok(default),
        };
    let upstream_timeout = duration(
        args.upstream_timeout,
        file.upstream_timeout,
        "upstream_timeout",
        defaults.upstream_timeout,
    )?;
    if upstream_timeout.is_zero() {
        return Err(ConfigError(
            "upstream_timeout must be greater than zero".into(),
        ));
    }
    let http_rules = file
        .http_rules
        .into_iter()
        .map(|r| {
            let selector = r.selector.clone().ok_or_else(|| {
                ConfigError("http_rules: every rule needs a selector (pkg.Service.Method)".into())
            })?;
            r.resolve(&selector)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let edge = edge::EdgeConfig {
        max_body_bytes: args
            .max_body_bytes
            .or(file.max_body_bytes)
            .unwrap_or(defaults.max_body_bytes),
        max_response_bytes: file
            .max_response_bytes
            .unwrap_or(defaults.max_response_bytes),
        upstream_timeout,
        strict_accept: args
            .strict_accept
            .or(file.strict_accept)
            .unwrap_or(defaults.strict_accept),
        downgrade_log_interval: duration(
            args.downgrade_log_interval,
            file.downgrade_log_interval,
            "downgrade_log_interval",
            defaults.downgrade_log_interval,
        )?,
        downgrade_log_max_lines: file
            .downgrade_log_max_lines
            .unwrap_or(defaults.downgrade_log_max_lines),
        header_read_timeout: duration(
            None,
            file.header_read_timeout,
            "header_read_timeout",
            defaults.header_read_timeout,
        )?,
        body_read_timeout: duration(
            None,
            file.body_read_timeout,
            "body_read_timeout",
            defaults.body_read_timeout,
        )?,
        max_header_bytes: file.max_header_bytes.unwrap_or(defaults.max_header_bytes),
        max_concurrent_streams: file
            .max_concurrent_streams
            .unwrap_or(defaults.max_concurrent_streams),
        max_concurrent_requests: file
            .max_concurrent_requests
            .unwrap_or(defaults.max_concurrent_requests),
        max_concurrent_requests_per_upstream: file
            .max_concurrent_requests_per_upstream
            .or(defaults.max_concurrent_requests_per_upstream),
        max_inflight_bytes: file
            .max_inflight_bytes
            .unwrap_or(defaults.max_inflight_bytes),
        max_connections: file.max_connections.unwrap_or(defaults.max_connections),
        idle_timeout: duration(
            None,
            file.idle_timeout,
            "idle_timeout",
            defaults.idle_timeout,
        )?,
        shutdown_grace: upstream_timeout,
        drain_delay: duration(None, file.drain_delay, "drain_delay", DRAIN_DELAY)?,
        admin_listener: admin_listen.is_some(),
        access_log: file.access_log.unwrap_or(defaults.access_log),
        cors: file
            .cors
            .map(|c| -> Result<edge::cors::CorsConfig, ConfigError> {
                let defaults = edge::cors::CorsConfig::default();
                Ok(edge::cors::CorsConfig {
                    allow_origins: c.allow_origins,
                    allow_headers: c.allow_headers.unwrap_or(defaults.allow_headers),
                    expose_headers: c.expose_headers,
                    allow_credentials: c.allow_credentials,
                    max_age: c
                        .max_age
                        .map(|age| duration(None, Some(age), "cors.max_age", Duration::ZERO))
                        .transpose()?,
                })
            })
            .transpose()?,
        compression: file
            .compression
            .map(CompressionFileConfig::resolve)
            .transpose()?
            .unwrap_or_default(),
        tracer: None,
        // Loaded by `run` from `Resolved::tls`, which is then watched.
        tls: None,
        migration: edge::migration::MigrationConfig {
            max_clients: file
                .migration
                .as_ref()
                .and_then(|m| m.max_clients)
                .unwrap_or(edge::migration::DEFAULT_MAX_CLIENTS),
            client_id_header: file
                .client_id_header
                .as_deref()
                .map(|h| {
                    http_header_name(h).ok_or_else(|| {
                        ConfigError(format!("client_id_header {h:?} is not a header name"))
                    })
                })
                .transpose()?,
        },
        json_sunset: file
            .json_sunset
            .into_iter()
            .map(SunsetFileRule::resolve)
            .collect::<Result<_, _>>()?,
        http_rules,
        unknown_query: file
            .unknown_query_parameters
            .map_or(defaults.unknown_query, |u| match u {
                UnknownQueryConfig::Ignore => transcode::rest::UnknownQuery::Ignore,
                UnknownQueryConfig::Reject => transcode::rest::UnknownQuery::Reject,
            }),
        max_stream_bytes: file.max_stream_bytes.unwrap_or(defaults.max_stream_bytes),
        schema_source: match (&reflection, schema.is_empty()) {
            (None, _) => "files",
            (Some(_), true) => "reflection",
            (Some(_), false) => "files+reflection",
        },
        // Set by `serve` when the schema comes from reflection.
        unknown_method: None,
    };
    for (key, value) in [
        (
            "max_concurrent_requests",
            Some(edge.max_concurrent_requests),
        ),
        (
            "max_concurrent_requests_per_upstream",
            edge.max_concurrent_requests_per_upstream,
        ),
        (
            "max_concurrent_streams",
            Some(edge.max_concurrent_streams as usize),
        ),
        ("max_connections", Some(edge.max_connections)),
    ] {
        if value == Some(0) {
            return Err(ConfigError(format!(
                "{key} is 0: no request could be served"
            )));
        }
    }
    if edge.idle_timeout.is_zero() {
        return Err(ConfigError(
            "idle_timeout is 0: every connection would close before its first request".into(),
        ));
    }
    if edge.max_inflight_bytes < edge.max_body_bytes {
        return Err(ConfigError(format!(
            "max_inflight_bytes ({}) is below max_body_bytes ({}): a largest request body could never be admitted",
            edge.max_inflight_bytes, edge.max_body_bytes
        )));
    }
    if edge.max_stream_bytes < edge.max_body_bytes {
        return Err(ConfigError(format!(
            "max_stream_bytes ({}) is below max_body_bytes ({}): a request stream could not hold one largest message",
            edge.max_stream_bytes, edge.max_body_bytes
        )));
    }
    Ok(Resolved {
        listen,
        admin_listen,
        default_upstream,
        service_upstreams,
        default_health_check,
        health_checked,
        upstream_tls,
        service_upstream_tls,
        tls,
        schema,
        reflection,
        log_format: args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Text),
        otel: file.otel.map(OtelFileConfig::resolve).transpose()?,
        upstream_options: edge::UpstreamOptions {
            compress_requests: file.upstream_compression == Some(UpstreamCompression::Gzip),
            dns_refresh: positive(
                duration(
                    None,
                    file.dns_refresh,
                    "dns_refresh",
                    upstream_defaults.dns_refresh,
                )?,
                "dns_refresh",
            )?,
            health_interval: positive(
                duration(
                    None,
                    file.health_interval,
                    "health_interval",
                    upstream_defaults.health_interval,
                )?,
                "health_interval",
            )?,
            ..upstream_defaults
        },
        worker_threads: args.worker_threads.or(file.worker_threads).unwrap_or(0),
        edge,
    })
}

/// `value` of `key`, refused below the upstreams' shortest interval (a tiny one would flood
/// the resolver or the upstreams).
fn positive(value: Duration, key: &str) -> Result<Duration, ConfigError> {
    if value < edge::upstream::MIN_INTERVAL {
        return Err(ConfigError(format!(
            "{key}: {value:?} is too short; at least {:?}",
            edge::upstream::MIN_INTERVAL
        )));
    }
    Ok(value)
}

fn check_upstream_uri(uri: &str) -> Result<(), ConfigError> {
    let parsed: http_uri::Uri = uri
        .parse()
        .map_err(|e| ConfigError(format!("upstream {uri:?}: {e}")))?;
    match (parsed.scheme_str(), parsed.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(()),
        _ => Err(ConfigError(format!(
            "upstream {uri:?}: expected http://HOST:PORT (h2c) or https://HOST:PORT (TLS)"
        ))),
    }
}

/// The listener's TLS files: the flags' certificate and key over `[tls]`'s; none without a
/// certificate.
fn listener_tls(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    file: Option<TlsFileConfig>,
) -> Result<Option<ListenerFiles>, ConfigError> {
    let file = file.unwrap_or_default();
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (Some(cert), Some(key)),
        (None, None) => (file.cert, file.key),
        (Some(_), None) => return Err(ConfigError("--tls-cert is given without --tls-key".into())),
        (None, Some(_)) => return Err(ConfigError("--tls-key is given without --tls-cert".into())),
    };
    match (cert, key) {
        (Some(cert), Some(key)) => {
            if file.client_auth.is_some() && file.client_ca.is_none() {
                return Err(ConfigError(
                    "tls.client_auth needs tls.client_ca, the CA client certificates are checked against".into(),
                ));
            }
            Ok(Some(ListenerFiles {
                cert,
                key,
                client_ca: file.client_ca,
                client_auth: file.client_auth.unwrap_or(crate::tls::ClientAuth::Required),
            }))
        }
        (None, None) if file.client_ca.is_none() && file.client_auth.is_none() => Ok(None),
        (None, None) => Err(ConfigError(
            "tls.client_ca and tls.client_auth need a certificate: set tls.cert and tls.key".into(),
        )),
        (Some(_), None) => Err(ConfigError("tls.cert is set without tls.key".into())),
        (None, Some(_)) => Err(ConfigError("tls.key is set without tls.cert".into())),
    }
}

mod http_uri {
    pub use tonic::codegen::http::{HeaderName, Uri};
}

/// A header name as configured (any case; stored lowercase).
fn http_header_name(name: &str) -> Option<http_uri::HeaderName> {
    http_uri::HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes()).ok()
}

/// `500ms`, `2s`, `1.5s`, `5m`, `1h`; a bare number is seconds; `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| "expected a number followed by ms, s, m or h".to_owned())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit {unit:?}; use ms, s, m or h")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err("out of range".to_owned());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> ServeArgs {
        use clap::Parser;
        let mut full = vec!["protogate", "serve"];
        full.extend_from_slice(list);
        match crate::cli::Cli::parse_from(full).command {
            crate::cli::Command::Serve(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("2 days").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn flags_override_the_file() {
        let file = FileConfig::parse(
            r#"
                listen = "127.0.0.1:9000"
                upstream = "http://127.0.0.1:1"
                protos = ["a.proto"]
                includes = ["proto"]
                upstream_timeout = "5s"
                strict_accept = true
                [services."x.v1.S"]
                upstream = "http://127.0.0.1:2"
            "#,
            Path::new("/etc/pg"),
        )
        .unwrap();
        let r = resolve(
            args(&["--listen", "127.0.0.1:0", "--upstream-timeout", "2s"]),
            file,
        )
        .unwrap();
        assert_eq!(r.listen.to_string(), "127.0.0.1:0");
        assert_eq!(r.edge.upstream_timeout, Duration::from_secs(2));
        assert!(r.edge.strict_accept);
        assert_eq!(
            r.default_upstream,
            Some(vec!["http://127.0.0.1:1".to_owned()])
        );
        assert_eq!(
            r.service_upstreams,
            vec![("x.v1.S".to_owned(), vec!["http://127.0.0.1:2".to_owned()])]
        );
        assert_eq!(r.schema.protos, vec![PathBuf::from("/etc/pg/a.proto")]);
        assert_eq!(r.schema.includes, vec![PathBuf::from("/etc/pg/proto")]);
        assert_eq!(r.edge.max_body_bytes, 4 * 1024 * 1024);
    }

    /// Each flag that has a TOML key: the file's value without the flag, the flag's with both.
    #[test]
    fn every_flag_overrides_its_file_key() {
        type View = fn(&Resolved) -> String;
        let cases: &[(&str, &[&str], View, &str, &str)] = &[
            (
                "listen = \"127.0.0.1:9000\"",
                &["--listen", "localhost:9001"],
                |r| r.listen.to_string(),
                "127.0.0.1:9000",
                "localhost:9001",
            ),
            (
                "admin_listen = \"127.0.0.1:9100\"",
                &["--admin-listen", "127.0.0.1:9101"],
                |r| format!("{:?}", r.admin_listen.as_ref().map(|l| l.to_string())),
                "Some(\"127.0.0.1:9100\")",
                "Some(\"127.0.0.1:9101\")",
            ),
            (
                "upstream = \"http://a:1\"",
                &["--upstream", "http://b:2"],
                |r| format!("{:?}", r.default_upstream),
                "Some([\"http://a:1\"])",
                "Some([\"http://b:2\"])",
            ),
            (
                "descriptor_sets = [\"a.pb\"]",
                &["--descriptor-set", "b.pb"],
                |r| format!("{:?}", r.schema.descriptor_sets),
                "[\"/etc/pg/a.pb\"]",
                "[\"b.pb\"]",
            ),
            (
                "protos = [\"a.proto\"]",
                &["--proto", "b.proto"],
                |r| format!("{:?}", r.schema.protos),
                "[\"/etc/pg/a.proto\"]",
                "[\"b.proto\"]",
            ),
            (
                "includes = [\"inc\"]",
                &["-I", "other"],
                |r| format!("{:?}", r.schema.includes),
                "[\"/etc/pg/inc\"]",
                "[\"other\"]",
            ),
            (
                "max_body_bytes = 1000",
                &["--max-body-bytes", "2000"],
                |r| r.edge.max_body_bytes.to_string(),
                "1000",
                "2000",
            ),
            (
                "upstream_timeout = \"5s\"",
                &["--upstream-timeout", "7s"],
                |r| format!("{:?}", r.edge.upstream_timeout),
                "5s",
                "7s",
            ),
            (
                "strict_accept = true",
                &["--strict-accept=false"],
                |r| r.edge.strict_accept.to_string(),
                "true",
                "false",
            ),
            (
                "schema_source = \"reflection\"",
                &["--reflect=false"],
                |r| format!("{:?}", r.reflection.as_ref().map(|r| r.all)),
                "Some(true)",
                "None",
            ),
            (
                "schema_source = \"files\"",
                &["--reflect"],
                |r| format!("{:?}", r.reflection.as_ref().map(|r| (r.all, r.refresh))),
                "None",
                "Some((true, 60s))",
            ),
            (
                "strict_accept = false",
                &["--strict-accept"],
                |r| r.edge.strict_accept.to_string(),
                "false",
                "true",
            ),
            (
                "strict_accept = false",
                &["--strict-accept=true"],
                |r| r.edge.strict_accept.to_string(),
                "false",
                "true",
            ),
            (
                "log_format = \"json\"",
                &["--log-format", "text"],
                |r| format!("{:?}", r.log_format),
                "Json",
                "Text",
            ),
            (
                "downgrade_log_interval = \"5m\"",
                &["--downgrade-log-interval", "0"],
                |r| format!("{:?}", r.edge.downgrade_log_interval),
                "300s",
                "0ns",
            ),
            (
                "worker_threads = 3",
                &["--worker-threads", "1"],
                |r| r.worker_threads.to_string(),
                "3",
                "1",
            ),
            (
                "tls = { cert = \"f.pem\", key = \"f.key\" }",
                &["--tls-cert", "/x.pem", "--tls-key", "/x.key"],
                |r| r.tls.as_ref().unwrap().cert.display().to_string(),
                "/etc/pg/f.pem",
                "/x.pem",
            ),
            (
                "tls = { cert = \"f.pem\", key = \"f.key\" }",
                &["--tls-key", "/x.key", "--tls-cert", "/x.pem"],
                |r| r.tls.as_ref().unwrap().key.display().to_string(),
                "/etc/pg/f.key",
                "/x.key",
            ),
        ];
        for (line, flags, view, from_file, from_flag) in cases {
            let key = line.split(' ').next().unwrap();
            let mut text = String::new();
            if key != "upstream" {
                text += "upstream = \"http://base:1\"\n";
            }
            if key != "protos" && key != "descriptor_sets" {
                text += "protos = [\"base.proto\"]\n";
            }
            text += line;
            let file = || FileConfig::parse(&text, Path::new("/etc/pg")).unwrap();
            let r = resolve(args(&[]), file()).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(view(&r), *from_file, "{line}");
            let r = resolve(args(flags), file()).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
            assert_eq!(view(&r), *from_flag, "{line} {flags:?}");
        }
        // Every serve flag with a value is covered (a new flag needs a case above).
        use clap::CommandFactory;
        let cli = crate::cli::Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        for arg in serve.get_arguments() {
            let long = arg.get_long().unwrap_or_default();
            if long == "config" || long == "help" {
                continue;
            }
            let flag = format!("--{long}");
            let short = arg.get_short().map(|c| format!("-{c}"));
            assert!(
                cases
                    .iter()
                    .any(|(_, flags, ..)| flags[0].split('=').next() == Some(&flag)
                        || Some(flags[0].to_owned()) == short),
                "{flag} has no override case"
            );
        }
        // A bool flag takes only true or false.
        use clap::Parser;
        assert!(
            crate::cli::Cli::try_parse_from(["protogate", "serve", "--strict-accept=yes"]).is_err()
        );
    }

    #[test]
    fn upstreams_take_lists_refresh_and_health_checks() {
        let file = FileConfig::parse(
            r#"
upstream = ["http://a:1", "http://b:2"]
protos = ["x.proto"]
dns_refresh = "250ms"
health_interval = "2s"
[services."x.v1.S"]
upstream = "http://c:3"
health_check = true
[services."x.v1.T"]
upstream = ["http://d:4"]
"#,
            Path::new("/etc/pg"),
        )
        .unwrap();
        let r = resolve(args(&[]), file).unwrap();
        assert_eq!(
            r.default_upstream,
            Some(vec!["http://a:1".to_owned(), "http://b:2".to_owned()])
        );
        assert_eq!(
            r.service_upstreams,
            vec![
                ("x.v1.S".to_owned(), vec!["http://c:3".to_owned()]),
                ("x.v1.T".to_owned(), vec!["http://d:4".to_owned()]),
            ]
        );
        assert!(!r.default_health_check);
        assert_eq!(r.health_checked.iter().collect::<Vec<_>>(), ["x.v1.S"]);
        assert_eq!(r.upstream_options.dns_refresh, Duration::from_millis(250));
        assert_eq!(r.upstream_options.health_interval, Duration::from_secs(2));
        // The top level's health_check is every service's default.
        let file = FileConfig::parse(
            "upstream = \"http://a:1\"\nprotos = [\"x.proto\"]\nhealth_check = true\n[services.\"x.v1.S\"]\nupstream = \"http://c:3\"\n",
            Path::new("/etc/pg"),
        )
        .unwrap();
        let r = resolve(args(&[]), file).unwrap();
        assert!(r.default_health_check);
        assert!(r.health_checked.contains("x.v1.S"));
        for (text, wanted) in [
            ("upstream = []", "upstream: an empty list"),
            ("upstream = [\"ftp://a:1\"]", "expected http://HOST:PORT"),
            (
                "upstream = \"http://a:1\"\ndns_refresh = \"0\"",
                "dns_refresh: 0ns is too short; at least 100ms",
            ),
        ] {
            let text = format!("protos = [\"x.proto\"]\n{text}");
            let e = FileConfig::parse(&text, Path::new("/etc/pg"))
                .and_then(|file| resolve(args(&[]), file))
                .unwrap_err();
            assert!(e.0.contains(wanted), "{text}: {e}");
        }
    }

    #[test]
    fn http_rules_from_the_file() {
        let file = FileConfig::parse(
            r#"
                upstream = "http://127.0.0.1:1"
                protos = ["a.proto"]
                unknown_query_parameters = "ignore"
                [[http_rules]]
                selector = "x.v1.S.Get"
                get = "/v1/things/{id}"
                response_body = "thing"
                [[http_rules.additional_bindings]]
                custom = { kind = "SEARCH", path = "/v1/things" }
                body = "*"
            "#,
            Path::new("."),
        )
        .unwrap();
        let r = resolve(args(&[]), file).unwrap();
        assert_eq!(r.edge.unknown_query, transcode::rest::UnknownQuery::Ignore);
        // The limits of issue 18, from the file.
        let limits = FileConfig::parse(
            r#"
                upstream = "http://127.0.0.1:1"
                protos = ["a.proto"]
                max_concurrent_requests = 10
                max_concurrent_requests_per_upstream = 5
                max_inflight_bytes = 8388608
                max_concurrent_streams = 100
                max_connections = 20
                idle_timeout = "2m"
                drain_delay = "7s"
            "#,
            Path::new("."),
        )
        .and_then(|f| resolve(args(&[]), f))
        .unwrap()
        .edge;
        assert_eq!(limits.drain_delay, std::time::Duration::from_secs(7));
        let bare = FileConfig::parse(
            "upstream = \"http://127.0.0.1:1\"\nprotos = [\"a.proto\"]",
            Path::new("."),
        )
        .unwrap();
        assert_eq!(
            resolve(args(&[]), bare).unwrap().edge.drain_delay,
            DRAIN_DELAY
        );
        assert_eq!(
            (
                limits.max_concurrent_requests,
                limits.max_concurrent_requests_per_upstream,
                limits.max_inflight_bytes,
                limits.max_concurrent_streams,
                limits.max_connections,
                limits.idle_timeout
            ),
            (
                10,
                Some(5),
                8 << 20,
                100,
                20,
                std::time::Duration::from_secs(120)
            )
        );
        let rule = &r.edge.http_rules[0];
        assert_eq!(
            (
                rule.selector.as_str(),
                rule.method.as_str(),
                rule.path.as_str()
            ),
            ("x.v1.S.Get", "GET", "/v1/things/{id}")
        );
        assert_eq!(rule.response_body, "thing");
        let b = &rule.additional_bindings[0];
        assert_eq!(
            (
                b.selector.as_str(),
                b.method.as_str(),
                b.path.as_str(),
                b.body.as_str()
            ),
            ("x.v1.S.Get", "SEARCH", "/v1/things", "*")
        );
        for (toml, want) in [
            ("[[http_rules]]\nget = \"/x\"", "needs a selector"),
            (
                "[[http_rules]]\nselector = \"a.S.M\"\nget = \"/x\"\npost = \"/y\"",
                "2 patterns",
            ),
            ("[[http_rules]]\nselector = \"a.S.M\"", "0 patterns"),
            (
                "unknown_query_parameters = \"drop\"",
                "unknown_query_parameters",
            ),
            (
                "max_stream_bytes = 0",
                "max_stream_bytes (0) is below max_body_bytes",
            ),
            (
                "max_inflight_bytes = 1000",
                "max_inflight_bytes (1000) is below max_body_bytes",
            ),
            (
                "max_concurrent_requests = 0",
                "max_concurrent_requests is 0",
            ),
            (
                "max_concurrent_requests_per_upstream = 0",
                "max_concurrent_requests_per_upstream is 0",
            ),
            ("max_connections = 0", "max_connections is 0"),
            ("max_concurrent_streams = 0", "max_concurrent_streams is 0"),
            ("idle_timeout = \"0s\"", "idle_timeout is 0"),
            ("idle_timeout = \"soon\"", "idle_timeout"),
            (
                "[compression]\nalgorithms = [\"lz4\"]",
                "\"lz4\" is not one of zstd, br, gzip, deflate",
            ),
            (
                "[compression]\nalgorithms = [\"gzip\", \"GZIP\"]",
                "listed twice",
            ),
            ("[compression]\nalgorithms = []", "algorithms is empty"),
            (
                "[compression]\nlevel = \"max\"",
                "compression.level: \"max\"",
            ),
            ("[compression]\nspeed = 1", "speed"),
            ("upstream_compression = \"snappy\"", "upstream_compression"),
        ] {
            let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
            let e = FileConfig::parse(&text, Path::new("."))
                .and_then(|f| resolve(args(&[]), f))
                .unwrap_err();
            assert!(e.0.contains(want), "{toml}: {e}");
        }
    }

    #[test]
    fn compression_settings() {
        use edge::coding::{Coding, Level};
        let resolved = |toml: &str| {
            let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
            resolve(args(&[]), FileConfig::parse(&text, Path::new(".")).unwrap()).unwrap()
        };
        // Absent: off, and requests to upstreams go as they are.
        let r = resolved("");
        assert!(!r.edge.compression.enabled);
        assert!(!r.upstream_options.compress_requests);
        // The section alone turns it on with the defaults.
        let r = resolved("[compression]");
        assert!(r.edge.compression.enabled);
        assert_eq!(r.edge.compression.min_bytes, 1024);
        assert_eq!(r.edge.compression.algorithms, Coding::ALL);
        assert_eq!(r.edge.compression.level, Level::Default);
        assert!(!r.edge.compression.protobuf);
        let r = resolved(
            "upstream_compression = \"gzip\"\n[compression]\nenabled = false\nmin_bytes = 10\nalgorithms = [\"gzip\", \"br\"]\nlevel = 3\nprotobuf = true",
        );
        assert!(!r.edge.compression.enabled);
        assert_eq!(r.edge.compression.min_bytes, 10);
        assert_eq!(r.edge.compression.algorithms, [Coding::Gzip, Coding::Br]);
        assert_eq!(r.edge.compression.level, Level::Precise(3));
        assert!(r.edge.compression.protobuf);
        assert!(r.upstream_options.compress_requests);
        let r = resolved("[compression]\nlevel = \"fastest\"");
        assert_eq!(r.edge.compression.level, Level::Fastest);
    }

    #[test]
    fn otel_needs_the_feature_and_a_url() {
        let resolved = |toml: &str| {
            let text = format!("upstream = \"http://h:1\"\nprotos = [\"a\"]\n{toml}");
            FileConfig::parse(&text, Path::new(".")).and_then(|f| resolve(args(&[]), f))
        };
        let r = resolved("[otel]\nendpoint = \"http://127.0.0.1:4317\"");
        if cfg!(feature = "otel") {
            let otel = r.unwrap().otel.unwrap();
            assert_eq!(otel.service_name, "protogate");
            assert_eq!(otel.sample_ratio, 1.0);
            let e = resolved("[otel]\nendpoint = \"127.0.0.1:4317\"").unwrap_err();
            assert!(e.0.contains("not an http://"), "{e}");
            let e =
                resolved("[otel]\nendpoint = \"http://c:4317\"\nsample_ratio = 2.0").unwrap_err();
            assert!(e.0.contains("sample_ratio"), "{e}");
        } else {
            let e = r.unwrap_err();
            assert!(e.0.contains("--features otel"), "{e}");
        }
        assert!(resolved("").unwrap().otel.is_none());
    }

    #[test]
    fn a_schema_from_reflection_needs_no_file() {
        let resolved = |toml: &str| {
            let text = format!("upstream = \"http://h:1\"\n{toml}");
            resolve(args(&[]), FileConfig::parse(&text, Path::new("."))?)
        };
        let r = resolved("schema_source = \"reflection\"\nschema_refresh = \"5m\"").unwrap();
        assert_eq!(
            r.reflection,
            Some(Reflection {
                all: true,
                services: vec![],
                refresh: Duration::from_secs(300)
            })
        );
        assert_eq!(r.edge.schema_source, "reflection");
        let r = resolved(
            "protos = [\"a\"]\n[services.\"p.S\"]\nupstream = \"http://s:1\"\nreflect = true",
        )
        .unwrap();
        let reflection = r.reflection.unwrap();
        assert!(!reflection.all);
        assert_eq!(reflection.services, ["p.S"]);
        assert_eq!(r.edge.schema_source, "files+reflection");
        let e = resolved("protos = [\"a\"]\nschema_refresh = \"5m\"").unwrap_err();
        assert!(
            e.0.contains("schema_refresh is for a schema from reflection"),
            "{e}"
        );
        let e = resolved("schema_source = \"reflection\"\nschema_refresh = \"1ms\"").unwrap_err();
        assert!(
            e.0.contains("schema_refresh") && e.0.contains("too short"),
            "{e}"
        );
        let e = resolved("schema_source = \"upstream\"").unwrap_err();
        assert!(e.0.contains("files") && e.0.contains("reflection"), "{e}");
    }

    #[test]
    fn bad_configs_are_named() {
        let e = FileConfig::parse("listen = 1\nbogus = true", Path::new(".")).unwrap_err();
        assert!(e.0.contains("listen") || e.0.contains("bogus"), "{e}");
        let e = FileConfig::parse("bogus = true", Path::new(".")).unwrap_err();
        assert!(e.0.contains("bogus"), "{e}");
        let e = resolve(args(&["--descriptor-set", "x.pb"]), FileConfig::default()).unwrap_err();
        assert!(e.0.contains("no upstream"), "{e}");
        let e = resolve(args(&["--upstream", "http://h:1"]), FileConfig::default()).unwrap_err();
        assert!(e.0.contains("no schema"), "{e}");
        let e = resolve(
            args(&["--upstream", "ftp://h:1", "--proto", "a.proto"]),
            FileConfig::default(),
        )
        .unwrap_err();
        assert!(e.0.contains("ftp://"), "{e}");
        let e = resolve(
            args(&[
                "--upstream",
                "http://h:1",
                "--proto",
                "a",
                "--listen",
                "nowhere",
            ]),
            FileConfig::default(),
        )
        .unwrap_err();
        assert!(e.0.contains("--listen"), "{e}");
        let e = resolve(
            args(&[
                "--upstream",
                "http://h:1",
                "--proto",
                "a",
                "--upstream-timeout",
                "soon",
            ]),
            FileConfig::default(),
        )
        .unwrap_err();
        assert!(e.0.contains("upstream_timeout"), "{e}");
    }
}
