//! String forms of the well-known types with a special JSON mapping: Timestamp (RFC 3339),
//! Duration (`"1.5s"`), FieldMask (comma-joined lowerCamelCase paths).
//!
//! Ranges follow google/protobuf/timestamp.proto and duration.proto: timestamps from
//! 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z, durations up to ±315,576,000,000 s
//! (10,000 years).

pub(crate) const TIMESTAMP_MIN: i64 = -62_135_596_800;
pub(crate) const TIMESTAMP_MAX: i64 = 253_402_300_799;
pub(crate) const DURATION_MAX: i64 = 315_576_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn push_fraction(out: &mut String, nanos: u32) {
    if nanos == 0 {
        return;
    }
    if nanos.is_multiple_of(1_000_000) {
        out.push_str(&format!(".{:03}", nanos / 1_000_000));
    } else if nanos.is_multiple_of(1_000) {
        out.push_str(&format!(".{:06}", nanos / 1_000));
    } else {
        out.push_str(&format!(".{nanos:09}"));
    }
}

/// RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits, as every protobuf runtime prints it.
pub(crate) fn format_timestamp(seconds: i64, nanos: i32) -> Result<String, String> {
    if !(TIMESTAMP_MIN..=TIMESTAMP_MAX).contains(&seconds) {
        return Err(format!(
            "Timestamp seconds {seconds} out of range 0001-01-01..9999-12-31"
        ));
    }
    if !(0..=999_999_999).contains(&nanos) {
        return Err(format!("Timestamp nanos {nanos} out of range 0..999999999"));
    }
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut s = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    push_fraction(&mut s, nanos as u32);
    s.push('Z');
    Ok(s)
}

fn digits(s: &[u8], n: usize) -> Option<u32> {
    if s.len() < n || !s[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s[..n].iter().fold(0u32, |a, &b| a * 10 + (b - b'0') as u32))
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)`. Upper-case `T` and `Z` only, as json_format.
pub(crate) fn parse_timestamp(s: &str) -> Option<(i64, i32)> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = digits(b, 4)? as i64;
    let month = digits(&b[5..], 2)?;
    let day = digits(&b[8..], 2)?;
    let hour = digits(&b[11..], 2)?;
    let min = digits(&b[14..], 2)?;
    let sec = digits(&b[17..], 2)?;
    if year == 0 || !(1..=12).contains(&month) || hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day == 0 || day > month_days[month as usize - 1] {
        return None;
    }
    let mut rest = &b[19..];
    let mut nanos = 0u32;
    if rest.first() == Some(&b'.') {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        nanos = digits(&rest[1..], n)? * 10u32.pow(9 - n as u32);
        rest = &rest[1 + n..];
    }
    let offset: i64 = match rest {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = digits(&[*h1, *h2], 2)? as i64;
            let om = digits(&[*m1, *m2], 2)? as i64;
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400
        + hour as i64 * 3600
        + min as i64 * 60
        + sec as i64
        - offset;
    if !(TIMESTAMP_MIN..=TIMESTAMP_MAX).contains(&seconds) {
        return None;
    }
    Some((seconds, nanos as i32))
}

/// `"-1.500s"`: seconds and 0, 3, 6 or 9 fraction digits.
pub(crate) fn format_duration(seconds: i64, nanos: i32) -> Result<String, String> {
    if !(-DURATION_MAX..=DURATION_MAX).contains(&seconds) {
        return Err(format!(
            "Duration seconds {seconds} out of range ±{DURATION_MAX}"
        ));
    }
    if !(-999_999_999..=999_999_999).contains(&nanos) {
        return Err(format!("Duration nanos {nanos} out of range"));
    }
    if (seconds < 0 && nanos > 0) || (seconds > 0 && nanos < 0) {
        return Err("Duration seconds and nanos have different signs".to_owned());
    }
    let mut s = String::new();
    if seconds < 0 || nanos < 0 {
        s.push('-');
    }
    s.push_str(&seconds.unsigned_abs().to_string());
    push_fraction(&mut s, nanos.unsigned_abs());
    s.push('s');
    Ok(s)
}

/// Parses `-?\d+(\.\d{1,9})?s` within the Duration range.
pub(crate) fn parse_duration(s: &str) -> Option<(i64, i32)> {
    let body = s.strip_suffix('s')?;
    let (neg, body) = match body.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    if int.is_empty() || int.len() > 12 || !int.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: i64 = int.parse().ok()?;
    let mut nanos: i64 = 0;
    if let Some(f) = frac {
        if f.is_empty() || f.len() > 9 || !f.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        nanos = f.parse::<i64>().ok()? * 10i64.pow(9 - f.len() as u32);
    }
    if secs > DURATION_MAX {
        return None;
    }
    Some(if neg {
        (-secs, -nanos as i32)
    } else {
        (secs, nanos as i32)
    })
}

/// FieldMask path on output: `foo_bar.baz` → `fooBar.baz`; rejects what cannot round-trip.
pub(crate) fn field_mask_path_to_json(path: &str) -> Result<String, String> {
    let mut out = String::with_capacity(path.len());
    let mut after_underscore = false;
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            return Err(format!(
                "FieldMask path {path:?} must not contain uppercase letters"
            ));
        }
        if after_underscore {
            if !c.is_ascii_lowercase() {
                return Err(format!(
                    "FieldMask path {path:?}: the character after \"_\" must be a lowercase letter"
                ));
            }
            out.push(c.to_ascii_uppercase());
            after_underscore = false;
        } else if c == '_' {
            after_underscore = true;
        } else {
            out.push(c);
        }
    }
    if after_underscore {
        return Err(format!("FieldMask path {path:?} must not end with \"_\""));
    }
    Ok(out)
}

/// FieldMask path on input: `fooBar.baz` → `foo_bar.baz`; `_` is not allowed.
pub(crate) fn field_mask_path_from_json(path: &str) -> Option<String> {
    let mut out = String::with_capacity(path.len() + 4);
    for c in path.chars() {
        if c == '_' {
            return None;
        }
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_at_the_limits() {
        for (secs, nanos, text) in [
            (0, 0, "1970-01-01T00:00:00Z"),
            (TIMESTAMP_MIN, 0, "0001-01-01T00:00:00Z"),
            (TIMESTAMP_MAX, 999_999_999, "9999-12-31T23:59:59.999999999Z"),
            (1_718_000_000, 120_000_000, "2024-06-10T06:13:20.120Z"),
            (951_782_400, 1_000, "2000-02-29T00:00:00.000001Z"),
        ] {
            assert_eq!(format_timestamp(secs, nanos).unwrap(), text);
            assert_eq!(parse_timestamp(text), Some((secs, nanos)));
        }
        assert_eq!(parse_timestamp("1970-01-01T01:00:00+01:00"), Some((0, 0)));
        assert_eq!(parse_timestamp("1969-12-31T19:00:00-05:00"), Some((0, 0)));
        for bad in [
            "1970-01-01t00:00:00Z",
            "1970-01-01T00:00:00z",
            "1970-01-01T00:00:00",
            "1970-01-01T00:00:00.Z",
            "1970-01-01T00:00:00.1234567890Z",
            "0000-01-01T00:00:00Z",
            "0001-01-01T00:00:00+00:01",
            "1970-02-30T00:00:00Z",
            "1970-01-01T24:00:00Z",
            "1970-01-01T00:00:60Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
        assert!(format_timestamp(TIMESTAMP_MAX + 1, 0).is_err());
        assert!(format_timestamp(0, -1).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(1, 500_000_000).unwrap(), "1.500s");
        assert_eq!(format_duration(0, -500_000_000).unwrap(), "-0.500s");
        assert_eq!(
            format_duration(-DURATION_MAX, -999_999_999).unwrap(),
            "-315576000000.999999999s"
        );
        assert!(format_duration(1, -1).is_err());
        assert_eq!(parse_duration("-0.5s"), Some((0, -500_000_000)));
        assert_eq!(parse_duration("315576000000s"), Some((DURATION_MAX, 0)));
        assert_eq!(parse_duration("315576000001s"), None);
        assert_eq!(parse_duration("1"), None);
        assert_eq!(parse_duration("1.s"), None);
    }

    #[test]
    fn field_mask_paths() {
        assert_eq!(
            field_mask_path_to_json("foo_bar.baz_qux").unwrap(),
            "fooBar.bazQux"
        );
        assert!(field_mask_path_to_json("fooBar").is_err());
        assert!(field_mask_path_to_json("foo__bar").is_err());
        assert_eq!(
            field_mask_path_from_json("fooBar.bazQux").unwrap(),
            "foo_bar.baz_qux"
        );
        assert_eq!(field_mask_path_from_json("foo_bar"), None);
    }
}
