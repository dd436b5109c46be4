//! Who is calling, verified: bearer tokens (JWTs, [`jwt`]) and API keys ([`api_key`]), the
//! per-method rules saying where credentials are required, and the refusals (401 with an
//! RFC 6750 challenge). The request's identity is decided from what this finds, in one place
//! (`service/account.rs`): a verified client certificate, else a token's client claim, else
//! an API key's client; only without any of them the client's own `x-client-id`.
//!
//! Verified tokens are kept (by their text, bounded by `token_cache`, until they expire or
//! the key set changes): a token's signature is checked once, not on every request it comes
//! with.

pub mod api_key;
mod cache;
pub mod jwks;
pub mod jwt;

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, header};

pub use api_key::ApiKey;
pub use jwks::{Jwks, KeySet};
pub use jwt::JwtConfig;

use crate::selector::{Selector, most_specific};

/// `x-protogate-client`: the verified identity sent upstream (stripped from what clients send).
pub const CLIENT_HEADER: HeaderName = HeaderName::from_static("x-protogate-client");
/// `x-api-key`, the default API key header.
pub const API_KEY_HEADER: HeaderName = HeaderName::from_static("x-api-key");

/// Whether a claim may be forwarded in `name`: not a header of HTTP or gRPC itself, nor one
/// the gateway sets (`authorization`, `x-request-id`, `:authority`…).
pub fn may_forward(name: &HeaderName) -> bool {
    let n = name.as_str();
    !(crate::reserved::is_reserved_metadata(n)
        || matches!(
            n,
            "authorization" | "x-request-id" | "traceparent" | "tracestate"
        )
        || n.starts_with(':'))
}

/// The `[auth]` settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Bearer tokens, when configured.
    pub jwt: Option<JwtConfig>,
    /// API keys.
    pub api_keys: Vec<ApiKey>,
    /// The header API keys come in (default `x-api-key`).
    pub api_key_header: HeaderName,
    /// Requests without credentials are refused (default false: anonymous).
    pub required: bool,
    /// Per-method `required`, the most specific selector winning.
    pub rules: Vec<AuthRule>,
    /// The header the verified identity goes upstream in (default `x-protogate-client`).
    pub client_header: HeaderName,
    /// Verified tokens kept (default 4,096; 0: every token's signature checked every time).
    pub token_cache: usize,
    /// A verified bearer token goes on upstream in `authorization` (default false: the
    /// upstream trusts `client_header`, as behind Envoy's jwt_authn without `forward`).
    pub forward_token: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            jwt: None,
            api_keys: Vec::new(),
            api_key_header: API_KEY_HEADER,
            required: false,
            rules: Vec::new(),
            client_header: CLIENT_HEADER,
            token_cache: cache::CAPACITY,
            forward_token: false,
        }
    }
}

/// `[[auth.rules]]`: whether a method's callers must bring credentials.
#[derive(Debug, Clone)]
pub struct AuthRule {
    pub selector: Selector,
    pub required: bool,
}

/// Why a request's credentials were refused: `protogate_auth_failures_total{reason}` and the
/// debug log say it; the client is told no more than RFC 6750 allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Credentials are required and none came.
    Missing,
    /// Not a JWT (or an `Authorization` header that is not one bearer token).
    Malformed,
    /// `alg` is not accepted (`none`, HS*) or does not fit the key.
    Algorithm,
    /// No key with the token's `kid`.
    UnknownKey,
    Signature,
    Expired,
    NotYetValid,
    Issuer,
    Audience,
    /// A required claim (`exp`, the client claim) is missing.
    Claims,
    /// An API key no configured hash matches.
    ApiKey,
}

impl Reason {
    pub const ALL: [Reason; 11] = [
        Reason::Missing,
        Reason::Malformed,
        Reason::Algorithm,
        Reason::UnknownKey,
        Reason::Signature,
        Reason::Expired,
        Reason::NotYetValid,
        Reason::Issuer,
        Reason::Audience,
        Reason::Claims,
        Reason::ApiKey,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Malformed => "malformed",
            Reason::Algorithm => "algorithm",
            Reason::UnknownKey => "unknown_key",
            Reason::Signature => "signature",
            Reason::Expired => "expired",
            Reason::NotYetValid => "not_yet_valid",
            Reason::Issuer => "issuer",
            Reason::Audience => "audience",
            Reason::Claims => "claims",
            Reason::ApiKey => "api_key",
        }
    }
}

/// A refusal with its precise reason (kept from the client).
#[derive(Debug, Clone)]
pub struct Failure {
    pub reason: Reason,
    pub detail: String,
}

impl Failure {
    pub fn new(reason: Reason, detail: String) -> Failure {
        Failure { reason, detail }
    }

    /// What the client is told: the message of its google.rpc.Status.
    pub fn message(&self) -> &'static str {
        match self.reason {
            Reason::Missing => {
                "credentials are required: a bearer token in Authorization or an API key"
            }
            Reason::ApiKey => "the API key is not valid",
            _ => "the bearer token is not valid",
        }
    }

    /// The `WWW-Authenticate` challenge (RFC 6750 §3: no error for a request that brought no
    /// token; `invalid_token` with one description for every token refused).
    pub fn challenge(&self) -> HeaderValue {
        HeaderValue::from_static(match self.reason {
            Reason::Missing | Reason::ApiKey => "Bearer realm=\"protogate\"",
            _ => {
                "Bearer realm=\"protogate\", error=\"invalid_token\", error_description=\"the access token is expired, malformed or not valid\""
            }
        })
    }
}

/// Where a verified identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    Token,
    ApiKey,
}

/// A caller the credentials verified: its name, how, and the claims forwarded upstream.
#[derive(Debug)]
pub struct Verified {
    pub client: Arc<str>,
    /// `client` as the header value that names it upstream.
    pub header: HeaderValue,
    pub proof: Proof,
    pub forwarded: Vec<(HeaderName, HeaderValue)>,
}

impl Verified {
    /// A verified caller, its name cleaned as a client row holds it.
    pub fn new(client: &str, proof: Proof, forwarded: Vec<(HeaderName, HeaderValue)>) -> Verified {
        let client = crate::migration::ClientId::clean_name(client);
        Verified {
            // Printable ASCII: always a header value.
            header: HeaderValue::from_str(&client).unwrap_or(HeaderValue::from_static("-")),
            client: Arc::from(client),
            proof,
            forwarded,
        }
    }
}

/// `[auth]` in force: the settings and the verified tokens kept.
pub struct Auth {
    config: AuthConfig,
    cache: Option<cache::TokenCache>,
}

impl Auth {
    pub fn new(config: AuthConfig) -> Auth {
        Auth {
            cache: (config.token_cache > 0).then(|| cache::TokenCache::new(config.token_cache)),
            config,
        }
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// Whether `method`'s callers must bring credentials.
    pub fn required(&self, method: &str) -> bool {
        most_specific(&self.config.rules, |r| &r.selector, method)
            .map_or(self.config.required, |r| r.required)
    }

    /// The request's credentials verified: a bearer token when `[auth]` has a key set, else
    /// an API key; `None` when it brought neither. A bad credential is always refused.
    pub async fn verify(&self, headers: &HeaderMap) -> Result<Option<Arc<Verified>>, Failure> {
        if let Some(jwt) = &self.config.jwt
            && let Some(value) = headers.get(header::AUTHORIZATION)
            && let Some(token) = bearer(value.as_bytes())
        {
            let token = token.map_err(|detail| Failure::new(Reason::Malformed, detail))?;
            return self.token(jwt, token).await.map(Some);
        }
        if !self.config.api_keys.is_empty()
            && let Some(key) = headers.get(&self.config.api_key_header)
        {
            return match api_key::find(&self.config.api_keys, key.as_bytes()) {
                Some(verified) => Ok(Some(Arc::clone(verified))),
                None => Err(Failure::new(
                    Reason::ApiKey,
                    "no configured key has this hash".into(),
                )),
            };
        }
        Ok(None)
    }

    async fn token(&self, jwt: &JwtConfig, token: &[u8]) -> Result<Arc<Verified>, Failure> {
        let now = unix_now();
        let generation = jwt.keys.generation();
        if let Some(hit) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(token, now, generation))
        {
            return Ok(hit);
        }
        // Read as text only now: a token seen before is known by its bytes.
        let text = std::str::from_utf8(token)
            .map_err(|_| Failure::new(Reason::Malformed, "the token is not ASCII".into()))?;
        let claims = jwt.verify(text).await?;
        let verified = Arc::new(Verified::new(
            &claims.client,
            Proof::Token,
            claims.forwarded,
        ));
        // Under the generation read before the check: a set swapped meanwhile makes the
        // entry stale at once rather than keep a token a removed key verified.
        if let Some(cache) = &self.cache {
            cache.put(token, Arc::clone(&verified), claims.valid_until, generation);
        }
        Ok(verified)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, RFC
/// 9110 §11.1); `None` for another scheme, an error for a bearer header without a token. (A
/// token with a space in it is no JWT: its check says so.)
fn bearer(value: &[u8]) -> Option<Result<&[u8], String>> {
    let (scheme, rest) = match value.get(..7) {
        Some(head) if head[6] == b' ' => (&head[..6], &value[7..]),
        _ => (value, &[][..]),
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii();
    Some(if token.is_empty() {
        Err("Authorization: Bearer must be followed by a token".into())
    } else {
        Ok(token)
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_any_case_of_the_scheme() {
        assert_eq!(bearer(b"Bearer abc.def.ghi"), Some(Ok(&b"abc.def.ghi"[..])));
        assert_eq!(bearer(b"bearer  abc "), Some(Ok(&b"abc"[..])));
        assert_eq!(bearer(b"Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer(b"Bearerx abc"), None);
        assert!(matches!(bearer(b"Bearer"), Some(Err(_))));
        assert!(matches!(bearer(b"Bearer  "), Some(Err(_))));
    }

    #[test]
    fn the_most_specific_rule_decides_whether_credentials_are_required() {
        let rule = |s: &str, required| AuthRule {
            selector: Selector::parse(s).unwrap(),
            required,
        };
        let auth = Auth::new(AuthConfig {
            required: true,
            rules: vec![
                rule("grpc.health.v1.*", false),
                rule("demo.*", false),
                rule("demo.shop.v1.Shop.PlaceOrder", true),
            ],
            ..AuthConfig::default()
        });
        assert!(!auth.required("grpc.health.v1.Health/Check"));
        assert!(!auth.required("demo.shop.v1.Shop/GetOrder"));
        assert!(auth.required("demo.shop.v1.Shop/PlaceOrder"));
        assert!(auth.required("other.Svc/Call"));
    }
}
