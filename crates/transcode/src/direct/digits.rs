//! Decimal digits to numbers, for both direct sources: digit runs, strings of digits, and
//! decimal fractions divided exactly. Digits are read one at a time: reading eight at a time
//! in one 64-bit word (SWAR) measured no faster on the workloads' numbers, which are short
//! (BENCHMARKS.md, sessions 11 and 14).

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
/// `k` ≤ 19: the exact quotient of `mag · 2^s` (normalised to 128 bits) by `10^k` in integer
/// arithmetic, its top 53 bits rounded by the bits and the remainder below them. The results
/// lie between 10^-19 and 2^64, normal doubles. `json_src`'s `short_numbers_equal_the_general_parse`
/// holds it to the standard library's parse.
pub(crate) fn div_pow10(mag: u64, k: usize) -> f64 {
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
