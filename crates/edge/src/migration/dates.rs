//! Dates and durations as the sunset policy writes and reads them: RFC 3339 times
//! (`2027-01-01T00:00:00Z`, offsets allowed), ISO 8601 durations (`PT1H`, `P1DT12H`), brownout
//! windows (`start/duration` or `start/end`), and the two renderings the headers and the page
//! need (RFC 3339 in UTC, and the HTTP-date of RFC 9110 for `Sunset`).
//!
//! Written here rather than taken from `humantime`: its RFC 3339 parser accepts only `Z`, not
//! the offsets RFC 3339 allows, and a duration parser was needed anyway. Times before 1970
//! are refused (nothing in a sunset policy needs them).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A window in which JSON is refused, to make clients that ignore headers notice early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brownout {
    pub start: SystemTime,
    pub length: Duration,
}

impl Brownout {
    /// The end of the window (excluded).
    pub fn end(&self) -> SystemTime {
        self.start + self.length
    }

    pub fn contains(&self, t: SystemTime) -> bool {
        self.start <= t && t < self.end()
    }
}

/// A date, duration or window that does not parse: the input and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// What was being read: `time`, `duration` or `brownout`.
    pub what: &'static str,
    pub input: String,
    pub problem: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let example = match self.what {
            "time" => "an RFC 3339 time such as 2027-01-01T00:00:00Z",
            "duration" => "an ISO 8601 duration such as PT1H or P1DT12H",
            _ => "start/duration or start/end, such as 2027-05-01T10:00:00Z/PT1H",
        };
        write!(
            f,
            "invalid {} {:?}: {} (expected {example})",
            self.what, self.input, self.problem
        )
    }
}

impl std::error::Error for ParseError {}

fn err(what: &'static str, input: &str, problem: impl Into<String>) -> ParseError {
    ParseError {
        what,
        input: input.chars().take(100).collect(),
        problem: problem.into(),
    }
}

/// Reads an RFC 3339 time: `2027-01-01T00:00:00Z`, `2027-01-01T02:00:00+02:00`,
/// `2027-01-01T00:00:00.5Z` (`t`, `z` and a space for `T` accepted, as RFC 3339 allows).
pub fn parse_time(input: &str) -> Result<SystemTime, ParseError> {
    let e = |problem: &str| err("time", input, problem);
    let b = input.trim().as_bytes();
    if b.len() < 20 {
        return Err(e("too short"));
    }
    let num = |at: usize, len: usize, name: &str| -> Result<u32, ParseError> {
        let digits = &b[at..at + len];
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(e(&format!("the {name} is not {len} digits")));
        }
        Ok(digits
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let sep = |at: usize, want: &[u8], what: &str| -> Result<(), ParseError> {
        if want.contains(&b[at]) {
            Ok(())
        } else {
            Err(e(&format!("expected {what} at character {}", at + 1)))
        }
    };
    let year = num(0, 4, "year")?;
    sep(4, b"-", "'-'")?;
    let month = num(5, 2, "month")?;
    sep(7, b"-", "'-'")?;
    let day = num(8, 2, "day")?;
    sep(10, b"Tt ", "'T'")?;
    let hour = num(11, 2, "hour")?;
    sep(13, b":", "':'")?;
    let minute = num(14, 2, "minute")?;
    sep(16, b":", "':'")?;
    let second = num(17, 2, "second")?;
    if year < 1970 {
        return Err(e("years before 1970 are not supported"));
    }
    if !(1..=12).contains(&month) {
        return Err(e(&format!("month {month} is not 1 to 12")));
    }
    let days_in_month = match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=days_in_month).contains(&day) {
        return Err(e(&format!(
            "day {day} is not in {year}-{month:02} (1 to {days_in_month})"
        )));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(e(&format!(
            "{hour:02}:{minute:02}:{second:02} is not a time of day (leap seconds are not supported)"
        )));
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if b[at] == b'.' {
        at += 1;
        let start = at;
        while at < b.len() && b[at].is_ascii_digit() {
            if at - start < 9 {
                nanos = nanos * 10 + u32::from(b[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return Err(e("no digits after the decimal point"));
        }
        for _ in (at - start)..9 {
            nanos *= 10;
        }
    }
    let offset_secs: i64 = match &b[at..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err(e("the offset is not ±HH:MM"));
            }
            let oh = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let om = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if oh > 23 || om > 59 {
                return Err(e("the offset is not ±HH:MM"));
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'-' { -o } else { o }
        }
        [] => return Err(e("no offset: end with Z or ±HH:MM")),
        _ => return Err(e("expected Z or an offset ±HH:MM after the time")),
    };
    let local = days_from_civil(i64::from(year), month, day) * 86_400
        + i64::from(hour) * 3600
        + i64::from(minute) * 60
        + i64::from(second);
    let utc = local - offset_secs;
    let Ok(secs) = u64::try_from(utc) else {
        return Err(e("before 1970-01-01T00:00:00Z"));
    };
    Ok(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Reads an ISO 8601 duration: `PnW` or `PnDTnHnMnS` (any part may be left out; seconds may
/// have a fraction). Years and months are refused: their length varies.
pub fn parse_duration(input: &str) -> Result<Duration, ParseError> {
    let e = |problem: &str| err("duration", input, problem);
    let s = input.trim();
    let Some(rest) = s.strip_prefix(['P', 'p']) else {
        return Err(e("it does not start with P"));
    };
    if rest.is_empty() {
        return Err(e("nothing after P"));
    }
    let mut total = Duration::ZERO;
    let mut in_time = false;
    // Units must come in this order; `last` is the index of the last one read.
    const DATE_UNITS: &[(u8, u64)] = &[(b'W', 7 * 86_400), (b'D', 86_400)];
    const TIME_UNITS: &[(u8, u64)] = &[(b'H', 3600), (b'M', 60), (b'S', 1)];
    let mut last: Option<usize> = None;
    let mut any = false;
    let b = rest.as_bytes();
    let mut at = 0;
    while at < b.len() {
        if b[at].eq_ignore_ascii_case(&b'T') {
            if in_time {
                return Err(e("a second T"));
            }
            in_time = true;
            last = None;
            at += 1;
            if at == b.len() {
                return Err(e("nothing after T"));
            }
            continue;
        }
        let start = at;
        while at < b.len() && (b[at].is_ascii_digit() || b[at] == b'.' || b[at] == b',') {
            at += 1;
        }
        if at == start {
            return Err(e(&format!(
                "expected a number at {:?}",
                char::from(b[at]).to_string()
            )));
        }
        let Some(&unit) = b.get(at) else {
            return Err(e("a number without a unit at the end"));
        };
        let unit = unit.to_ascii_uppercase();
        at += 1;
        let number = &rest[start..at - 1];
        let units = if in_time { TIME_UNITS } else { DATE_UNITS };
        let Some(index) = units.iter().position(|(u, _)| *u == unit) else {
            return Err(e(&match (in_time, unit) {
                (false, b'Y') => "years are not supported (their length varies): write days, e.g. P365D".to_string(),
                (false, b'M') => "months are not supported (their length varies): write days, e.g. P30D (minutes are PT…M)".to_string(),
                (false, b'H' | b'S') => format!("{} belongs after T, e.g. PT1{}", char::from(unit), char::from(unit)),
                _ => format!("unknown unit {:?}", char::from(unit).to_string()),
            }));
        };
        if last.is_some_and(|l| l >= index) {
            return Err(e(&format!(
                "{} is out of order (W, D, then T, H, M, S)",
                char::from(unit)
            )));
        }
        last = Some(index);
        let secs_per_unit = units[index].1;
        let fractional = number.contains(['.', ',']);
        if fractional && (unit != b'S' || at != b.len()) {
            return Err(e("only the seconds, written last, may have a fraction"));
        }
        let part = if fractional {
            let normalized = number.replace(',', ".");
            let value: f64 = normalized
                .parse()
                .map_err(|_| e(&format!("{number:?} is not a number")))?;
            Duration::try_from_secs_f64(value)
                .map_err(|_| e(&format!("{number:?} is not a number of seconds")))?
        } else {
            let value: u64 = number
                .parse()
                .map_err(|_| e(&format!("{number:?} is too large")))?;
            value
                .checked_mul(secs_per_unit)
                .map(Duration::from_secs)
                .ok_or_else(|| e("too long"))?
        };
        total = total.checked_add(part).ok_or_else(|| e("too long"))?;
        any = true;
    }
    if !any {
        return Err(e("no number and unit"));
    }
    Ok(total)
}

/// Reads a brownout window: `2027-05-01T10:00:00Z/PT1H` (start and ISO 8601 duration) or
/// `2027-05-01T10:00:00Z/2027-05-01T11:00:00Z` (start and end).
pub fn parse_brownout(input: &str) -> Result<Brownout, ParseError> {
    let e = |problem: String| err("brownout", input, problem);
    let Some((start, rest)) = input.trim().split_once('/') else {
        return Err(e("no '/' between the start and the duration or end".into()));
    };
    let start = parse_time(start).map_err(|x| e(format!("start: {}", x.problem)))?;
    let length = if rest.trim_start().starts_with(['P', 'p']) {
        parse_duration(rest).map_err(|x| e(format!("duration: {}", x.problem)))?
    } else {
        let end = parse_time(rest).map_err(|x| e(format!("end: {}", x.problem)))?;
        end.duration_since(start)
            .map_err(|_| e("the end is before the start".into()))?
    };
    if length.is_zero() {
        return Err(e("the window is empty".into()));
    }
    Ok(Brownout { start, length })
}

/// `2027-06-30T00:00:00Z`: RFC 3339 in UTC, whole seconds (times before 1970 read as 1970).
pub fn rfc3339(t: SystemTime) -> String {
    let (date, (h, m, s)) = split(t);
    let (y, mo, d) = date;
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

/// `Wed, 30 Jun 2027 00:00:00 GMT`: the IMF-fixdate of RFC 9110 §5.6.7 (the `Sunset` header).
pub fn http_date(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_secs(t) / 86_400;
    let ((y, mo, d), (h, m, s)) = split(t);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[((days + 4) % 7) as usize];
    let month = MONTHS[(mo - 1) as usize];
    format!("{weekday}, {d:02} {month} {y:04} {h:02}:{m:02}:{s:02} GMT")
}

/// Whole seconds since 1970 (times before it read as 0).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

type Date = (i64, u32, u32);

fn split(t: SystemTime) -> (Date, (u64, u64, u64)) {
    let secs = unix_secs(t);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    (civil_from_days(days), (rem / 3600, rem / 60 % 60, rem % 60))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day counted from 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> Date {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_times_parse_with_offsets_and_fractions() {
        // 2027-01-01T00:00:00Z = 1798761600.
        let t = at(1_798_761_600);
        assert_eq!(parse_time("2027-01-01T00:00:00Z").unwrap(), t);
        assert_eq!(parse_time("2027-01-01t00:00:00z").unwrap(), t);
        assert_eq!(parse_time("2027-01-01 00:00:00Z").unwrap(), t);
        assert_eq!(parse_time("2027-01-01T02:00:00+02:00").unwrap(), t);
        assert_eq!(parse_time("2026-12-31T19:30:00-04:30").unwrap(), t);
        assert_eq!(
            parse_time("2027-01-01T00:00:00.25Z").unwrap(),
            t + Duration::from_millis(250)
        );
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), UNIX_EPOCH);
        assert_eq!(
            parse_time("2024-02-29T12:00:00Z").unwrap(),
            at(1_709_208_000)
        );
    }

    #[test]
    fn time_errors_say_what_is_wrong() {
        for (input, problem) in [
            ("2027-13-01T00:00:00Z", "month 13 is not 1 to 12"),
            ("2027-02-29T00:00:00Z", "day 29 is not in 2027-02 (1 to 28)"),
            ("2027-01-01T24:00:00Z", "is not a time of day"),
            ("2027-01-01T00:00:00", "too short"),
            ("2027-01-01T00:00:00+0200", "expected Z or an offset"),
            ("2027-01-01T00:00:00 ", "too short"),
            ("2027-01-01T00:00:00.Z", "no digits after the decimal point"),
            ("27-01-01T00:00:00.0Z", "the year is not 4 digits"),
            ("2027/01/01T00:00:00Z", "expected '-' at character 5"),
            ("1969-12-31T23:59:59Z", "years before 1970"),
            ("1970-01-01T00:00:00+01:00", "before 1970-01-01"),
            ("2027-01-01T00:00:00+24:00", "the offset is not ±HH:MM"),
            ("next tuesday, maybe later", "the year is not 4 digits"),
        ] {
            let e = parse_time(input).unwrap_err();
            assert!(e.problem.contains(problem), "{input}: {e}");
            assert!(e.to_string().contains("RFC 3339"), "{e}");
        }
    }

    #[test]
    fn iso_durations_parse() {
        for (input, secs) in [
            ("PT1H", 3600.0),
            ("PT90M", 5400.0),
            ("P1D", 86_400.0),
            ("P1DT12H", 129_600.0),
            ("P2W", 1_209_600.0),
            ("PT1H30M15S", 5415.0),
            ("PT0.5S", 0.5),
            ("pt10m", 600.0),
        ] {
            assert_eq!(
                parse_duration(input).unwrap().as_secs_f64(),
                secs,
                "{input}"
            );
        }
    }

    #[test]
    fn duration_errors_say_what_is_wrong() {
        for (input, problem) in [
            ("1H", "does not start with P"),
            ("P", "nothing after P"),
            ("PT", "nothing after T"),
            ("P1M", "months are not supported"),
            ("P1Y", "years are not supported"),
            ("P1H", "H belongs after T"),
            ("PT1M1H", "out of order"),
            ("PT1.5H", "only the seconds"),
            ("PT1", "without a unit"),
            ("PT1X", "unknown unit"),
            ("P99999999999999999999D", "too large"),
            ("P999999999999999D", "too long"),
        ] {
            let e = parse_duration(input).unwrap_err();
            assert!(e.problem.contains(problem), "{input}: {e}");
        }
    }

    #[test]
    fn brownouts_parse_as_start_and_duration_or_end() {
        let b = parse_brownout("2027-05-01T10:00:00Z/PT1H").unwrap();
        assert_eq!(b.start, parse_time("2027-05-01T10:00:00Z").unwrap());
        assert_eq!(b.length, Duration::from_secs(3600));
        let b2 = parse_brownout("2027-05-01T10:00:00Z/2027-05-01T11:00:00Z").unwrap();
        assert_eq!(b, b2);
        for (input, problem) in [
            ("2027-05-01T10:00:00Z", "no '/'"),
            ("2027-05-01T10:00:00Z/PT0S", "the window is empty"),
            ("2027-05-01T10:00:00Z/2027-05-01T09:00:00Z", "end is before"),
            ("2027-05-01T10:00:00Z/P1M", "duration: months"),
            ("2027-05-32T10:00:00Z/PT1H", "start: day 32"),
        ] {
            let e = parse_brownout(input).unwrap_err();
            assert!(e.problem.contains(problem), "{input}: {e}");
        }
    }

    #[test]
    fn times_render_as_rfc3339_and_http_date() {
        let t = parse_time("2027-06-30T00:00:00Z").unwrap();
        assert_eq!(rfc3339(t), "2027-06-30T00:00:00Z");
        assert_eq!(http_date(t), "Wed, 30 Jun 2027 00:00:00 GMT");
        assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        // RFC 9110's example.
        let t = parse_time("1994-11-06T08:49:37Z").unwrap();
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        // Round trips over a range of days, leap years included.
        for day in (0..200_000u64).step_by(37) {
            let t = at(day * 86_400 + 45_296);
            assert_eq!(parse_time(&rfc3339(t)).unwrap(), t);
        }
    }
}
