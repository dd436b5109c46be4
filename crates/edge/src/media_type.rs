//! Media types as RFC 9110 writes them (§8.3.1 Content-Type, §12.5.1 Accept), read in place.
//!
//! ```text
//! media-type  = type "/" subtype parameters
//! parameters  = *( OWS ";" OWS [ parameter ] )
//! parameter   = token "=" ( token / quoted-string )
//! Accept      = #( media-range [ weight ] )      ; the weight is the parameter `q`
//! ```
//!
//! Written here rather than taken from the `mime` crate, which refuses forms the grammar
//! allows (whitespace before `;`, an empty parameter `;;`, escapes in quoted strings, tabs)
//! and accepts one it forbids (an empty value, `charset=`). Nothing here allocates.

/// One media type (or Accept's media range): `type/subtype` as written (compare them without
/// case) and the text of its parameters, already checked against the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType<'a> {
    pub ty: &'a str,
    pub sub: &'a str,
    params: &'a str,
}

impl<'a> MediaType<'a> {
    /// The parameters as `(name, value)`, a quoted value without its quotes and escapes as
    /// written (`\"` stays two bytes).
    pub fn params(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        let text = self.params;
        let mut at = 0;
        std::iter::from_fn(move || {
            let b = text.as_bytes();
            loop {
                at = skip_ows(b, at);
                if at >= b.len() {
                    return None;
                }
                // Checked when parsed: `;`, then nothing or `name=value`.
                at = skip_ows(b, at + 1);
                let name_len = token_len(&b[at..]);
                if name_len == 0 {
                    continue;
                }
                let name = &text[at..at + name_len];
                at += name_len + 1;
                let value_len = value_len(&b[at..]).unwrap_or(0);
                let value = &text[at..at + value_len];
                at += value_len;
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                return Some((name, value));
            }
        })
    }

    /// The value of the parameter `name` (any case), the first if it is repeated.
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

/// `text` as exactly one media type (surrounding whitespace allowed), or `None` if it is not.
pub fn parse(text: &str) -> Option<MediaType<'_>> {
    // Outside a list, a media type that parses runs to the end (trailing whitespace aside).
    parse_at(text, 0, false).map(|(m, _)| m)
}

/// The elements of a comma-separated list of media ranges (Accept). An element that breaks
/// the grammar is `None` (the caller skips it); empty elements are not elements.
pub fn parse_list(text: &str) -> impl Iterator<Item = Option<MediaType<'_>>> {
    let b = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        loop {
            at = skip_ows(b, at);
            if at >= b.len() {
                return None;
            }
            if b[at] == b',' {
                at += 1;
                continue;
            }
            // A media type that parses ends at the end or at the `,` before the next one.
            return Some(match parse_at(text, at, true) {
                Some((m, end)) => {
                    at = skip_ows(b, end);
                    Some(m)
                }
                None => {
                    at = next_element(b, at);
                    None
                }
            });
        }
    })
}

/// A media type starting at `at` (after optional whitespace), and where it ends. In a list, a
/// `,` ends it.
fn parse_at(text: &str, at: usize, list: bool) -> Option<(MediaType<'_>, usize)> {
    let b = text.as_bytes();
    let start = skip_ows(b, at);
    let ty_len = token_len(&b[start..]);
    let slash = start + ty_len;
    if ty_len == 0 || b.get(slash) != Some(&b'/') {
        return None;
    }
    let sub_len = token_len(&b[slash + 1..]);
    if sub_len == 0 {
        return None;
    }
    let params_start = slash + 1 + sub_len;
    let mut end = params_start;
    loop {
        let i = skip_ows(b, end);
        if i == b.len() || (list && b[i] == b',') {
            break;
        }
        if b[i] != b';' {
            return None;
        }
        let mut j = skip_ows(b, i + 1);
        let name_len = token_len(&b[j..]);
        if name_len > 0 {
            j += name_len;
            if b.get(j) != Some(&b'=') {
                return None;
            }
            j += 1 + value_len(&b[j + 1..])?;
        }
        end = j;
    }
    Some((
        MediaType {
            ty: &text[start..slash],
            sub: &text[slash + 1..params_start],
            params: &text[params_start..end],
        },
        end,
    ))
}

/// RFC 9110 tchar.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn token_len(b: &[u8]) -> usize {
    b.iter().take_while(|&&c| is_tchar(c)).count()
}

fn skip_ows(b: &[u8], mut at: usize) -> usize {
    while at < b.len() && (b[at] == b' ' || b[at] == b'\t') {
        at += 1;
    }
    at
}

/// The length of a parameter value (a token, or a quoted string with its quotes).
fn value_len(b: &[u8]) -> Option<usize> {
    if b.first() != Some(&b'"') {
        let n = token_len(b);
        return (n > 0).then_some(n);
    }
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Some(i + 1),
            // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
            b'\\'
                if b.get(i + 1)
                    .is_some_and(|&c| c == b'\t' || c >= 0x20 && c != 0x7f) =>
            {
                i += 2
            }
            // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
            c if c == b'\t' || (c >= 0x20 && c != 0x7f && c != b'\\') => i += 1,
            _ => return None,
        }
    }
    None
}

/// Where the list element after the malformed one at `at` starts: past the next `,` outside
/// a quoted string (the end if there is none).
fn next_element(b: &[u8], mut at: usize) -> usize {
    let mut quoted = false;
    while at < b.len() {
        match b[at] {
            b'\\' if quoted => at += 1,
            b'"' => quoted = !quoted,
            b',' if !quoted => return at + 1,
            _ => {}
        }
        at += 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grammar's valid and invalid forms, each with the type, subtype and parameters it
    /// reads as.
    #[test]
    fn media_types_follow_the_rfc_grammar() {
        type Params = &'static [(&'static str, &'static str)];
        let valid: &[(&str, &str, &str, Params)] = &[
            ("application/json", "application", "json", &[]),
            ("  application/json\t", "application", "json", &[]),
            ("APPLICATION/X-Protobuf", "APPLICATION", "X-Protobuf", &[]),
            ("*/*", "*", "*", &[]),
            ("application/*", "application", "*", &[]),
            ("application/vnd.x+json", "application", "vnd.x+json", &[]),
            (
                "application/json;charset=utf-8",
                "application",
                "json",
                &[("charset", "utf-8")],
            ),
            // OWS on both sides of `;` (the defect: mime refused this).
            (
                "application/json ; charset=\"utf-8\"",
                "application",
                "json",
                &[("charset", "utf-8")],
            ),
            (
                "application/json\t;\tq=1",
                "application",
                "json",
                &[("q", "1")],
            ),
            // Empty parameters are allowed: `*( OWS ";" OWS [ parameter ] )`.
            ("application/json;", "application", "json", &[]),
            ("application/json; ", "application", "json", &[]),
            (
                "application/json;;charset=utf-8",
                "application",
                "json",
                &[("charset", "utf-8")],
            ),
            (
                "application/json;q=0.5;a=b",
                "application",
                "json",
                &[("q", "0.5"), ("a", "b")],
            ),
            (
                "application/json;charset=\"a;b,c\"",
                "application",
                "json",
                &[("charset", "a;b,c")],
            ),
            (
                "application/json; x=\"a\\\"b\"",
                "application",
                "json",
                &[("x", "a\\\"b")],
            ),
            (
                "application/json; x=\"\"",
                "application",
                "json",
                &[("x", "")],
            ),
            (
                "application/json; x=\"caf\u{e9}\"",
                "application",
                "json",
                &[("x", "caf\u{e9}")],
            ),
        ];
        for (text, ty, sub, params) in valid {
            let m = parse(text).unwrap_or_else(|| panic!("{text:?} refused"));
            assert_eq!((m.ty, m.sub), (*ty, *sub), "{text:?}");
            assert_eq!(m.params().collect::<Vec<_>>(), *params, "{text:?}");
        }
        let invalid = [
            "",
            "json",
            "application",
            "application/",
            "/json",
            "application /json",
            "application/ json",
            "application/json/x",
            "application/json charset=utf-8",
            "application/json; charset",
            "application/json; charset=",
            "application/json; charset = utf-8",
            "application/json; charset= utf-8",
            "application/json;charset=utf-8 x",
            "application/json; a=b c",
            "application/json; x=\"unterminated",
            "application/json; x=\"a\"b",
            "application/json; x=\u{e9}",
            "applic\u{e9}tion/json",
            "application/json,text/html",
            "application/json; x=\"\u{7f}\"",
            "application/(json)",
            "application/json;=x",
        ];
        for text in invalid {
            assert_eq!(parse(text), None, "{text:?} accepted");
        }
    }

    #[test]
    fn lists_skip_what_breaks_the_grammar_and_nothing_else() {
        let read = |text| {
            parse_list(text)
                .map(|m| m.map(|m| (m.ty, m.sub, m.param("q"))))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            read("application/json ; q=0.5 , text/html,*/*;q=0"),
            vec![
                Some(("application", "json", Some("0.5"))),
                Some(("text", "html", None)),
                Some(("*", "*", Some("0"))),
            ]
        );
        // A comma inside a quoted string does not split the list.
        assert_eq!(
            read("a/b;x=\"1,2\";q=0.1, c/d"),
            vec![Some(("a", "b", Some("0.1"))), Some(("c", "d", None))]
        );
        // Empty elements are no elements; a broken one is skipped, the rest read.
        assert_eq!(read(" , ,a/b,,"), vec![Some(("a", "b", None))]);
        assert_eq!(
            read("garbage;;;, a/b x, c/d;x=\"open,e/f, g/h"),
            vec![None, None, None]
        );
        assert_eq!(
            read("nope, Q/R;Q=1"),
            vec![None, Some(("Q", "R", Some("1")))]
        );
        assert_eq!(read(""), vec![]);
    }

    /// Random strings over the grammar's characters: nothing panics, and what is read as a
    /// media type reads the same when written out again and when it is a one-element list.
    #[test]
    fn random_text_reads_consistently() {
        let alphabet: &[u8] = b"aZ09-+.*/;;;==\" \t,\\!#|~()<>@:?[]{}\x7f";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut read = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut t = String::from(["a/b", "", "a", "*/*"][(x >> 60) as usize % 4]);
            let mut y = x;
            for _ in 0..(x % 12) {
                t.push(alphabet[(y % alphabet.len() as u64) as usize] as char);
                y = (y / alphabet.len() as u64) ^ x.rotate_left(23);
            }
            let list: Vec<_> = parse_list(&t).collect();
            let Some(m) = parse(&t) else {
                continue;
            };
            read += 1;
            if !t.contains(',') {
                assert_eq!(list, vec![Some(m)], "{t:?}");
            }
            let mut again = format!("{}/{}", m.ty, m.sub);
            for (name, value) in m.params() {
                let token = !value.is_empty() && value.bytes().all(is_tchar);
                if token {
                    again += &format!(";{name}={value}");
                } else {
                    again += &format!(";{name}=\"{value}\"");
                }
            }
            let m2 = parse(&again).unwrap_or_else(|| panic!("{t:?} written as {again:?}"));
            assert_eq!((m.ty, m.sub), (m2.ty, m2.sub), "{t:?}");
            assert!(m.params().eq(m2.params()), "{t:?} / {again:?}");
        }
        assert!(read > 5_000, "{read}");
    }
}
