//! Unit-test support.

/// A seeded xorshift64 generator for the unit tests: repeatable inputs without a dependency.
pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
