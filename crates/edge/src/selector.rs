//! Method selectors, the one way every per-method setting names its methods
//! (`[[json_sunset]]`, `[[auth.rules]]`, `[[rate_limit.rules]]`).
//!
//! A selector is a method's full name (`demo.shop.v1.Shop.GetOrder`; `demo.shop.v1.Shop/GetOrder`
//! is read the same) or a glob where `*` stands for any run of characters, dots included
//! (`demo.shop.v1.Shop.*`, `demo.*`, `*`). When several match a method the most specific wins
//! ([`most_specific`]): an exact name before any glob; among globs, the one with more literal
//! characters, then the one whose first `*` comes later (`demo.shop.*` before `*.shop.v1`).

use std::borrow::Cow;

/// A validated selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The selector with `/` read as `.`.
    pattern: Box<str>,
    specificity: Specificity,
}

/// How specific a selector is; larger wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Specificity {
    exact: bool,
    literals: usize,
    prefix: usize,
}

impl Selector {
    /// A selector as written; the error says what is wrong with it.
    pub fn parse(selector: &str) -> Result<Selector, String> {
        let selector = selector.trim();
        if selector.is_empty() {
            return Err("the selector is empty".into());
        }
        if let Some(c) = selector
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '*' | '/')))
        {
            return Err(format!(
                "{c:?} cannot appear in a selector (a method's full name, or a glob with *)"
            ));
        }
        let pattern: Box<str> = selector.replace('/', ".").into();
        let specificity = Specificity {
            exact: !pattern.contains('*'),
            literals: pattern.bytes().filter(|&c| c != b'*').count(),
            prefix: pattern.find('*').unwrap_or(pattern.len()),
        };
        Ok(Selector {
            pattern,
            specificity,
        })
    }

    /// The selector with `/` read as `.`.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn specificity(&self) -> Specificity {
        self.specificity
    }

    /// Whether the selector matches a method (`pkg.Service.Method` or `pkg.Service/Method`).
    pub fn matches(&self, method: &str) -> bool {
        glob_match(self.pattern.as_bytes(), method.as_bytes())
    }
}

/// The item whose selector is the most specific of those matching `method`; among equals,
/// the earlier one.
pub fn most_specific<'a, T>(
    items: &'a [T],
    selector: impl Fn(&T) -> &Selector,
    method: &str,
) -> Option<&'a T> {
    let mut best: Option<(&T, Specificity)> = None;
    for item in items {
        let s = selector(item);
        if s.matches(method) && best.is_none_or(|(_, b)| s.specificity > b) {
            best = Some((item, s.specificity));
        }
    }
    best.map(|(item, _)| item)
}

/// A method's name with `/` read as `.`.
pub fn dotted(method: &str) -> Cow<'_, str> {
    if method.contains('/') {
        Cow::Owned(method.replace('/', "."))
    } else {
        Cow::Borrowed(method)
    }
}

/// Whether `name` matches a glob where `*` stands for any run of characters (`/` in the name
/// read as `.`). Linear backtracking on the last `*`: O(pattern × name) at worst.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    let norm = |c: u8| if c == b'/' { b'.' } else { c };
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if p < pattern.len() && norm(pattern[p]) == norm(name[n]) {
            p += 1;
            n += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_wins_and_ties_go_to_the_first() {
        let rules: Vec<(Selector, u8)> = [
            ("*", 1),
            ("demo.*", 2),
            ("*.GetOrder", 3),
            ("demo.shop.v1.Shop/GetOrder", 4),
            ("demo.*", 5),
        ]
        .into_iter()
        .map(|(s, n)| (Selector::parse(s).unwrap(), n))
        .collect();
        let pick = |m: &str| most_specific(&rules, |r| &r.0, m).map(|r| r.1);
        assert_eq!(pick("demo.shop.v1.Shop/GetOrder"), Some(4));
        assert_eq!(pick("demo.shop.v1.Shop.ListOrders"), Some(2));
        assert_eq!(pick("other.v1.Svc/GetOrder"), Some(3));
        assert_eq!(pick("other.v1.Svc/Put"), Some(1));
        assert_eq!(
            Selector::parse("a b").unwrap_err(),
            "' ' cannot appear in a selector (a method's full name, or a glob with *)"
        );
        assert_eq!(Selector::parse("  ").unwrap_err(), "the selector is empty");
    }
}
