//! Figures as the page and `protogate report` print them, one definition for both.

/// Two significant digits below 10, whole numbers above: `2.3`, `0.45`, `14`.
pub fn number(x: f64) -> String {
    if x >= 9.95 {
        format!("{x:.0}")
    } else if x >= 0.995 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A share as a percentage: `50 %`, `5.0 %`, `0 %`, `–` (nothing to divide by).
pub fn percent(share: Option<f64>) -> String {
    match share {
        None => "–".into(),
        Some(0.0) => "0 %".into(),
        Some(s) => format!("{} %", number(s * 100.0)),
    }
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures() {
        assert_eq!(number(0.123), "0.12");
        assert_eq!(number(9.96), "10");
        assert_eq!(number(2.34), "2.3");
        assert_eq!(percent(None), "–");
        assert_eq!(percent(Some(0.0)), "0 %");
        assert_eq!(percent(Some(0.5)), "50 %");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }
}
