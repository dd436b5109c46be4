//! CORS (the Fetch standard's CORS protocol) for browsers calling the gateway from other
//! origins. Written here rather than taken from tower-http's `CorsLayer`: a preflight is
//! answered only for a path that has a route, naming the methods that path's routes accept
//! (which only the router knows), with 204; and the exposed headers of an actual answer
//! include the metadata headers that answer carries, which a fixed list cannot name.

use std::time::Duration;

use http::{HeaderMap, HeaderValue, header};

/// The `[cors]` settings. Not configured: no CORS headers, and a preflight is an ordinary
/// `OPTIONS` request (405).
#[derive(Debug, Clone)]
pub struct CorsConfig {
    /// Exact origins (`https://app.example.com`), `*` (any), or patterns where `*` stands for
    /// any run of characters (`https://*.example.com`).
    pub allow_origins: Vec<String>,
    /// Request headers a browser may send (`Access-Control-Allow-Headers`).
    pub allow_headers: Vec<String>,
    /// Answer headers a browser may read, besides `grpc-status`, `grpc-message`,
    /// `x-request-id` and the answer's own headers.
    pub expose_headers: Vec<String>,
    pub allow_credentials: bool,
    /// How long a browser may cache a preflight (`Access-Control-Max-Age`).
    pub max_age: Option<Duration>,
}

impl Default for CorsConfig {
    fn default() -> CorsConfig {
        CorsConfig {
            allow_origins: Vec::new(),
            allow_headers: [
                "content-type",
                "accept",
                "authorization",
                "x-request-id",
                "x-client-id",
                "grpc-timeout",
                "x-timeout",
                "traceparent",
                "tracestate",
                // gRPC-Web's.
                "x-grpc-web",
                "x-user-agent",
            ]
            .map(String::from)
            .to_vec(),
            expose_headers: Vec::new(),
            allow_credentials: false,
            max_age: None,
        }
    }
}

/// Exposed on every answer to an allowed origin.
const ALWAYS_EXPOSED: &str = "grpc-status, grpc-message, x-request-id";

/// The settings, with their header values built once.
#[derive(Debug)]
pub(crate) struct Cors {
    config: CorsConfig,
    allow_headers: HeaderValue,
    max_age: Option<HeaderValue>,
}

impl Cors {
    pub(crate) fn new(config: CorsConfig) -> Result<Cors, String> {
        let allow_headers = HeaderValue::from_str(&config.allow_headers.join(", "))
            .map_err(|_| "cors.allow_headers: not valid header names".to_owned())?;
        for name in config.allow_headers.iter().chain(&config.expose_headers) {
            header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("cors: {name:?} is not a header name"))?;
        }
        if config.allow_credentials && config.allow_origins.iter().any(|o| o == "*") {
            return Err(
                "cors: allow_credentials with allow_origins \"*\" would let every site act as the user; name the origins"
                    .into(),
            );
        }
        let max_age = config.max_age.map(|age| HeaderValue::from(age.as_secs()));
        Ok(Cors {
            config,
            allow_headers,
            max_age,
        })
    }

    /// The request's `Origin` when it is one of the allowed.
    pub(crate) fn allowed_origin<'h>(&self, headers: &'h HeaderMap) -> Option<&'h HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        let text = origin.to_str().ok()?;
        self.config
            .allow_origins
            .iter()
            .any(|pattern| matches(pattern, text))
            .then_some(origin)
    }

    /// The headers of a preflight's 204 for an allowed origin; `methods`: those the path's
    /// routes accept.
    pub(crate) fn preflight(&self, origin: &HeaderValue, methods: &str, out: &mut HeaderMap) {
        self.common(origin, out);
        if let Ok(methods) = HeaderValue::from_str(methods) {
            out.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
        }
        out.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            self.allow_headers.clone(),
        );
        if let Some(age) = &self.max_age {
            out.insert(header::ACCESS_CONTROL_MAX_AGE, age.clone());
        }
    }

    /// The headers an actual answer to an allowed origin gets: the origin allowed, and what
    /// it may read — the answer's own headers included (its `grpc-metadata-*`, a gRPC-Web
    /// answer's metadata and `grpc-status-details-bin`, the sunset's `Deprecation`), less
    /// those a browser reads anyway.
    pub(crate) fn answer(&self, origin: &HeaderValue, out: &mut HeaderMap) {
        let mut exposed = String::from(ALWAYS_EXPOSED);
        for name in self.config.expose_headers.iter().map(String::as_str).chain(
            out.keys()
                .map(|k| k.as_str())
                .filter(|k| !readable_anyway(k)),
        ) {
            exposed.push_str(", ");
            exposed.push_str(name);
        }
        if let Ok(exposed) = HeaderValue::from_str(&exposed) {
            out.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, exposed);
        }
        self.common(origin, out);
    }

    fn common(&self, origin: &HeaderValue, out: &mut HeaderMap) {
        out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        if self.config.allow_credentials {
            out.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        out.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// Answer headers a browser gives a script without being told (the CORS-safelisted ones),
/// those already exposed, and those about the transfer, not the answer.
fn readable_anyway(name: &str) -> bool {
    matches!(
        name,
        "cache-control"
            | "content-language"
            | "content-length"
            | "content-type"
            | "expires"
            | "last-modified"
            | "pragma"
            | "grpc-status"
            | "grpc-message"
            | "x-request-id"
            | "vary"
            | "content-encoding"
            | "connection"
            | "date"
    ) || name.starts_with("access-control-")
}

/// Whether `origin` matches `pattern` (`*` anywhere stands for one or more characters). An
/// origin is `scheme://host[:port]`: one with anything after the host (a path) matches
/// nothing.
fn matches(pattern: &str, origin: &str) -> bool {
    if origin
        .split_once("://")
        .is_none_or(|(_, host)| host.contains('/'))
    {
        return false;
    }
    if pattern == "*" {
        return true;
    }
    let pieces: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = pieces.as_slice() else {
        return pattern == origin;
    };
    let Some(mut rest) = origin.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        // The star before `piece` takes one character at least.
        match rest.get(1..).and_then(|r| r.find(piece)) {
            Some(at) => rest = &rest[1 + at + piece.len()..],
            None => return false,
        }
    }
    rest.len() > last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_patterns() {
        for (pattern, origin, want) in [
            ("*", "https://x.test", true),
            ("https://app.example.com", "https://app.example.com", true),
            (
                "https://app.example.com",
                "https://app.example.com.evil",
                false,
            ),
            ("https://app.example.com", "http://app.example.com", false),
            ("https://*.example.com", "https://a.example.com", true),
            ("https://*.example.com", "https://a.b.example.com", true),
            ("https://*.example.com", "https://.example.com", false),
            ("https://*.example.com", "https://example.com", false),
            (
                "https://*.example.com",
                "https://evil.com/.example.com",
                false,
            ),
            ("*", "null", false),
            (
                "https://*.example.com",
                "https://a.example.com.evil.com",
                false,
            ),
            ("http://localhost:*", "http://localhost:3000", true),
            ("http://localhost:*", "http://localhost:", false),
            ("https://*.a.*.com", "https://x.a.y.com", true),
            ("https://*.a.*.com", "https://x.b.y.com", false),
        ] {
            assert_eq!(matches(pattern, origin), want, "{pattern} vs {origin}");
        }
    }

    #[test]
    fn credentials_need_named_origins() {
        let config = CorsConfig {
            allow_origins: vec!["*".into()],
            allow_credentials: true,
            ..Default::default()
        };
        assert!(Cors::new(config).unwrap_err().contains("allow_credentials"));
    }
}
