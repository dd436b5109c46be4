//! The upstreams' random draws — the balancer's two choices, a retry's jittered backoff — from
//! a per-thread generator: a leaf, so that the pool and the retries both draw from it.

use std::cell::Cell;

/// A number below `n` from a per-thread xorshift generator seeded by the standard library's
/// random hasher keys: spread is needed, not secrecy.
pub(super) fn below(n: usize) -> usize {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(0);
            h.finish() | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        // Multiply-shift: unbiased enough for small n, no division.
        ((u128::from(x) * n as u128) >> 64) as usize
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_cover_the_range_evenly() {
        let mut seen = [0u32; 3];
        for _ in 0..30_000 {
            seen[super::below(3)] += 1;
        }
        for count in seen {
            assert!((9_000..11_000).contains(&count), "{seen:?}");
        }
    }
}
