//! The keys tokens are verified with: a JSON Web Key Set (RFC 7517) read into [`KeySet`]
//! (public signature keys only), held by [`Jwks`] where a reader swaps it without a lock:
//! the binary, from `jwks_file` at each load or from `jwks_url` every `jwks_refresh`.
//!
//! A token naming a `kid` the set does not hold may ask for the set again
//! ([`Jwks::refetch`]): at most once per `jwks_refresh`, so tokens made up with random `kid`s
//! cannot turn the gateway into a client hammering the identity provider.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use tokio::sync::{Notify, watch};

/// A public key's type, which decides the algorithms it verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyType {
    /// Whether a token signed with `alg` can be verified by a key of this type: RS*/PS* by
    /// RSA keys, ES256 by P-256, ES384 by P-384, EdDSA by Ed25519. Never HS* (a public key is
    /// no shared secret) nor `none` (which does not parse as an algorithm at all).
    pub fn verifies(self, alg: Algorithm) -> bool {
        use Algorithm::*;
        match self {
            KeyType::Rsa => matches!(alg, RS256 | RS384 | RS512 | PS256 | PS384 | PS512),
            KeyType::P256 => alg == ES256,
            KeyType::P384 => alg == ES384,
            KeyType::Ed25519 => alg == EdDSA,
        }
    }
}

/// One verification key of a set.
pub struct Key {
    pub kid: Option<String>,
    /// The key's own `alg`, when it names one: tokens must then use exactly it.
    pub alg: Option<Algorithm>,
    pub kind: KeyType,
    pub decoding: DecodingKey,
}

/// The keys of a JWKS document.
#[derive(Default)]
pub struct KeySet {
    keys: Vec<Key>,
}

impl KeySet {
    /// The signature keys of a JWKS document. Keys this gateway cannot use are left out
    /// and named in the second list (`use: enc`, symmetric `oct` keys, P-521, unknown types
    /// or algorithms); a document that is not a JWKS is an error.
    pub fn parse(json: &[u8]) -> Result<(KeySet, Vec<String>), String> {
        #[derive(serde::Deserialize)]
        struct Doc {
            keys: Vec<serde_json::Value>,
        }
        let doc: Doc = serde_json::from_slice(json)
            .map_err(|e| format!("not a JSON Web Key Set ({{\"keys\": [...]}}): {e}"))?;
        let mut keys = Vec::with_capacity(doc.keys.len());
        let mut skipped = Vec::new();
        for (i, value) in doc.keys.into_iter().enumerate() {
            let name = value
                .get("kid")
                .and_then(|k| k.as_str())
                .map_or_else(|| format!("key {i}"), |k| format!("key {k:?}"));
            match key(value) {
                Ok(key) => keys.push(key),
                Err(why) => skipped.push(format!("{name}: {why}")),
            }
        }
        Ok((KeySet { keys }, skipped))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys that may verify a token with this `kid` (all of them when it names none).
    pub fn candidates<'a>(&'a self, kid: Option<&'a str>) -> impl Iterator<Item = &'a Key> {
        self.keys
            .iter()
            .filter(move |k| kid.is_none() || k.kid.as_deref() == kid)
    }
}

fn key(value: serde_json::Value) -> Result<Key, String> {
    let jwk: Jwk = serde_json::from_value(value).map_err(|e| format!("not a JWK: {e}"))?;
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return Err("an encryption key (use: enc)".into());
    }
    let kind = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => KeyType::Rsa,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => KeyType::P256,
            EllipticCurve::P384 => KeyType::P384,
            ref other => return Err(format!("curve {other:?} is not supported")),
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            KeyType::Ed25519
        }
        AlgorithmParameters::OctetKeyPair(okp) => {
            return Err(format!("curve {:?} is not supported", okp.curve));
        }
        AlgorithmParameters::OctetKey(_) => {
            return Err("a symmetric (oct) key: a key set holds public keys only".into());
        }
    };
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(a) => {
            let alg = algorithm(a).ok_or_else(|| {
                format!("alg {a} is not a signature algorithm this gateway accepts")
            })?;
            if !kind.verifies(alg) {
                return Err(format!("alg {a} does not fit a {kind:?} key"));
            }
            Some(alg)
        }
    };
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| format!("unreadable key: {e}"))?;
    Ok(Key {
        kid: jwk.common.key_id,
        alg,
        kind,
        decoding,
    })
}

/// A key's `alg` as a token algorithm, for the asymmetric ones only.
fn algorithm(a: KeyAlgorithm) -> Option<Algorithm> {
    use KeyAlgorithm as K;
    Some(match a {
        K::RS256 => Algorithm::RS256,
        K::RS384 => Algorithm::RS384,
        K::RS512 => Algorithm::RS512,
        K::PS256 => Algorithm::PS256,
        K::PS384 => Algorithm::PS384,
        K::PS512 => Algorithm::PS512,
        K::ES256 => Algorithm::ES256,
        K::ES384 => Algorithm::ES384,
        K::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The key set in force, swapped whole by whoever reads the keys, and the way a token with an
/// unknown `kid` asks for them again.
pub struct Jwks {
    set: ArcSwap<KeySet>,
    /// Bumped at each swap: cached verifications of an older set are not trusted.
    generation: watch::Sender<u64>,
    /// Told when a token asks for the keys again: the URL reader waits on it between
    /// refreshes.
    wanted: Notify,
    /// For a set read from a URL, the least time between two asks (`jwks_refresh`); `None`
    /// for a set read from a file (asking again reads nothing new).
    refetch_every: Option<Duration>,
    /// The earliest time (ms after `epoch`) a token may ask again.
    next_refetch: AtomicU64,
    epoch: Instant,
}

impl Jwks {
    /// A store holding `set`. `refetch_every`: for a set fetched from a URL, the least time
    /// between two fetches a token asks for (`jwks_refresh`).
    pub fn new(set: KeySet, refetch_every: Option<Duration>) -> Arc<Jwks> {
        Arc::new(Jwks {
            set: ArcSwap::from_pointee(set),
            generation: watch::Sender::new(0),
            wanted: Notify::new(),
            refetch_every,
            next_refetch: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// The set in force.
    pub fn load(&self) -> arc_swap::Guard<Arc<KeySet>> {
        self.set.load()
    }

    /// Its generation (bumped at each [`Jwks::store`]).
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Puts a new set in force.
    pub fn store(&self, set: KeySet) {
        self.set.store(Arc::new(set));
        self.generation.send_modify(|g| *g += 1);
    }

    /// Waits until a token asks for the keys again (the URL reader, between refreshes).
    pub async fn wanted(&self) {
        self.wanted.notified().await;
    }

    /// A token named a `kid` the set does not hold: asks the reader for the set again, when
    /// the last ask is at least `jwks_refresh` ago, and waits at most `wait` for a new set.
    /// True when a new set came.
    pub async fn refetch(&self, wait: Duration) -> bool {
        let Some(every) = self.refetch_every else {
            return false;
        };
        let now = self.epoch.elapsed().as_millis() as u64;
        let next = self.next_refetch.load(Ordering::Relaxed);
        if now < next
            || self
                .next_refetch
                .compare_exchange(
                    next,
                    now + every.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return false;
        }
        let mut changed = self.generation.subscribe();
        changed.borrow_and_update();
        self.wanted.notify_one();
        matches!(
            tokio::time::timeout(wait, changed.changed()).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_signature_keys_are_kept() {
        let doc = br#"{"keys":[
            {"kty":"EC","crv":"P-256","kid":"ec","alg":"ES256",
             "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty":"oct","kid":"secret","k":"c2VjcmV0"},
            {"kty":"EC","crv":"P-256","kid":"enc","use":"enc",
             "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty":"EC","crv":"P-256","kid":"mismatch","alg":"RS256",
             "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
        ]}"#;
        let (set, skipped) = KeySet::parse(doc).unwrap();
        let kids: Vec<_> = set
            .candidates(None)
            .map(|k| k.kid.clone().unwrap())
            .collect();
        assert_eq!(kids, ["ec", "ed"]);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(
            skipped[0].starts_with("key \"secret\": a symmetric"),
            "{skipped:?}"
        );
        assert!(
            skipped[1].starts_with("key \"enc\": an encryption key"),
            "{skipped:?}"
        );
        assert!(skipped[2].contains("does not fit"), "{skipped:?}");
        assert_eq!(set.candidates(Some("ed")).count(), 1);
        assert_eq!(set.candidates(Some("nope")).count(), 0);
        assert!(
            KeySet::parse(b"[]")
                .err()
                .unwrap()
                .starts_with("not a JSON Web Key Set")
        );
    }

    #[test]
    fn algorithms_fit_key_types() {
        use Algorithm::*;
        assert!(KeyType::Rsa.verifies(RS256) && KeyType::Rsa.verifies(PS256));
        assert!(!KeyType::Rsa.verifies(HS256) && !KeyType::Rsa.verifies(ES256));
        assert!(KeyType::P256.verifies(ES256) && !KeyType::P256.verifies(ES384));
        assert!(KeyType::P384.verifies(ES384) && !KeyType::Ed25519.verifies(HS512));
        assert!(KeyType::Ed25519.verifies(EdDSA));
    }

    #[tokio::test(start_paused = true)]
    async fn a_refetch_is_asked_at_most_once_per_period() {
        let jwks = Jwks::new(KeySet::default(), Some(Duration::from_secs(300)));
        let reader = {
            let jwks = Arc::clone(&jwks);
            tokio::spawn(async move {
                jwks.wanted().await;
                jwks.store(KeySet::default());
            })
        };
        assert!(
            jwks.refetch(Duration::from_secs(2)).await,
            "the first ask is answered"
        );
        reader.await.unwrap();
        assert!(
            !jwks.refetch(Duration::from_secs(2)).await,
            "the next is too soon"
        );
        assert_eq!(jwks.generation(), 1);
        let file = Jwks::new(KeySet::default(), None);
        assert!(
            !file.refetch(Duration::from_secs(2)).await,
            "a file is not asked"
        );
    }
}
