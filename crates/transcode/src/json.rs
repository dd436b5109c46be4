//! JSON text: parsing into the input tree and writing a rendered tree.
//!
//! Output is compact UTF-8 JSON. Doubles print in their shortest round-trip form, float fields
//! as json_format prints them (shortest float32 round trip, at least 6 significant digits; see
//! `float32_text`); non-finite values as the strings "NaN", "Infinity", "-Infinity";
//! 64-bit integers as decimal strings; bytes as standard base64 with padding.

use std::cell::Cell;

use serde::de::DeserializeSeed;

use crate::Error;
use crate::error::{ErrorKind, line_col};
use crate::special::{plain, special_or_high};
use crate::tree::{In, InSeed, Out};

/// Parses JSON text, nesting bounded by `max_containers` arrays/objects.
pub(crate) fn parse(input: &[u8], max_containers: usize) -> Result<In, Error> {
    let mut de = serde_json::Deserializer::from_slice(input);
    // InSeed bounds the depth itself; serde_json's fixed limit of 128 would be stricter than
    // the reference for arrays of messages.
    de.disable_recursion_limit();
    let big_doubles = Cell::new(false);
    let mut v = InSeed {
        depth_left: max_containers,
        big_doubles: &big_doubles,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|_| v))
    .map_err(|e| json_error(input, &e))?;
    if big_doubles.get() {
        let mut literals = integer_literals(input).into_iter();
        mark_big_integers(&mut v, &mut literals);
    }
    Ok(v)
}

/// For each number in the (well-formed) JSON text, in order: whether it is an integer literal
/// (no fraction, no exponent).
fn integer_literals(input: &[u8]) -> Vec<bool> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        match b {
            b'"' => {
                i += 1;
                while let Some(&c) = input.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == b'"' {
                        break;
                    }
                }
            }
            b'-' | b'0'..=b'9' => match crate::scalar::json_number_len(&input[i..]) {
                Some((len, integral)) => {
                    out.push(integral);
                    i += len;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    out
}

/// Turns the doubles that were integer literals into [`In::BigInt`]: serde_json reads integer
/// literals as I64/U64 when they fit, so those are the ones beyond the 64-bit range. Numbers
/// appear in the tree in the order of the text (JSON object keys are strings).
fn mark_big_integers(v: &mut In, literals: &mut impl Iterator<Item = bool>) {
    match v {
        In::I64(_) | In::U64(_) | In::BigInt(_) => {
            literals.next();
        }
        In::F64(f) => {
            // Only literals beyond the 64-bit range: serde_json also reads `-0` as a double.
            if literals.next() == Some(true) && f.abs() >= 9_223_372_036_854_775_808.0 {
                *v = In::BigInt(*f);
            }
        }
        In::List(items) => items
            .iter_mut()
            .for_each(|item| mark_big_integers(item, literals)),
        In::Map(entries) => {
            for (k, item) in entries {
                mark_big_integers(k, literals);
                mark_big_integers(item, literals);
            }
        }
        In::Null | In::Bool(_) | In::Str(_) | In::Bytes(_) => {}
    }
}

fn json_error(input: &[u8], e: &serde_json::Error) -> Error {
    let (line, column) = (e.line(), e.column());
    // serde_json reports 1-based line and column (in bytes); turn them into a byte offset.
    let text = String::from_utf8_lossy(input);
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            offset += column.saturating_sub(1).min(l.len());
            break;
        }
        offset += l.len();
    }
    let offset = offset.min(input.len());
    let (line, column) = if line == 0 {
        line_col(&text, offset)
    } else {
        (line, column)
    };
    let mut message = e.to_string();
    if let Some(i) = message.find(" at line ") {
        message.truncate(i);
    }
    Error::new(ErrorKind::MalformedJson {
        offset,
        line,
        column,
        message,
    })
}

/// Writes a rendered tree as JSON.
pub(crate) fn write(v: &Out, out: &mut Vec<u8>) {
    match v {
        Out::Null => out.extend_from_slice(b"null"),
        Out::Bool(true) => out.extend_from_slice(b"true"),
        Out::Bool(false) => out.extend_from_slice(b"false"),
        Out::I32(x) => out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
        Out::U32(x) => out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes()),
        Out::I64(x) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes());
            out.push(b'"');
        }
        Out::U64(x) => {
            out.push(b'"');
            out.extend_from_slice(itoa::Buffer::new().format(*x).as_bytes());
            out.push(b'"');
        }
        Out::F32(x) => write_f32(out, *x),
        Out::F64(x) => write_f64(out, *x),
        Out::Str(s) => write_str(out, s),
        Out::Bytes(b) => write_bytes(out, b),
        Out::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Out::Map(entries) => {
            out.push(b'{');
            for (i, (k, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
    }
}

/// Writes a rendered tree as indented JSON (see `crate::indent`), `level` levels deep.
pub(crate) fn write_indented(v: &Out, out: &mut Vec<u8>, width: u8, level: usize) {
    use crate::indent::newline;
    match v {
        Out::List(items) if !items.is_empty() => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, level + 1, width);
                write_indented(item, out, width, level + 1);
            }
            newline(out, level, width);
            out.push(b']');
        }
        Out::Map(entries) if !entries.is_empty() => {
            out.push(b'{');
            for (i, (k, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, level + 1, width);
                write_str(out, k);
                out.extend_from_slice(b": ");
                write_indented(item, out, width, level + 1);
            }
            newline(out, level, width);
            out.push(b'}');
        }
        _ => write(v, out),
    }
}

/// A float field's value (float32 precision, json_format's digits).
#[inline]
pub(crate) fn write_f32(out: &mut Vec<u8>, x: f32) {
    if x.is_finite() && x.is_normal() && x.to_bits() & 0x007f_ffff != 0 {
        out.extend_from_slice(ryu::Buffer::new().format_finite(x).as_bytes());
    } else {
        write_float(out, x as f64, || float32_text(x));
    }
}

/// A double field's value: shortest round trip; NaN and infinities as strings.
#[inline]
pub(crate) fn write_f64(out: &mut Vec<u8>, x: f64) {
    // Whole numbers below 10^15 (exact, and one unit apart at most): their digits and ".0",
    // which is what ryu writes for them — by its slowest path, stripping trailing zeros one
    // division at a time. Zero is left to ryu (-0.0).
    let whole = x as i64; // saturating, NaN as 0: checked by the comparison
    if whole as f64 == x && x.abs() < 1e15 && x != 0.0 {
        out.extend_from_slice(itoa::Buffer::new().format(whole).as_bytes());
        out.extend_from_slice(b".0");
    } else if x.is_finite() {
        if !short_decimal(out, x) {
            write_shortest(out, x);
        }
    } else {
        write_float(out, x, String::new);
    }
}

/// A finite double's shortest round-trip digits as ryu writes them. zmij (Schubfach) finds
/// the same digits in about half of ryu's instructions (192 against 339 per 17-digit value,
/// callgrind) and writes them the same way except for a `+` in positive exponents
/// (`1e+16`), which only values from 10^16 up have: those stay with ryu.
#[inline]
fn write_shortest(out: &mut Vec<u8>, x: f64) {
    if x.abs() < 1e16 {
        out.extend_from_slice(zmij::Buffer::new().format_finite(x).as_bytes());
    } else {
        out.extend_from_slice(ryu::Buffer::new().format_finite(x).as_bytes());
    }
}

/// A double with one to four decimals (`99.99`, `0.15`) written as ryu writes it, without
/// ryu. Below 10^7 a double's rounding interval (< 2.3·10^-9 wide) holds at most one
/// four-decimal number, and any shorter decimal in it is that number without its trailing
/// zeros: so if the four-decimal number next to `x` reads back as `x` (an IEEE division of two
/// exact doubles is the correctly rounded quotient, as a parser's result is), its digits less
/// trailing zeros are the shortest, which ryu prints. Otherwise, or outside [10^-3, 10^7)
/// where ryu's notation changes, false: ryu writes it.
#[inline]
fn short_decimal(out: &mut Vec<u8>, x: f64) -> bool {
    let ax = x.abs();
    if !(1e-3..1e7).contains(&ax) {
        return false;
    }
    // Below 10^11, off by at most ~10^-5: the decimal next to `x` is n or n + 1. As i64,
    // which x86-64 converts to and from doubles in one instruction each (u64 takes a branch).
    let n = (ax * 1e4) as i64;
    let m = if n as f64 / 1e4 == ax {
        n as u64
    } else if (n + 1) as f64 / 1e4 == ax {
        n as u64 + 1
    } else {
        return false;
    };
    // The decimals as four digits, and how many of them are not trailing zeros (all
    // divisions by constants: multiplies).
    let (int, frac) = (m / 10_000, (m % 10_000) as usize);
    let k = if frac == 0 {
        return false;
    } else if frac % 1000 == 0 {
        1
    } else if frac % 100 == 0 {
        2
    } else if frac % 10 == 0 {
        3
    } else {
        4
    };
    if x < 0.0 {
        out.push(b'-');
    }
    // Whole parts below 100 (prices) from the digit pairs: itoa's call to `memcpy` for a
    // variable length costs more than the digits.
    match int as usize {
        i @ 0..10 => out.push(b'0' + i as u8),
        i @ 10..100 => out.extend_from_slice(&[DIGIT_PAIRS[2 * i], DIGIT_PAIRS[2 * i + 1]]),
        _ => out.extend_from_slice(itoa::Buffer::new().format(int).as_bytes()),
    }
    let (hi, lo) = (frac / 100 * 2, frac % 100 * 2);
    out.extend_from_slice(&[
        b'.',
        DIGIT_PAIRS[hi],
        DIGIT_PAIRS[hi + 1],
        DIGIT_PAIRS[lo],
        DIGIT_PAIRS[lo + 1],
    ]);
    out.truncate(out.len() - 4 + k);
    true
}

/// "00" to "99", two bytes each.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Bytes as standard base64 with padding, quoted.
pub(crate) fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    use base64::Engine as _;
    out.push(b'"');
    let start = out.len();
    let len = base64::encoded_len(b.len(), true).unwrap_or(0);
    out.resize(start + len, 0);
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(b, &mut out[start..])
        .unwrap_or(0);
    out.truncate(start + n);
    out.push(b'"');
}

fn write_float(out: &mut Vec<u8>, x: f64, finite: impl FnOnce() -> String) {
    if x.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if x == f64::INFINITY {
        out.extend_from_slice(b"\"Infinity\"");
    } else if x == f64::NEG_INFINITY {
        out.extend_from_slice(b"\"-Infinity\"");
    } else {
        out.extend_from_slice(finite().as_bytes());
    }
}

/// A float field's value as json_format prints it (`type_checkers.ToShortestFloat`): the
/// correctly rounded decimal with the fewest significant digits, but at least 6, that reads
/// back (as a double, then rounded to float32) as the same float32.
///
/// For normal values that are not a power of two this is exactly the shortest round-trip form
/// (ryu): their rounding interval is symmetric and a float32 ULP is far below 6 digits'
/// spacing. Subnormals (`1.4013e-45`, not `1e-45`) and powers of two (asymmetric interval:
/// `1.26217745e-29`, not `1.2621775e-29`) take the digit-by-digit search.
fn float32_text(x: f32) -> String {
    if x.is_normal() && x.to_bits() & 0x007f_ffff != 0 {
        return ryu::Buffer::new().format_finite(x).to_owned();
    }
    let mut precision = 5;
    loop {
        // Rust's exponent format parses; were it not to, x's own (exact) f64 ends the search.
        let v: f64 = format!("{x:.precision$e}").parse().unwrap_or(f64::from(x));
        // Terminates: 17 significant digits give back any double exactly.
        if v as f32 == x {
            return ryu::Buffer::new().format_finite(v).to_owned();
        }
        precision += 1;
    }
}

/// A JSON string literal: `"` and `\\` escaped, control characters as `\n`-style or `\u00XX`.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    write_escaped(out, s.as_bytes(), true);
}

/// [`write_str`] for bytes not yet known to be UTF-8: validated in the same pass (ASCII needs
/// no other check; from the first non-ASCII byte on, `from_utf8` decides). False, with `out`
/// partly written, if they are not UTF-8.
pub(crate) fn write_str_bytes(out: &mut Vec<u8>, b: &[u8]) -> bool {
    write_escaped(out, b, false)
}

/// [`write_str_bytes`] for the first `len` bytes of `window`, which may hold more (the bytes
/// after the string in its buffer). A string of up to 32 bytes with nothing to escape and no
/// byte ≥ 0x80 (most names, ids, levels) is checked as whole words read from the window and
/// copied as a fixed 16 or 32 bytes: no loop over its bytes and no call to `memcpy`. Longer
/// strings are copied the same way 32 bytes at a time while they are plain ([`copy_runs`]);
/// strings to escape or to validate, and those too near their buffer's end, go to
/// `write_str_bytes` (from the first chunk that is not plain, for long ones).
#[inline]
pub(crate) fn write_str_window(out: &mut Vec<u8>, window: &[u8], len: usize) -> bool {
    let copied = match len {
        0..=16 => copy_plain::<16>(out, window, len),
        17..=32 => copy_plain::<32>(out, window, len),
        _ => return copy_runs(out, window, len),
    };
    copied || write_str_bytes(out, &window[..len])
}

/// A string of over 32 bytes (`len` bytes of `window`): quoted, its plain 32-byte chunks
/// copied whole while the window holds them, the truncation undoing what was copied past its
/// end; from the first chunk that is not plain on, [`escaped_body`] writes the rest (the
/// bytes before it are ASCII, so validation may start there). False, with `out` partly
/// written, if the string is not UTF-8.
fn copy_runs(out: &mut Vec<u8>, window: &[u8], len: usize) -> bool {
    out.push(b'"');
    let mut i = 0;
    while i < len {
        let Some(w) = window.get(i..).and_then(<[u8]>::first_chunk::<32>) else {
            break;
        };
        if !plain(w, len - i) {
            break;
        }
        out.extend_from_slice(w);
        i += 32;
    }
    if i >= len {
        out.truncate(out.len() - (i - len));
    } else if !escaped_body(out, &window[i..len], false) {
        return false;
    }
    out.push(b'"');
    true
}

/// The string (`len` bytes of `window`) quoted, copied as a fixed `N` bytes and a truncation,
/// if `window` holds `N` bytes and the string needs neither escapes nor a UTF-8 check.
#[inline(always)]
fn copy_plain<const N: usize>(out: &mut Vec<u8>, window: &[u8], len: usize) -> bool {
    let Some(w) = window.first_chunk::<N>() else {
        return false;
    };
    if !plain(w, len) {
        return false;
    }
    out.push(b'"');
    out.extend_from_slice(w);
    out.truncate(out.len() - N + len);
    out.push(b'"');
    true
}

fn write_escaped(out: &mut Vec<u8>, s: &[u8], validated: bool) -> bool {
    out.push(b'"');
    if !escaped_body(out, s, validated) {
        return false;
    }
    out.push(b'"');
    true
}

/// `s` escaped, without quotes; unless `validated`, checked for UTF-8 on the way (false, with
/// `out` partly written, if it is not).
fn escaped_body(out: &mut Vec<u8>, s: &[u8], mut validated: bool) -> bool {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut rest = s;
    loop {
        let n = special_or_high(rest, !validated);
        out.extend_from_slice(&rest[..n]);
        let Some(&b) = rest.get(n) else { break };
        if b >= 0x80 {
            // `rest[n]` starts a character (everything before it is ASCII).
            if std::str::from_utf8(&rest[n..]).is_err() {
                return false;
            }
            validated = true;
            rest = &rest[n..];
            continue;
        }
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
        rest = &rest[n + 1..];
    }
    true
}

#[cfg(test)]
mod tests {
    use crate::xorshift;

    /// `write_f64` writes each of `values` as ryu does.
    fn assert_all_as_ryu(values: impl IntoIterator<Item = f64>) {
        for x in values {
            let mut out = Vec::new();
            write_f64(&mut out, x);
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                ryu::Buffer::new().format_finite(x),
                "{x:?}"
            );
        }
    }

    #[test]
    fn short_decimals_print_as_ryu_prints_them() {
        let mut next = xorshift(0x1234_5678_9abc_def1u64);
        let mut values: Vec<f64> = vec![
            99.99,
            0.15,
            0.1,
            0.2,
            0.3,
            1.005,
            2.675,
            0.001,
            0.0015,
            1e-3,
            9999999.9999,
            1e7 - 0.5,
            1e7 + 0.5,
            0.0001,
            0.00095,
            1234567.8125,
        ];
        for _ in 0..400_000 {
            let k = 1 + next() % 6;
            let digits = next() % 15;
            let m = (next() % 10u64.pow(digits as u32 + 1)) as f64;
            let v = m / 10f64.powi(k as i32);
            values.push(if next().is_multiple_of(2) { v } else { -v });
            // Arbitrary doubles too, and the neighbours of short decimals.
            values.push(f64::from_bits(next()));
            values.push(f64::from_bits(v.to_bits().wrapping_add(1)));
            values.push(f64::from_bits(v.to_bits().wrapping_sub(1)));
        }
        assert_all_as_ryu(values.into_iter().filter(|x| x.is_finite()));
    }

    /// Doubles past the short paths (zmij below 10^16, ryu above): the notation's edges
    /// and their neighbours, extremes, subnormals and 17-digit values such as latencies.
    #[test]
    fn shortest_doubles_print_as_ryu_prints_them() {
        let mut next = xorshift(0x5eed_f0d0_ab1e_5eedu64);
        let mut values = vec![f64::MAX, f64::MIN_POSITIVE, 5e-324, 1.2e-322, 0.1 + 0.2];
        for edge in [1e16f64, 1e15, 1e-5, 1e-6, 1e-4, 1e21, 1e22, 1e-7] {
            for x in [edge, -edge] {
                for d in 0..4u64 {
                    values.push(f64::from_bits(x.to_bits() + d));
                    values.push(f64::from_bits(x.to_bits() - d));
                }
            }
        }
        for _ in 0..200_000 {
            values.push((next() >> 11) as f64 / (1u64 << 53) as f64 * 200.0);
            let e = next() % 40;
            values.push((next() >> 11) as f64 * 10f64.powi(e as i32 - 30));
        }
        assert_all_as_ryu(values);
    }

    #[test]
    fn whole_doubles_print_as_ryu_prints_them() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut values: Vec<f64> = vec![
            1.0,
            -1.0,
            10.0,
            20.0,
            1e14,
            999_999_999_999_999.0,
            -1e14,
            1e15,
            1e16,
            0.0,
            -0.0,
        ];
        for _ in 0..100_000 {
            let digits = next() % 16;
            let v = (next() % 10u64.pow(digits as u32 + 1)) as f64;
            values.push(if next().is_multiple_of(2) { v } else { -v });
        }
        assert_all_as_ryu(values);
    }

    /// A string written from a window agrees with the careful path, byte for byte and in
    /// its answer, for every length up to 100 (several 32-byte chunks) with special,
    /// non-ASCII and invalid bytes at any place and any bytes after the string in its window
    /// (or none).
    #[test]
    fn strings_from_a_window_write_as_the_careful_path() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for len in 0..=100usize {
            for _ in 0..400 {
                let extra = (next() % 40) as usize;
                // Special bytes common, or rare (most strings then plain).
                let odds = [30, 30 * len as u64 + 30][(next() % 2) as usize];
                let w: Vec<u8> = (0..len + extra)
                    .map(|_| {
                        let x = next();
                        match x % odds {
                            0 => b'"',
                            1 => b'\\',
                            2 => (x >> 8) as u8 % 0x20,
                            3 => 0x80 + (x >> 8) as u8 % 0x80,
                            4 => 0xc3,
                            _ => 0x20 + (x >> 8) as u8 % 0x5f,
                        }
                    })
                    .collect();
                let (mut fast, mut careful) = (Vec::new(), Vec::new());
                let a = write_str_window(&mut fast, &w, len);
                let b = write_str_bytes(&mut careful, &w[..len]);
                assert_eq!(a, b, "{w:?} {len}");
                if a {
                    assert_eq!(fast, careful, "{w:?} {len}");
                }
            }
        }
    }

    use super::*;

    #[test]
    fn integer_literals_beyond_64_bits_are_marked() {
        let v = parse(
            br#"{"a": [-9223372036854775809, -9223372036854775808.0, "-1e99 \"9", 18446744073709551616], "b": 2e19, "c": -9.3e18}"#,
            8,
        )
        .unwrap();
        let In::Map(entries) = v else { panic!() };
        let [(_, In::List(a)), (_, b), (_, c)] = entries.as_slice() else {
            panic!("{entries:?}")
        };
        assert_eq!(a[0], In::BigInt(-9223372036854775808.0));
        assert_eq!(a[1], In::F64(-9223372036854775808.0));
        assert_eq!(a[3], In::BigInt(18446744073709551616.0));
        assert_eq!(*b, In::F64(2e19));
        assert_eq!(*c, In::F64(-9.3e18));
    }

    #[test]
    fn float32_text_follows_json_format() {
        assert_eq!(float32_text(0.1), "0.1");
        assert_eq!(float32_text(-1.5), "-1.5");
        assert_eq!(float32_text(0.0), "0.0");
        assert_eq!(float32_text(-0.0), "-0.0");
        assert_eq!(float32_text(16777216.0), "16777216.0");
        assert_eq!(float32_text(f32::MAX), "3.4028235e38");
        assert_eq!(float32_text(f32::from_bits(1)), "1.4013e-45");
        assert_eq!(float32_text(-f32::from_bits(1)), "-1.4013e-45");
        assert_eq!(float32_text(f32::MIN_POSITIVE), "1.1754944e-38");
        assert_eq!(float32_text(2f32.powi(-96)), "1.26217745e-29");
    }
}
