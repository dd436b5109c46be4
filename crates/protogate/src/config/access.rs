//! `[auth]` and `[rate_limit]` resolved: who may call, and how often. The key set of
//! `jwks_file` is read by [`load_from`](super::load_from) (as every file, once per load);
//! here it is only named.

use std::time::Duration;

use edge::auth::{ApiKey, AuthConfig, AuthRule, Jwks, JwtConfig, KeySet};
use edge::rate_limit::{Limit, RateLimitConfig, RateRule, RedisConfig};
use edge::selector::Selector;
use tonic::codegen::http::HeaderName;

use super::ConfigError;
use super::raw::{AuthFileConfig, RateLimitFileConfig, duration};

/// `[auth]` as the edge's settings; the key set empty until `load_from` reads `jwks_file`.
pub(super) fn auth(file: &AuthFileConfig) -> Result<AuthConfig, ConfigError> {
    let fail = |m: String| ConfigError(format!("[auth] {m}"));
    let defaults = AuthConfig::default();
    let header = |key: &str, name: &Option<String>, default: HeaderName| match name {
        None => Ok(default),
        Some(n) => match HeaderName::from_bytes(n.trim().to_ascii_lowercase().as_bytes()) {
            Ok(name) if edge::auth::may_forward(&name) => Ok(name),
            Ok(_) => Err(fail(format!(
                "{key} {n:?} is a header of HTTP or gRPC itself"
            ))),
            Err(_) => Err(fail(format!("{key} {n:?} is not a header name"))),
        },
    };
    let jwt = match (&file.jwks_file, &file.jwks_url) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "jwks_file and jwks_url are both set: the keys come from one of them".into(),
            ));
        }
        (Some(_), None) | (None, Some(_)) => Some(jwt(file).map_err(fail)?),
        (None, None) => {
            let token_keys = [
                ("issuer", file.issuer.is_some()),
                ("audiences", !file.audiences.is_empty()),
                ("leeway", file.leeway.is_some()),
                ("client_claim", file.client_claim.is_some()),
                ("forward_claims", !file.forward_claims.is_empty()),
                ("jwks_refresh", file.jwks_refresh.is_some()),
                ("jwks_ca", file.jwks_ca.is_some()),
            ];
            if let Some((key, _)) = token_keys.iter().find(|(_, set)| *set) {
                return Err(fail(format!(
                    "{key} is set but neither jwks_file nor jwks_url: tokens need the keys they are verified with"
                )));
            }
            None
        }
    };
    let api_keys = file
        .api_keys
        .iter()
        .map(|k| {
            ApiKey::new(&k.client, &k.sha256)
                .map_err(|m| fail(format!("api_keys (client {:?}): {m}", k.client)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let rules = file
        .rules
        .iter()
        .map(|r| {
            Ok(AuthRule {
                selector: Selector::parse(&r.selector)
                    .map_err(|m| fail(format!("rules {:?}: {m}", r.selector)))?,
                required: r.required,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let config = AuthConfig {
        api_key_header: header(
            "api_key_header",
            &file.api_key_header,
            defaults.api_key_header,
        )?,
        client_header: header(
            "identity_header",
            &file.identity_header,
            defaults.client_header,
        )?,
        required: file.required.unwrap_or(false),
        token_cache: file.token_cache.unwrap_or(defaults.token_cache),
        forward_token: file.forward_token.unwrap_or(defaults.forward_token),
        jwt,
        api_keys,
        rules,
    };
    if config.jwt.is_none() && config.api_keys.is_empty() {
        return Err(fail(
            "verifies nothing: set jwks_file or jwks_url (bearer tokens), or [[auth.api_keys]]"
                .into(),
        ));
    }
    Ok(config)
}

fn jwt(file: &AuthFileConfig) -> Result<JwtConfig, String> {
    if file.jwks_url.is_none() {
        for (key, set) in [
            ("jwks_refresh", file.jwks_refresh.is_some()),
            ("jwks_ca", file.jwks_ca.is_some()),
        ] {
            if set {
                return Err(format!(
                    "{key} is for jwks_url; the keys here come from jwks_file"
                ));
            }
        }
    }
    let mut forward_claims = Vec::new();
    for (claim, header) in &file.forward_claims {
        let name = HeaderName::from_bytes(header.trim().to_ascii_lowercase().as_bytes())
            .map_err(|_| format!("forward_claims.{claim}: {header:?} is not a header name"))?;
        if !edge::auth::may_forward(&name) {
            return Err(format!(
                "forward_claims.{claim}: {header:?} is a header of HTTP or gRPC itself"
            ));
        }
        forward_claims.push((claim.clone(), name));
    }
    let client_claim = file.client_claim.clone().unwrap_or_else(|| "sub".into());
    if client_claim.trim().is_empty() {
        return Err("client_claim is empty".into());
    }
    if file.audiences.iter().any(|a| a.is_empty()) {
        return Err("audiences holds an empty string".into());
    }
    let refetch = match &file.jwks_url {
        Some(_) => Some(refresh(file)?),
        None => None,
    };
    Ok(JwtConfig {
        keys: Jwks::new(KeySet::default(), refetch),
        issuer: file.issuer.clone(),
        audiences: file.audiences.clone(),
        leeway: duration(file.leeway.as_deref(), "leeway", Duration::from_secs(60))
            .map_err(|e| e.0)?,
        client_claim,
        forward_claims,
    })
}

fn refresh(file: &AuthFileConfig) -> Result<Duration, String> {
    let every = duration(
        file.jwks_refresh.as_deref(),
        "jwks_refresh",
        Duration::from_secs(300),
    )
    .map_err(|e| e.0)?;
    if every < Duration::from_millis(100) {
        return Err(format!("jwks_refresh {every:?} is below 100ms"));
    }
    Ok(every)
}

/// `[auth] jwks_url`: where the keys come from, and how often they are fetched again
/// (by `crate::jwks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksSource {
    pub url: String,
    pub refresh: Duration,
    /// The CA the server's certificate is checked against (default: the system's roots).
    pub ca: Option<std::path::PathBuf>,
}

/// `jwks_url` and how it is fetched, checked: https only.
pub(super) fn jwks_source(file: &AuthFileConfig) -> Result<Option<JwksSource>, ConfigError> {
    let Some(url) = &file.jwks_url else {
        return Ok(None);
    };
    let fail = |m: String| ConfigError(format!("[auth] jwks_url {url:?}: {m}"));
    let uri: tonic::codegen::http::Uri = url.parse().map_err(|e| fail(format!("{e}")))?;
    if uri.scheme_str() != Some("https") || uri.host().is_none() {
        return Err(fail(
            "must be an https:// URL (the keys every token is checked with must not be open to tampering)"
                .into(),
        ));
    }
    Ok(Some(JwksSource {
        url: url.clone(),
        refresh: refresh(file).map_err(|m| ConfigError(format!("[auth] {m}")))?,
        ca: file.jwks_ca.clone(),
    }))
}

/// The keys of `jwks_file`, put in force in `config`'s key set.
pub(super) fn load_keys(
    config: &AuthConfig,
    path: &std::path::Path,
    text: &str,
) -> Result<(), ConfigError> {
    let fail = |m: String| ConfigError(format!("[auth] jwks_file {}: {m}", path.display()));
    let (set, skipped) = KeySet::parse(text.as_bytes()).map_err(fail)?;
    for why in &skipped {
        tracing::warn!(file = %path.display(), "a key of the key set is left out: {why}");
    }
    if set.is_empty() {
        return Err(fail("holds no key tokens can be verified with".into()));
    }
    if let Some(jwt) = &config.jwt {
        jwt.keys.store(set);
    }
    Ok(())
}

/// `[rate_limit]` as the edge's settings; `top` for the CA (and client certificate) a
/// `rediss://` server is checked with, the upstreams' (`ca`, `client_cert`, `client_key`).
pub(super) fn rate_limit(
    file: &RateLimitFileConfig,
    top: &super::FileConfig,
) -> Result<RateLimitConfig, ConfigError> {
    let fail = |m: String| ConfigError(format!("[rate_limit] {m}"));
    let default = limit(file.per_client, file.burst).map_err(fail)?;
    let rules = file
        .rules
        .iter()
        .map(|r| {
            let at = |m: String| fail(format!("rules {:?}: {m}", r.selector));
            Ok(RateRule {
                selector: Selector::parse(&r.selector).map_err(at)?,
                limit: limit(r.per_client, r.burst).map_err(at)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let max_clients = file
        .max_clients
        .unwrap_or(edge::rate_limit::DEFAULT_MAX_CLIENTS);
    if max_clients == 0 {
        return Err(fail("max_clients must be at least 1".into()));
    }
    Ok(RateLimitConfig {
        default,
        rules,
        max_clients,
        redis: file
            .redis
            .as_ref()
            .map(|url| redis(url, file, top))
            .transpose()?,
    })
}

/// `[rate_limit] redis` checked: its scheme, its timeout, the files of `rediss://`.
fn redis(
    url: &str,
    file: &RateLimitFileConfig,
    top: &super::FileConfig,
) -> Result<RedisConfig, ConfigError> {
    let fail = |m: String| ConfigError(format!("[rate_limit] redis {url:?}: {m}"));
    let tls = url.starts_with("rediss://");
    if !(tls || url.starts_with("redis://")) {
        return Err(fail(
            "must be redis://host:port or rediss://host:port".into(),
        ));
    }
    let timeout = duration(
        file.redis_timeout.as_deref(),
        "redis_timeout",
        Duration::from_millis(20),
    )?;
    if timeout.is_zero() {
        return Err(ConfigError(
            "[rate_limit] redis_timeout must be more than 0".into(),
        ));
    }
    let read = |path: &std::path::Path, key: &str| {
        std::fs::read(path).map_err(|e| fail(format!("{key} {}: {e}", path.display())))
    };
    let (root_cert, client_cert) = if tls {
        let root = top.ca.as_deref().map(|p| read(p, "ca")).transpose()?;
        let client = match (&top.client_cert, &top.client_key) {
            (Some(cert), Some(key)) => Some((read(cert, "client_cert")?, read(key, "client_key")?)),
            _ => None,
        };
        (root, client)
    } else {
        (None, None)
    };
    Ok(RedisConfig {
        url: url.to_owned(),
        timeout,
        root_cert,
        client_cert,
    })
}

fn limit(per_client: f64, burst: Option<u32>) -> Result<Limit, String> {
    if !(per_client.is_finite() && (1e-6..=1e9).contains(&per_client)) {
        return Err(format!(
            "per_client = {per_client}: requests a second, from 0.000001 (one in 11.6 days) to 1e9 (0.5: one every 2 s)"
        ));
    }
    if burst == Some(0) {
        return Err("burst must be at least 1".into());
    }
    let burst = burst.unwrap_or(per_client.ceil() as u32).max(1);
    Ok(Limit {
        per_second: per_client,
        burst,
    })
}
