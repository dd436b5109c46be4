//! Bearer tokens (RFC 7519 JWTs) verified against a key set: the algorithm fits the key
//! (RS*/PS* RSA, ES256/ES384 P-256/P-384, EdDSA Ed25519; never HS* or `none`), the signature,
//! `exp` and `nbf` within `leeway`, `iss` and `aud` when configured; then the client's name
//! (`client_claim`) and the claims forwarded upstream (`forward_claims`).
//!
//! The signature check is jsonwebtoken's, on ring (the crypto rustls already links here).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::jwks::Jwks;
use super::{Failure, Reason};

/// One token issuer's settings (`[auth]`).
#[derive(Clone)]
pub struct JwtConfig {
    /// The keys (from `jwks_file` or `jwks_url`).
    pub keys: Arc<Jwks>,
    /// `iss` must equal it, when set.
    pub issuer: Option<String>,
    /// `aud` must name one of them, when any.
    pub audiences: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf` (default 60 s).
    pub leeway: Duration,
    /// The claim naming the client (default `sub`).
    pub client_claim: String,
    /// Claims sent upstream, each as the metadata header it names.
    pub forward_claims: Vec<(String, HeaderName)>,
}

impl std::fmt::Debug for JwtConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtConfig")
            .field("keys", &self.keys.load().len())
            .field("issuer", &self.issuer)
            .field("audiences", &self.audiences)
            .field("leeway", &self.leeway)
            .field("client_claim", &self.client_claim)
            .field("forward_claims", &self.forward_claims)
            .finish()
    }
}

/// What a valid token says: who it names, the headers of its forwarded claims, and when it
/// stops being valid (seconds since the epoch, leeway included).
#[derive(Debug, Clone)]
pub struct Claims {
    pub client: Arc<str>,
    pub forwarded: Vec<(HeaderName, HeaderValue)>,
    pub valid_until: u64,
}

/// How long a token with an unknown `kid` waits for the key set to be fetched again.
const REFETCH_WAIT: Duration = Duration::from_secs(2);

impl JwtConfig {
    /// Verifies a token; the failure's reason is for the debug log and the metric only.
    pub async fn verify(&self, token: &str) -> Result<Claims, Failure> {
        match self.verify_now(token) {
            Err(f) if f.reason == Reason::UnknownKey && self.keys.refetch(REFETCH_WAIT).await => {
                self.verify_now(token)
            }
            other => other,
        }
    }

    fn verify_now(&self, token: &str) -> Result<Claims, Failure> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| header_failure(token, &e))?;
        let alg = header.alg;
        let set = self.keys.load();
        let mut candidates = set.candidates(header.kid.as_deref()).peekable();
        if candidates.peek().is_none() {
            return Err(Failure::new(
                Reason::UnknownKey,
                match &header.kid {
                    Some(kid) => format!("no key with kid {kid:?}"),
                    None => "the key set is empty".into(),
                },
            ));
        }
        let mut last = Failure::new(Reason::Algorithm, format!("no key verifies {alg:?}"));
        for key in candidates {
            if !key.kind.verifies(alg) || key.alg.is_some_and(|a| a != alg) {
                last = Failure::new(
                    Reason::Algorithm,
                    format!(
                        "alg {alg:?} does not fit the {:?} key {:?}",
                        key.kind, key.kid
                    ),
                );
                continue;
            }
            match jsonwebtoken::decode::<Map<String, Value>>(
                token,
                &key.decoding,
                &self.validation(alg),
            ) {
                Ok(data) => return self.claims(data.claims),
                Err(e) => {
                    last = failure(&e);
                    if last.reason != Reason::Signature {
                        // The signature held: the claims are what is wrong.
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.leeway.as_secs();
        v.validate_nbf = true;
        if let Some(issuer) = &self.issuer {
            v.iss = Some(HashSet::from([issuer.clone()]));
        }
        if self.audiences.is_empty() {
            v.validate_aud = false;
        } else {
            v.aud = Some(self.audiences.iter().cloned().collect());
        }
        v
    }

    fn claims(&self, claims: Map<String, Value>) -> Result<Claims, Failure> {
        let client = match claims.get(&self.client_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => Arc::from(s.as_str()),
            Some(Value::Number(n)) => Arc::from(n.to_string()),
            _ => {
                return Err(Failure::new(
                    Reason::Claims,
                    format!("no {:?} claim naming the client", self.client_claim),
                ));
            }
        };
        let forwarded = self
            .forward_claims
            .iter()
            .filter_map(|(claim, header)| {
                let text = match claims.get(claim)? {
                    Value::String(s) => s.clone(),
                    Value::Null => return None,
                    other => other.to_string(),
                };
                match HeaderValue::from_str(&text) {
                    Ok(v) => Some((header.clone(), v)),
                    Err(_) => {
                        tracing::debug!(
                            claim,
                            "a forwarded claim is not a valid header value; not sent"
                        );
                        None
                    }
                }
            })
            .collect();
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        Ok(Claims {
            client,
            forwarded,
            valid_until: exp.saturating_add(self.leeway.as_secs()),
        })
    }
}

/// Why a token's header did not read: `alg: none` and the like named as such.
fn header_failure(token: &str, e: &jsonwebtoken::errors::Error) -> Failure {
    use base64::Engine;
    let alg = token
        .split('.')
        .next()
        .and_then(|h| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(h.trim_end_matches('='))
                .ok()
        })
        .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
        .and_then(|h| h.get("alg").and_then(|a| a.as_str()).map(str::to_owned));
    match alg {
        Some(alg) if matches!(e.kind(), ErrorKind::Json(_)) => {
            Failure::new(Reason::Algorithm, format!("alg {alg:?} is not accepted"))
        }
        _ => Failure::new(Reason::Malformed, format!("not a JWT: {e}")),
    }
}

fn failure(e: &jsonwebtoken::errors::Error) -> Failure {
    let reason = match e.kind() {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::Crypto(_)
        | ErrorKind::InvalidKeyFormat => Reason::Signature,
        ErrorKind::ExpiredSignature => Reason::Expired,
        ErrorKind::ImmatureSignature => Reason::NotYetValid,
        ErrorKind::InvalidIssuer => Reason::Issuer,
        ErrorKind::InvalidAudience => Reason::Audience,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::MissingAlgorithm => Reason::Algorithm,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidSubject => Reason::Claims,
        _ => Reason::Malformed,
    };
    Failure::new(reason, e.to_string())
}
