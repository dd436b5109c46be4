//! Decimal digits to numbers, for both direct sources: digit runs, strings of digits, and
//! decimal fractions correctly rounded. Digits are read one at a time: reading eight at a time
//! in one 64-bit word (SWAR) measured no faster on the workloads' numbers, which are short
//! (BENCHMARKS.md, 2026-12-02 (74d1275..ab7bc52) and 2026-12-03 (74d06ad..d13308e)).

/// 10^0 to 10^19: every power of ten a u64 holds.
pub(crate) const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// `mag / 10^k` correctly rounded to the nearest double (ties to even), for `mag` ≥ 1 and
/// `k` ≤ 19: by a multiplication with 10^-k ([`times_reciprocal`]) where that decides the
/// rounding, else ([`exact_quotient`]) the exact quotient of `mag · 2^s` (normalised to 128
/// bits) by `10^k` in integer arithmetic, its top 53 bits rounded by the bits and the remainder
/// below them. The results lie between 10^-19 and 2^64, normal doubles. `json_src`'s
/// `short_numbers_equal_the_general_parse` holds it to the standard library's parse.
pub(crate) fn div_pow10(mag: u64, k: usize) -> f64 {
    times_reciprocal(mag, k).unwrap_or_else(|| exact_quotient(mag, k))
}

/// [`div_pow10`] by dividing.
fn exact_quotient(mag: u64, k: usize) -> f64 {
    let d = u128::from(POW10[k]);
    let s = 64 + mag.leading_zeros();
    let n = u128::from(mag) << s;
    let q = n / d;
    let r = n - q * d;
    // q ≥ 2^127 / 10^19 > 2^64: more bits than the mantissa's 53.
    let drop = 128 - q.leading_zeros() - 53;
    let mant = (q >> drop) as u64;
    let rest = q & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    let up = rest > half || (rest == half && (r != 0 || mant & 1 == 1));
    let (mut m, mut e) = (mant + u64::from(up), drop as i32 - s as i32);
    if m == 1 << 53 {
        m >>= 1;
        e += 1;
    }
    // m · 2^e with m in [2^52, 2^53): biased exponent e + 52 + 1023.
    f64::from_bits((((e + 52 + 1023) as u64) << 52) | (m & ((1 << 52) - 1)))
}

/// `⌈2^(127 + e) / 10^k⌉` for k = 1 to 19, where `e` is 10^k's bit length: 10^-k as a 128-bit
/// fraction with its top bit set, rounded up. Made by long division at compile time.
const RECIPROCALS: [u128; 20] = {
    let mut t = [0u128; 20];
    let mut k = 1;
    while k < 20 {
        let d = POW10[k] as u128;
        let e = 128 - d.leading_zeros();
        // The numerator 2^(127 + e) one bit at a time: a one, then zeros.
        let (mut q, mut r) = (0u128, 0u128);
        let mut bit = 0;
        while bit < 128 + e {
            r = 2 * r + if bit == 0 { 1 } else { 0 };
            q <<= 1;
            if r >= d {
                r -= d;
                q |= 1;
            }
            bit += 1;
        }
        t[k] = if r == 0 { q } else { q + 1 };
        k += 1;
    }
    t
};

/// [`div_pow10`] by multiplying with [`RECIPROCALS`]: two 64-bit multiplications where the
/// exact quotient calls the 128-bit division (`__udivti3`, a hardware `div` of 40-90 cycles
/// inside). The product's
/// top 64 bits `q` are the scaled quotient `t`, or `⌊t⌋ + 1` when `t` lies within 2^-64 below
/// an integer (the reciprocal is at most one unit high, the magnitude below 2^64): so `t`'s
/// bits below the mantissa lie in `[low − 2^-64, low + 1)` for `q`'s `low`, which decides the
/// rounding unless `low` is exactly half (a tie, or next to one): then `None`, and the exact
/// division decides.
#[inline]
fn times_reciprocal(mag: u64, k: usize) -> Option<f64> {
    let r = *RECIPROCALS.get(k).filter(|&&r| r != 0)?;
    let e = 64 - POW10[k].leading_zeros() as i32;
    let lz = mag.leading_zeros();
    let m = u128::from(mag << lz);
    let (r_hi, r_lo) = (r >> 64, r & u128::from(u64::MAX));
    let high = m * r_hi;
    let q = ((high + ((m * r_lo) >> 64)) >> 64) as u64;
    // q ≥ 2^62: 53 mantissa bits and 10 or 11 below them.
    let drop = 64 - q.leading_zeros() - 53;
    let low = q & ((1 << drop) - 1);
    let half = 1 << (drop - 1);
    if low == half {
        return None;
    }
    let (mut mant, mut exp) = (
        (q >> drop) + u64::from(low > half),
        drop as i32 + 1 - e - lz as i32,
    );
    if mant == 1 << 53 {
        mant >>= 1;
        exp += 1;
    }
    // mant · 2^exp with mant in [2^52, 2^53): biased exponent exp + 52 + 1023.
    Some(f64::from_bits(
        (((exp + 52 + 1023) as u64) << 52) | (mant & ((1 << 52) - 1)),
    ))
}

/// The run of decimal digits at `b[start..]` appended to `mag` (wrapping: callers bound the
/// count): where the run ends, and the value.
#[inline(always)]
pub(crate) fn decimal_run(b: &[u8], start: usize, mut mag: u64) -> (usize, u64) {
    let mut i = start;
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        mag = mag.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    (i, mag)
}

/// An integer of 1 to 18 decimal digits, optionally negative (always an i64), at
/// `b[start..]`: its value and where its digits end (what follows is the caller's to check).
#[inline(always)]
pub(crate) fn integer_run(b: &[u8], start: usize) -> Option<(i64, usize)> {
    let neg = b.get(start) == Some(&b'-');
    let digits = start + usize::from(neg);
    let (end, mag) = decimal_run(b, digits, 0);
    if !(1..=18).contains(&(end - digits)) {
        return None;
    }
    // At most 18 digits: below 10^18 < 2^63.
    let v = mag as i64;
    Some((if neg { -v } else { v }, end))
}

/// A string of 1 to 18 decimal digits, optionally negative (always an i64).
#[inline]
pub(crate) fn plain_integer(b: &[u8]) -> Option<i64> {
    match integer_run(b, 0)? {
        (v, end) if end == b.len() => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multiplication agrees with the exact division wherever it answers, and leaves
    /// few to it; at every k, for magnitudes of every length, and at ties.
    #[test]
    fn reciprocals_round_as_the_exact_division() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut answered, mut asked) = (0, 0);
        for _ in 0..400_000 {
            let k = 1 + (next() % 19) as usize;
            let mag = (next() >> (next() % 63)).max(1);
            // A tie: an odd multiple of half a unit of the mantissa at mag's scale.
            let tie = (mag | 1) << (mag.leading_zeros().min(11));
            for mag in [mag, tie, tie.wrapping_add(1).max(1), tie - 1] {
                asked += 1;
                if let Some(f) = times_reciprocal(mag, k) {
                    answered += 1;
                    let want = exact_quotient(mag, k);
                    assert_eq!(f.to_bits(), want.to_bits(), "{mag} / 10^{k}");
                }
            }
        }
        assert!(answered * 100 > asked * 95, "{answered} of {asked}");
        for k in 0..20 {
            assert_eq!(
                div_pow10(1, k),
                format!("1e-{k}").parse::<f64>().unwrap(),
                "{k}"
            );
            let max = div_pow10(u64::MAX, k);
            assert_eq!(
                max,
                format!("{}e-{k}", u64::MAX).parse::<f64>().unwrap(),
                "{k}"
            );
        }
    }

    #[test]
    fn plain_integers_read_as_the_standard_parse() {
        for s in [
            "0",
            "-0",
            "7",
            "-7",
            "12345678",
            "123456789",
            "-123456789012345678",
            "999999999999999999",
            "1718000000000",
            "00000001",
            "0000000012",
        ] {
            assert_eq!(plain_integer(s.as_bytes()), s.parse().ok(), "{s}");
        }
        for s in [
            "",
            "-",
            "+1",
            "1x",
            "12345678x",
            "1234567x9",
            "1000000000000000000",
            "1 ",
            "1.0",
            "--1",
            "12345678/",
            "12345678:",
        ] {
            assert_eq!(plain_integer(s.as_bytes()), None, "{s}");
        }
    }
}
