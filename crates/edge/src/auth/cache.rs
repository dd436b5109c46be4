//! Verified tokens kept by their text: an RS256 signature check costs far more than the rest
//! of a request, and a client sends the same token until it expires. Bounded (least recently
//! used out first); an entry is dropped when its token expires or the key set changes (a key
//! that left must not keep its tokens valid).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};

use lru::LruCache;

use super::Verified;

/// Tokens kept by default (`token_cache`; at ~1 KiB a token, a few MiB).
pub const CAPACITY: usize = 4096;

struct Entry {
    verified: Arc<Verified>,
    /// Seconds since the epoch, leeway included.
    valid_until: u64,
    generation: u64,
}

pub struct TokenCache {
    tokens: Mutex<LruCache<Box<[u8]>, Entry>>,
}

impl TokenCache {
    pub fn new(capacity: usize) -> TokenCache {
        TokenCache {
            tokens: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    /// The token's verification, when kept, still valid at `now` and of the key set in force.
    pub fn get(&self, token: &[u8], now: u64, generation: u64) -> Option<Arc<Verified>> {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = tokens.get(token)?;
        if entry.generation == generation && now <= entry.valid_until {
            return Some(Arc::clone(&entry.verified));
        }
        tokens.pop(token);
        None
    }

    pub fn put(&self, token: &[u8], verified: Arc<Verified>, valid_until: u64, generation: u64) {
        let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        tokens.put(
            token.into(),
            Entry {
                verified,
                valid_until,
                generation,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::Proof;
    use super::*;

    #[test]
    fn entries_leave_when_expired_replaced_or_pushed_out() {
        let cache = TokenCache::new(2);
        let v = |name: &str| Arc::new(Verified::new(name, Proof::Token, Vec::new()));
        cache.put(b"a", v("a"), 100, 1);
        assert_eq!(&*cache.get(b"a", 100, 1).unwrap().client, "a");
        assert!(cache.get(b"a", 101, 1).is_none(), "expired");
        assert!(cache.get(b"a", 50, 1).is_none(), "and gone");
        cache.put(b"b", v("b"), 100, 1);
        assert!(cache.get(b"b", 50, 2).is_none(), "another key set");
        cache.put(b"c", v("c"), 100, 1);
        cache.put(b"d", v("d"), 100, 1);
        cache.put(b"e", v("e"), 100, 1);
        assert!(cache.get(b"c", 50, 1).is_none(), "pushed out");
        assert!(cache.get(b"e", 50, 1).is_some());
    }
}
