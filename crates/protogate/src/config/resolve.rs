//! The resolved layer: the flags over the file, every value checked, turned into the edge's
//! settings. [`resolve`] reads no file and opens no port; [`upstream_specs`] then builds the
//! upstreams as the edge takes them, reading the `https://` upstreams' TLS files.
//!
//! [`resolve`] runs its checks in a fixed order (listeners, upstreams, the listener's TLS, the
//! upstreams' URLs, the schema, the edge's settings, their limits, OpenTelemetry, the upstreams'
//! intervals), so a file with several problems is always refused for the same one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;
use super::raw::{
    CompressionFileConfig, CorsFileConfig, FileConfig, OtelFileConfig, ReadyzRequiresConfig,
    SchemaSource, ServiceConfig, SunsetFileRule, TlsFileConfig, UnknownQueryConfig,
    UpstreamCompression, Urls, duration,
};
use super::tables::{self, OtelConfig};
use crate::cli::{LogFormat, SchemaArgs, ServeArgs};
use crate::listen::Listen;
use crate::tls::{ListenerFiles, UpstreamFiles, UpstreamTlsCache};

/// Everything `serve` needs, validated.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub listen: Listen,
    /// Where the admin endpoints (/healthz, /readyz, /metrics, /admin/migration[.json],
    /// /admin/schema) are served when not on the main listener.
    pub admin_listen: Option<Listen>,
    /// The default upstream's URLs, and each service's.
    pub default_upstream: Option<Vec<String>>,
    pub service_upstreams: Vec<(String, Vec<String>)>,
    /// Whether the default upstream's endpoints are health-checked, and which services'.
    pub default_health_check: bool,
    pub health_checked: BTreeSet<String>,
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
    /// `[auth] jwks_file`: read at each load, watched.
    pub jwks_file: Option<PathBuf>,
    /// `[auth] jwks_url`: fetched by `crate::jwks`, from the start on.
    pub jwks_url: Option<super::JwksSource>,
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

/// The binary's drain after SIGTERM: long enough for endpoint controllers and load balancers
/// to stop sending (Kubernetes removes a terminating pod's endpoints within a few seconds).
pub(super) const DRAIN_DELAY: Duration = Duration::from_secs(5);

/// Resolves flags over the file into the edge's settings.
pub fn resolve(args: ServeArgs, file: FileConfig) -> Result<Resolved, ConfigError> {
    let (listen, admin_listen) = listeners(&args, &file)?;
    let upstreams = Upstreams::resolve(&args, &file)?;
    let tls = listener_tls(
        args.tls_cert.clone(),
        args.tls_key.clone(),
        file.tls.as_ref(),
    )?;
    upstreams.check()?;
    let (schema, reflection) = schema(&args, &file, &upstreams.reflected)?;
    let schema_source = match (&reflection, schema.is_empty()) {
        (None, _) => "files",
        (Some(_), true) => "reflection",
        (Some(_), false) => "files+reflection",
    };
    let edge = edge_config(&args, &file, admin_listen.is_some(), schema_source)?;
    Ok(Resolved {
        listen,
        admin_listen,
        default_upstream: upstreams.default,
        service_upstreams: upstreams.services,
        default_health_check: upstreams.default_health_check,
        health_checked: upstreams.health_checked,
        upstream_tls: upstreams.tls,
        service_upstream_tls: upstreams.service_tls,
        tls,
        schema,
        reflection,
        log_format: args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Text),
        otel: file
            .otel
            .as_ref()
            .map(OtelFileConfig::resolve)
            .transpose()?,
        upstream_options: upstream_options(&file)?,
        worker_threads: args.worker_threads.or(file.worker_threads).unwrap_or(0),
        edge,
        jwks_file: file.auth.as_ref().and_then(|a| a.jwks_file.clone()),
        jwks_url: file
            .auth
            .as_ref()
            .map(super::access::jwks_source)
            .transpose()?
            .flatten(),
    })
}

/// The default upstream and each service's, as the edge builds them.
pub type UpstreamSpecs = (
    Option<edge::UpstreamSpec>,
    Vec<(String, edge::UpstreamSpec)>,
);

/// The upstreams as `serve` and `check` build them: [`upstream_specs`], resolved by the
/// system's resolver (a reload rebuilds from the running ones, `Upstreams::rebuild`, instead).
pub fn build_upstreams(resolved: &Resolved) -> Result<edge::Upstreams, ConfigError> {
    let (default, services) = upstream_specs(resolved)?;
    edge::Upstreams::build(
        default,
        services,
        resolved.edge.max_response_bytes,
        resolved.upstream_options,
        std::sync::Arc::new(edge::SystemResolver),
    )
    .map_err(|e| ConfigError(e.to_string()))
}

/// The upstreams as configured: each `https://` URL with its TLS built from its files, and
/// whether its endpoints are health-checked.
pub fn upstream_specs(resolved: &Resolved) -> Result<UpstreamSpecs, ConfigError> {
    let mut cache = UpstreamTlsCache::default();
    let mut target = |uri: &str, files: &UpstreamFiles| -> Result<edge::Target, ConfigError> {
        let parsed: tonic::codegen::http::Uri = uri
            .parse()
            .map_err(|e| ConfigError(format!("upstream {uri:?}: {e}")))?;
        let tls = match (parsed.scheme_str(), parsed.host()) {
            (Some("https"), Some(host)) => Some(cache.get(uri, host, files)?),
            _ => None,
        };
        Ok(edge::Target {
            uri: uri.to_owned(),
            tls,
        })
    };
    let mut spec = |urls: &[String],
                    files: &UpstreamFiles,
                    health_check: bool|
     -> Result<edge::UpstreamSpec, ConfigError> {
        Ok(edge::UpstreamSpec {
            targets: urls
                .iter()
                .map(|uri| target(uri, files))
                .collect::<Result<_, _>>()?,
            health_check,
        })
    };
    let default = resolved
        .default_upstream
        .as_deref()
        .map(|urls| spec(urls, &resolved.upstream_tls, resolved.default_health_check))
        .transpose()?;
    let services = resolved
        .service_upstreams
        .iter()
        .map(|(service, urls)| {
            let files = resolved
                .service_upstream_tls
                .get(service)
                .unwrap_or(&resolved.upstream_tls);
            let checked = resolved.health_checked.contains(service);
            Ok((service.clone(), spec(urls, files, checked)?))
        })
        .collect::<Result<_, ConfigError>>()?;
    Ok((default, services))
}

/// The main listener (`--listen`, `listen`, else 127.0.0.1:8080) and the admin one.
fn listeners(args: &ServeArgs, file: &FileConfig) -> Result<(Listen, Option<Listen>), ConfigError> {
    let listen = args
        .listen
        .as_deref()
        .or(file.listen.as_deref())
        .unwrap_or("127.0.0.1:8080");
    let listen = Listen::parse(listen)?;
    let admin_listen = args
        .admin_listen
        .as_deref()
        .or(file.admin_listen.as_deref())
        .map(Listen::parse)
        .transpose()?;
    Ok((listen, admin_listen))
}

/// The upstreams: the default one and each service's, with their health checks and TLS.
struct Upstreams {
    default: Option<Vec<String>>,
    services: Vec<(String, Vec<String>)>,
    default_health_check: bool,
    health_checked: BTreeSet<String>,
    /// The top level's TLS settings, and each service's over them.
    tls: UpstreamFiles,
    service_tls: BTreeMap<String, UpstreamFiles>,
    /// Services with `reflect = true`.
    reflected: Vec<String>,
}

impl Upstreams {
    /// `--upstream` over `upstream`, and `[services.NAME]`; TLS settings only where an upstream
    /// is `https://`.
    fn resolve(args: &ServeArgs, file: &FileConfig) -> Result<Upstreams, ConfigError> {
        let default = match &args.upstream {
            Some(url) => Some(vec![url.clone()]),
            None => file
                .upstream
                .clone()
                .map(|u| u.into_vec("upstream"))
                .transpose()?,
        };
        let default_health_check = file.health_check.unwrap_or(false);
        let mut upstreams = Upstreams {
            default,
            services: Vec::new(),
            default_health_check,
            health_checked: BTreeSet::new(),
            tls: UpstreamFiles {
                ca: file.ca.clone(),
                client_cert: file.client_cert.clone(),
                client_key: file.client_key.clone(),
                server_name: file.server_name.clone(),
            },
            service_tls: BTreeMap::new(),
            reflected: Vec::new(),
        };
        for (name, s) in &file.services {
            let own = s.tls();
            let Some(upstream) = s.upstream.clone() else {
                // A table for the JSON rendering, the timeout or the retry policy only: the
                // settings of an upstream need one.
                if !own.is_empty() || s.health_check.is_some() || s.reflect.is_some() {
                    return Err(ConfigError(format!(
                        "services.\"{name}\": ca, client_cert, client_key, server_name, health_check and reflect are settings of its own upstream; it has none (set upstream, or leave them out)"
                    )));
                }
                continue;
            };
            let urls = upstream.into_vec(&format!("services.\"{name}\".upstream"))?;
            if !own.is_empty() && !urls.iter().any(|u| u.starts_with("https://")) {
                return Err(ConfigError(format!(
                    "services.\"{name}\": ca, client_cert, client_key and server_name are for https:// upstreams; its upstream is {urls:?}"
                )));
            }
            if s.health_check.unwrap_or(default_health_check) {
                upstreams.health_checked.insert(name.clone());
            }
            if s.reflect == Some(true) {
                upstreams.reflected.push(name.clone());
            }
            upstreams
                .service_tls
                .insert(name.clone(), own.over(&upstreams.tls));
            upstreams.services.push((name.clone(), urls));
        }
        if !upstreams.tls.is_empty() && !upstreams.urls().any(|u| u.starts_with("https://")) {
            return Err(ConfigError(
                "ca, client_cert, client_key and server_name are for https:// upstreams; no upstream is https://".into(),
            ));
        }
        Ok(upstreams)
    }

    /// Every upstream URL, the default one's first.
    fn urls(&self) -> impl Iterator<Item = &String> {
        self.default
            .iter()
            .flatten()
            .chain(self.services.iter().flat_map(|(_, u)| u))
    }

    /// Every URL is `http(s)://HOST:PORT`, and there is at least one.
    fn check(&self) -> Result<(), ConfigError> {
        for uri in self.urls() {
            check_upstream_uri(uri)?;
        }
        if self.default.is_none() && self.services.is_empty() {
            return Err(ConfigError(
                "no upstream: pass --upstream URL or set upstream (or services.NAME.upstream) in the config file".into(),
            ));
        }
        Ok(())
    }
}

impl ServiceConfig {
    /// Its own TLS settings.
    fn tls(&self) -> UpstreamFiles {
        UpstreamFiles {
            ca: self.ca.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
            server_name: self.server_name.clone(),
        }
    }
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

fn check_upstream_uri(uri: &str) -> Result<(), ConfigError> {
    let parsed: tonic::codegen::http::Uri = uri
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
    file: Option<&TlsFileConfig>,
) -> Result<Option<ListenerFiles>, ConfigError> {
    let none = TlsFileConfig::default();
    let file = file.unwrap_or(&none);
    let (cert, key) = match (cert, key) {
        (Some(cert), Some(key)) => (Some(cert), Some(key)),
        (None, None) => (file.cert.clone(), file.key.clone()),
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
                client_ca: file.client_ca.clone(),
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

/// The schema's files (the flags' if they name any part of it, else the file's) and its
/// reflection (`--reflect` over `schema_source`, and services with `reflect = true`); one of
/// them at least.
fn schema(
    args: &ServeArgs,
    file: &FileConfig,
    reflected_services: &[String],
) -> Result<(SchemaArgs, Option<Reflection>), ConfigError> {
    let schema = if args.schema.descriptor_sets.is_empty() && args.schema.protos.is_empty() {
        SchemaArgs {
            descriptor_sets: file.descriptor_sets.clone(),
            protos: file.protos.clone(),
            includes: if args.schema.includes.is_empty() {
                file.includes.clone()
            } else {
                args.schema.includes.clone()
            },
        }
    } else {
        args.schema.clone()
    };
    let reflect_all = args
        .reflect
        .unwrap_or(file.schema_source == Some(SchemaSource::Reflection));
    let reflection = if reflect_all || !reflected_services.is_empty() {
        let refresh = duration(
            file.schema_refresh.as_deref(),
            "schema_refresh",
            SCHEMA_REFRESH,
        )?;
        Some(Reflection {
            all: reflect_all,
            services: reflected_services.to_vec(),
            refresh: positive(refresh, "schema_refresh")?,
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
    Ok((schema, reflection))
}

/// The edge's settings: flags over the file over the edge's defaults, and their limits checked.
fn edge_config(
    args: &ServeArgs,
    file: &FileConfig,
    admin_listener: bool,
    schema_source: &'static str,
) -> Result<edge::EdgeConfig, ConfigError> {
    let defaults = edge::EdgeConfig::default();
    let upstream_timeout = upstream_timeout(args, file, defaults.upstream_timeout)?;
    let http_rules = tables::http_rules(&file.http_rules)?;
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
            args.downgrade_log_interval
                .as_deref()
                .or(file.downgrade_log_interval.as_deref()),
            "downgrade_log_interval",
            defaults.downgrade_log_interval,
        )?,
        downgrade_log_max_lines: file
            .downgrade_log_max_lines
            .unwrap_or(defaults.downgrade_log_max_lines),
        header_read_timeout: duration(
            file.header_read_timeout.as_deref(),
            "header_read_timeout",
            defaults.header_read_timeout,
        )?,
        body_read_timeout: duration(
            file.body_read_timeout.as_deref(),
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
            file.idle_timeout.as_deref(),
            "idle_timeout",
            defaults.idle_timeout,
        )?,
        shutdown_grace: upstream_timeout,
        drain_delay: duration(file.drain_delay.as_deref(), "drain_delay", DRAIN_DELAY)?,
        admin_listener,
        access_log: file.access_log.unwrap_or(defaults.access_log),
        cors: file
            .cors
            .as_ref()
            .map(CorsFileConfig::resolve)
            .transpose()?,
        compression: file
            .compression
            .as_ref()
            .map(CompressionFileConfig::resolve)
            .transpose()?
            .unwrap_or_default(),
        tracer: None,
        // Loaded by `run` from `Resolved::tls`, which is then watched.
        tls: None,
        migration: tables::migration(file)?,
        json_sunset: file
            .json_sunset
            .iter()
            .map(SunsetFileRule::resolve)
            .collect::<Result<_, _>>()?,
        http_rules,
        json: tables::json(file)?,
        path_templates: match file.path_templates {
            Some(super::raw::PathTemplatesConfig::Envoy) => transcode::rest::Dialect::Envoy,
            _ => transcode::rest::Dialect::Spec,
        },
        timeouts: file
            .services
            .iter()
            .filter_map(|(name, s)| s.timeout.as_ref().map(|t| (name, t)))
            .map(|(name, t)| {
                let key = format!("services.\"{name}\".timeout");
                match duration(Some(t), &key, Duration::ZERO)? {
                    d if d.is_zero() => {
                        Err(ConfigError(format!("{key} must be greater than zero")))
                    }
                    d => Ok((name.clone(), d)),
                }
            })
            .collect::<Result<_, _>>()?,
        retries: file
            .services
            .iter()
            .filter_map(|(name, s)| s.retry.as_ref().map(|r| (name, r)))
            .map(|(name, r)| Ok((name.clone(), retry_settings(name, r)?)))
            .collect::<Result<_, ConfigError>>()?,
        forward_headers: edge::forwarding::HeaderPatterns::parse(
            "forward_headers",
            &file.forward_headers,
        )
        .map_err(ConfigError)?,
        forward_response_headers: edge::forwarding::HeaderPatterns::parse(
            "forward_response_headers",
            &file.forward_response_headers,
        )
        .map_err(ConfigError)?,
        trusted_proxies: edge::forwarding::TrustedProxies::parse(&file.trusted_proxies)
            .map_err(ConfigError)?,
        unknown_query: file
            .unknown_query_parameters
            .map_or(defaults.unknown_query, |u| match u {
                UnknownQueryConfig::Ignore => transcode::rest::UnknownQuery::Ignore,
                UnknownQueryConfig::Reject => transcode::rest::UnknownQuery::Reject,
            }),
        max_stream_bytes: file.max_stream_bytes.unwrap_or(defaults.max_stream_bytes),
        schema_source,
        // Set by `serve` when the schema comes from reflection.
        unknown_method: None,
        revision: env!("PROTOGATE_GIT_REVISION"),
        process: Some(crate::process::read),
        // Set by `run` while the start waits for the reflection.
        schema_waiting: None,
        openapi_path: openapi_path(file.openapi_path.as_deref())?,
        readyz_requires: match file.readyz_requires {
            None | Some(ReadyzRequiresConfig::None) => edge::ReadyzRequires::None,
            Some(ReadyzRequiresConfig::AnyUpstream) => edge::ReadyzRequires::AnyUpstream,
            Some(ReadyzRequiresConfig::AllUpstreams) => edge::ReadyzRequires::AllUpstreams,
        },
        auth: file.auth.as_ref().map(super::access::auth).transpose()?,
        rate_limit: file
            .rate_limit
            .as_ref()
            .map(|r| super::access::rate_limit(r, file))
            .transpose()?,
    };
    check_limits(&edge)?;
    Ok(edge)
}

/// `--upstream-timeout` over `upstream_timeout`, more than zero.
fn upstream_timeout(
    args: &ServeArgs,
    file: &FileConfig,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let timeout = duration(
        args.upstream_timeout
            .as_deref()
            .or(file.upstream_timeout.as_deref()),
        "upstream_timeout",
        default,
    )?;
    if timeout.is_zero() {
        return Err(ConfigError(
            "upstream_timeout must be greater than zero".into(),
        ));
    }
    Ok(timeout)
}

/// Limits under which no request, or no largest one, could be served.
fn check_limits(edge: &edge::EdgeConfig) -> Result<(), ConfigError> {
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
    Ok(())
}

/// The upstreams' options: request compression, and how often host names are resolved and
/// endpoints health-checked.
fn upstream_options(file: &FileConfig) -> Result<edge::UpstreamOptions, ConfigError> {
    let defaults = edge::UpstreamOptions::default();
    Ok(edge::UpstreamOptions {
        compress_requests: file.upstream_compression == Some(UpstreamCompression::Gzip),
        dns_refresh: positive(
            duration(
                file.dns_refresh.as_deref(),
                "dns_refresh",
                defaults.dns_refresh,
            )?,
            "dns_refresh",
        )?,
        health_interval: positive(
            duration(
                file.health_interval.as_deref(),
                "health_interval",
                defaults.health_interval,
            )?,
            "health_interval",
        )?,
        retry_budget: match file.retry_budget {
            None => defaults.retry_budget,
            Some(r) if (0.0..=1.0).contains(&r) => r,
            Some(r) => {
                return Err(ConfigError(format!(
                    "retry_budget: {r} is not a share of calls between 0 and 1 (0.2: a fifth)"
                )));
            }
        },
        consecutive_failures: file
            .consecutive_failures
            .unwrap_or(defaults.consecutive_failures),
        ..defaults
    })
}

/// `[services."{name}"] retry`, checked.
fn retry_settings(
    name: &str,
    r: &super::raw::RetryFileConfig,
) -> Result<edge::upstream::RetrySettings, ConfigError> {
    let key = |k: &str| format!("services.\"{name}\".retry.{k}");
    let span = |k: &str, v: &Option<String>| -> Result<Option<Duration>, ConfigError> {
        v.as_deref()
            .map(|v| match duration(Some(v), &key(k), Duration::ZERO)? {
                d if d.is_zero() && k != "backoff" => {
                    Err(ConfigError(format!("{} must be greater than zero", key(k))))
                }
                d => Ok(d),
            })
            .transpose()
    };
    if let Some(a) = r.attempts
        && !(1..=edge::upstream::MAX_ATTEMPTS).contains(&a)
    {
        return Err(ConfigError(format!(
            "{}: {a} is not 1..={} (attempts in all, the first included; 1: no retry)",
            key("attempts"),
            edge::upstream::MAX_ATTEMPTS
        )));
    }
    let codes = match &r.codes {
        Some(codes) if codes.is_empty() => {
            return Err(ConfigError(format!(
                "{}: name at least one status code (attempts = 1 turns retries off)",
                key("codes")
            )));
        }
        Some(codes) => Some(
            edge::upstream::Codes::parse(codes.iter().map(String::as_str))
                .map_err(|e| ConfigError(format!("{}: {e}", key("codes"))))?,
        ),
        None => None,
    };
    let settings = edge::upstream::RetrySettings {
        codes,
        attempts: r.attempts,
        backoff: span("backoff", &r.backoff)?,
        max_backoff: span("max_backoff", &r.max_backoff)?,
        per_try_timeout: span("per_try_timeout", &r.per_try_timeout)?,
    };
    if let (Some(b), Some(m)) = (settings.backoff, settings.max_backoff)
        && m < b
    {
        return Err(ConfigError(format!(
            "{}: {m:?} is below backoff ({b:?})",
            key("max_backoff")
        )));
    }
    Ok(settings)
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

/// `openapi_path`: a path (`/…`, no query), or `""` for none; default `/openapi.json`.
fn openapi_path(given: Option<&str>) -> Result<Option<String>, ConfigError> {
    match given {
        None => Ok(Some("/openapi.json".to_owned())),
        Some("") => Ok(None),
        Some(p)
            if p.starts_with('/')
                && !p.contains(['?', '#'])
                && !p.contains(char::is_whitespace) =>
        {
            if edge::ADMIN_PATHS.contains(&p) {
                return Err(ConfigError(format!(
                    "openapi_path {p:?} is one of the admin endpoints' paths"
                )));
            }
            Ok(Some(p.to_owned()))
        }
        Some(p) => Err(ConfigError(format!(
            "openapi_path {p:?} is not a path: expected \"/…\" (no query), or \"\" to serve no OpenAPI document"
        ))),
    }
}
