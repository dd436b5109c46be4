//! Durations as flags and configuration keys write them (`500ms`, `2s`, `1.5m`, `1h`). A
//! module of its own, below both `cli` and `config`, which read them; re-exported as
//! `config::parse_duration`.

use std::time::Duration;

/// `500ms`, `2s`, `1.5s`, `5m`, `1h`; a bare number is seconds; `0` is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| "expected a number followed by ms, s, m or h".to_owned())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit {unit:?}; use ms, s, m or h")),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err("out of range".to_owned());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("2 days").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
