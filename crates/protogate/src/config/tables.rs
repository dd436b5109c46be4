//! The resolved layer's tables: `[cors]`, `[compression]`, `[json]`, `[migration]`, `[[json_sunset]]`,
//! `[[http_rules]]` and `[otel]`, each checked and turned into the edge's (or transcode's)
//! settings. [`resolve`](super::resolve()) calls them in its fixed order.

use std::fmt;
use std::time::Duration;

use tonic::codegen::http::HeaderName;

use super::ConfigError;
use super::raw::{
    CompressionFileConfig, CorsFileConfig, FileConfig, HttpRuleConfig, JsonFileConfig,
    JsonStreamConfig, LevelConfig, OtelFileConfig, SunsetFileRule, duration,
};

/// `[otel]` resolved: where spans go.
#[derive(Debug, Clone)]
pub struct OtelConfig {
    /// The OTLP/gRPC collector, `http://host:4317`.
    pub endpoint: String,
    pub service_name: String,
    /// The share of new traces recorded (a client's sampled flag is followed).
    pub sample_ratio: f64,
}

/// The most spaces per level `indent` takes: deeper layouts only grow answers.
const MAX_INDENT: u8 = 8;

/// `[json]` and every `[services.NAME.json]`: the JSON rendering and its overrides (which
/// names are services or methods, the edge checks against the schema).
pub(super) fn json(file: &FileConfig) -> Result<edge::json_options::JsonConfig, ConfigError> {
    let settings = |key: &str, t: &JsonFileConfig| {
        if t.indent.is_some_and(|i| i > MAX_INDENT) {
            return Err(ConfigError(format!(
                "{key}.indent: at most {MAX_INDENT} spaces per level (0: compact)"
            )));
        }
        Ok(edge::json_options::JsonSettings {
            emit_unpopulated: t.emit_unpopulated,
            use_proto_names: t.use_proto_names,
            enums_as_ints: t.enums_as_ints,
            indent: t.indent,
            stream: t.stream.map(|s| match s {
                JsonStreamConfig::Array => edge::json_options::JsonStream::Array,
                JsonStreamConfig::Ndjson => edge::json_options::JsonStream::Ndjson,
                JsonStreamConfig::Sse => edge::json_options::JsonStream::Sse,
            }),
        })
    };
    let global = file
        .json
        .as_ref()
        .map(|t| settings("json", t))
        .transpose()?
        .unwrap_or_default();
    let mut overrides = Vec::new();
    for (name, s) in &file.services {
        if let Some(t) = &s.json {
            overrides.push((
                name.clone(),
                settings(&format!("services.\"{name}\".json"), t)?,
            ));
        }
    }
    Ok(edge::json_options::JsonConfig { global, overrides })
}

/// `[migration]` and `client_id_header`: the migration report's bounds, and the header that
/// names clients.
pub(super) fn migration(
    file: &FileConfig,
) -> Result<edge::migration::MigrationConfig, ConfigError> {
    let table = file.migration.as_ref();
    // Self-declared names get series of their own only where no one can be verified: once
    // [auth] or client certificates name clients, a name anyone may send is not a label.
    let verifies = file.auth.is_some() || file.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    Ok(edge::migration::MigrationConfig {
        max_clients: table
            .and_then(|m| m.max_clients)
            .unwrap_or(edge::migration::DEFAULT_MAX_CLIENTS),
        export: edge::migration::ExportSettings {
            clients: table
                .and_then(|m| m.export_clients)
                .unwrap_or(edge::migration::DEFAULT_EXPORT_CLIENTS),
            unverified: table.and_then(|m| m.export_unverified).unwrap_or(!verifies),
        },
        instance: instance_name(),
        fleet_prometheus: table
            .and_then(|m| m.fleet_prometheus.as_deref())
            .map(|url| {
                edge::fetch::HttpUrl::parse(url)
                    .map_err(|e| ConfigError(format!("[migration] fleet_prometheus {url:?}: {e}")))
            })
            .transpose()?,
        client_id_header: file
            .client_id_header
            .as_deref()
            .map(|h| {
                http_header_name(h).ok_or_else(|| {
                    ConfigError(format!("client_id_header {h:?} is not a header name"))
                })
            })
            .transpose()?,
    })
}

/// This replica's name on the migration page: `POD_NAME` (Kubernetes' downward API), else
/// the host name.
fn instance_name() -> Option<String> {
    let given = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.trim().is_empty());
    given
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|n| edge::migration::ClientId::clean_name(n.trim()))
}

/// A header name as configured (any case; stored lowercase).
fn http_header_name(name: &str) -> Option<HeaderName> {
    HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes()).ok()
}

impl CorsFileConfig {
    pub(super) fn resolve(&self) -> Result<edge::cors::CorsConfig, ConfigError> {
        let defaults = edge::cors::CorsConfig::default();
        Ok(edge::cors::CorsConfig {
            allow_origins: self.allow_origins.clone(),
            allow_headers: self.allow_headers.clone().unwrap_or(defaults.allow_headers),
            expose_headers: self.expose_headers.clone(),
            allow_credentials: self.allow_credentials,
            max_age: self
                .max_age
                .as_deref()
                .map(|age| duration(Some(age), "cors.max_age", Duration::ZERO))
                .transpose()?,
        })
    }
}

impl CompressionFileConfig {
    pub(super) fn resolve(&self) -> Result<edge::coding::CompressionConfig, ConfigError> {
        use edge::coding::{Coding, Level};
        let defaults = edge::coding::CompressionConfig::default();
        let algorithms = match &self.algorithms {
            None => defaults.algorithms,
            Some(names) => {
                let mut algorithms = Vec::new();
                for name in names {
                    let coding = Coding::parse(name).ok_or_else(|| {
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
        let level = match &self.level {
            None => defaults.level,
            Some(LevelConfig::Number(n)) => Level::Precise(*n),
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

impl SunsetFileRule {
    pub(super) fn resolve(&self) -> Result<edge::migration::SunsetRule, ConfigError> {
        use edge::migration::{parse_brownout, parse_time};
        let selector = &self.selector;
        let fail = |key: &str, e: &dyn fmt::Display| {
            ConfigError(format!("json_sunset {selector:?}: {key}: {e}"))
        };
        let time = |key: &str, text: &Option<String>| {
            text.as_deref()
                .map(|t| parse_time(t).map_err(|e| fail(key, &e)))
                .transpose()
        };
        Ok(edge::migration::SunsetRule {
            deprecation: time("deprecation", &self.deprecation)?,
            sunset: time("sunset", &self.sunset)?,
            link: self.link.clone(),
            brownouts: self
                .brownouts
                .iter()
                .map(|b| parse_brownout(b).map_err(|e| fail("brownouts", &e)))
                .collect::<Result<_, _>>()?,
            exempt_clients: self.exempt_clients.clone(),
            exempt_unverified: self.exempt_unverified.unwrap_or(false),
            selector: selector.clone(),
        })
    }
}

/// `[[http_rules]]`: every rule names the method it is for.
pub(super) fn http_rules(
    rules: &[HttpRuleConfig],
) -> Result<Vec<transcode::rest::HttpRule>, ConfigError> {
    rules
        .iter()
        .map(|r| {
            let selector = r.selector.clone().ok_or_else(|| {
                ConfigError("http_rules: every rule needs a selector (pkg.Service.Method)".into())
            })?;
            r.resolve(&selector)
        })
        .collect()
}

impl HttpRuleConfig {
    fn resolve(&self, selector: &str) -> Result<transcode::rest::HttpRule, ConfigError> {
        let mut patterns: Vec<(String, String)> = [
            ("GET", &self.get),
            ("PUT", &self.put),
            ("POST", &self.post),
            ("DELETE", &self.delete),
            ("PATCH", &self.patch),
        ]
        .into_iter()
        .filter_map(|(m, p)| p.as_ref().map(|p| (m.to_owned(), p.clone())))
        .collect();
        patterns.extend(
            self.custom
                .as_ref()
                .map(|c| (c.kind.clone(), c.path.clone())),
        );
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
            .iter()
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
            body: self.body.clone(),
            response_body: self.response_body.clone(),
            additional_bindings,
        })
    }
}

impl OtelFileConfig {
    pub(super) fn resolve(&self) -> Result<OtelConfig, ConfigError> {
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
            endpoint: self.endpoint.clone(),
            service_name: self
                .service_name
                .clone()
                .unwrap_or_else(|| "protogate".into()),
            sample_ratio,
        })
    }
}
