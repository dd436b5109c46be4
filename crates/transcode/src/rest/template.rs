//! google.api.http path templates: parsing, matching, and the percent-decoding of variables.
//!
//! ```text
//! Template = "/" Segments [ Verb ] ;
//! Segments = Segment { "/" Segment } ;
//! Segment  = "*" | "**" | LITERAL | Variable ;
//! Variable = "{" FieldPath [ "=" Segments ] "}" ;
//! FieldPath = IDENT { "." IDENT } ;
//! Verb     = ":" LITERAL ;
//! ```

use std::fmt;

/// Which templates are accepted and how they match (`path_templates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// The google.api.http grammar: `**` last, literals compared percent-decoded too,
    /// multi-segment variables keep `%2F` encoded, a malformed escape is an error.
    #[default]
    Spec,
    /// What Envoy's transcoder (grpc-httpjson-transcoding) accepts and how it matches: `/`
    /// alone; literal segments after `**` (which then covers one segment or more; a last
    /// `**` zero or more); trailing slashes of a request ignored; a `:verb` suffix is a verb
    /// only when some template has that verb; literals compared as sent; multi-segment
    /// variables keep RFC 6570's reserved characters encoded; malformed escapes kept.
    Envoy,
}

/// Segments a template may have (matching keeps their ranges on the stack).
const MAX_SEGMENTS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Literal(String),
    /// `*`: exactly one segment.
    One,
    /// `**`: zero or more segments; only last.
    Rest,
}

/// A variable of a template: the field path it binds and the segments it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// `book.name` as written.
    pub field_path: String,
    start: usize,
    end: usize,
    /// More than one segment (or `**`): `%2F` stays encoded in its value.
    multi: bool,
    dialect: Dialect,
}

/// A parsed path template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    segs: Vec<Seg>,
    verb: Option<String>,
    vars: Vec<Variable>,
    dialect: Dialect,
}

impl Template {
    /// Parses a template by the google.api.http grammar ([`Dialect::Spec`]).
    pub fn parse(text: &str) -> Result<Template, String> {
        Template::parse_as(text, Dialect::Spec)
    }

    /// Parses a template as `dialect` accepts it.
    pub fn parse_as(text: &str, dialect: Dialect) -> Result<Template, String> {
        if dialect == Dialect::Envoy && text == "/" {
            return Ok(Template {
                segs: Vec::new(),
                verb: None,
                vars: Vec::new(),
                dialect,
            });
        }
        let Some(body) = text.strip_prefix('/') else {
            return Err("must start with '/'".into());
        };
        let tail = text
            .rfind('}')
            .max(text.rfind('/'))
            .map_or(0, |i| i + usize::from(text.as_bytes()[i] == b'}'));
        let (body, verb) = match text[tail..].find(':') {
            Some(i) => {
                let at = tail + i;
                let verb = &text[at + 1..];
                if verb.is_empty() || !verb.bytes().all(is_literal_byte) {
                    return Err(format!("bad custom verb {verb:?}"));
                }
                (&text[1..at], Some(verb.to_owned()))
            }
            None => (body, None),
        };
        let mut p = Parser {
            s: body.as_bytes(),
            i: 0,
            segs: Vec::new(),
            vars: Vec::new(),
            dialect,
        };
        p.segments(true)?;
        if p.i != p.s.len() {
            return Err(format!("unexpected {:?} at {}", p.s[p.i] as char, p.i + 1));
        }
        if p.segs.len() > MAX_SEGMENTS {
            return Err(format!("more than {MAX_SEGMENTS} segments"));
        }
        if let Some(i) = p.segs.iter().position(|s| *s == Seg::Rest) {
            let after = &p.segs[i + 1..];
            match dialect {
                Dialect::Spec if !after.is_empty() => {
                    return Err("'**' must be the last segment".into());
                }
                Dialect::Envoy if !after.iter().all(|s| matches!(s, Seg::Literal(_))) => {
                    return Err("only literal segments may follow '**'".into());
                }
                _ => {}
            }
        }
        Ok(Template {
            segs: p.segs,
            verb,
            vars: p.vars,
            dialect,
        })
    }

    /// The custom verb, if the template has one.
    pub fn verb(&self) -> Option<&str> {
        self.verb.as_deref()
    }

    /// [`Dialect::Envoy`]'s match of a request path: `verbs` are the verbs any template of
    /// the routes has (a `:x` suffix is a verb only if `x` is one of them).
    pub fn envoy_matches<'p>(&self, path: &'p str, verbs: &[String]) -> Option<Vec<&'p str>> {
        // The verb: after the last ':' if that comes after the last '/'.
        let (body, verb) = match (path.rfind(':'), path.rfind('/')) {
            (Some(c), slash) if slash.is_none_or(|s| c > s) => {
                let v = &path[c + 1..];
                if verbs.iter().any(|known| known == v) {
                    (&path[..c], Some(v))
                } else {
                    (path, None)
                }
            }
            _ => (path, None),
        };
        if verb != self.verb.as_deref() {
            return None;
        }
        // The first character is the leading '/'; trailing empty segments do not count.
        let rest = body.get(1..).unwrap_or("").trim_end_matches('/');
        let mut parts: Vec<(usize, usize)> = Vec::new();
        if !rest.is_empty() {
            let mut from = 0;
            for piece in rest.split('/') {
                parts.push((from, from + piece.len()));
                from += piece.len() + 1;
            }
        }
        let k = self.segs.len();
        // How many request segments each template segment covers.
        let rest_at = self.segs.iter().position(|s| *s == Seg::Rest);
        let spans: Vec<(usize, usize)> = match rest_at {
            None if parts.len() == k => (0..k).map(|i| (i, i + 1)).collect(),
            None => return None,
            Some(r) => {
                let tail = k - r - 1;
                let covered = parts.len().checked_sub(r + tail)?;
                if covered == 0 && tail > 0 {
                    return None;
                }
                (0..k)
                    .map(|i| match i.cmp(&r) {
                        std::cmp::Ordering::Less => (i, i + 1),
                        std::cmp::Ordering::Equal => (r, r + covered),
                        std::cmp::Ordering::Greater => (i + covered - 1, i + covered),
                    })
                    .collect()
            }
        };
        for (seg, &(a, _)) in self.segs.iter().zip(&spans) {
            if let Seg::Literal(l) = seg {
                let (s, e) = parts[a];
                if &rest[s..e] != l.as_str() {
                    return None;
                }
            }
        }
        let text = |from: usize, to: usize| -> &'p str {
            if from >= to {
                return "";
            }
            &rest[parts[from].0..parts[to - 1].1]
        };
        Some(
            self.vars
                .iter()
                .map(|v| text(spans[v.start].0, spans[v.end - 1].1))
                .collect(),
        )
    }

    /// Whether the template is a literal path (no variable, no wildcard): it matches one
    /// path only, its [`Template::shape`].
    pub fn is_literal(&self) -> bool {
        self.segs.iter().all(|s| matches!(s, Seg::Literal(_)))
    }

    pub fn variables(&self) -> &[Variable] {
        &self.vars
    }

    /// The template with variables reduced to their patterns (`/v1/*/books/**:verb`): two
    /// templates with the same shape match the same paths.
    pub fn shape(&self) -> String {
        let mut s = String::new();
        for seg in &self.segs {
            s.push('/');
            match seg {
                Seg::Literal(l) => s.push_str(l),
                Seg::One => s.push('*'),
                Seg::Rest => s.push_str("**"),
            }
        }
        if let Some(v) = &self.verb {
            s.push(':');
            s.push_str(v);
        }
        s
    }

    /// Orders templates from most to least specific: literals before `*` before `**`,
    /// segment by segment, and a verb before none.
    ///
    /// [`Dialect::Envoy`] orders as its matcher searches (literal, then `*`, then `**`, the
    /// first match winning): a template's end ranks after `*` and before `**`, so
    /// `/a/{x=**}/z` is tried before `/a/{x=**}`, and `/a` before `/a/**`.
    pub fn specificity(&self) -> impl Ord + use<> {
        let envoy = self.dialect == Dialect::Envoy;
        let mut kinds: Vec<u8> = self
            .segs
            .iter()
            .map(|s| match s {
                Seg::Literal(_) => 0,
                Seg::One => 1,
                Seg::Rest if envoy => 3,
                Seg::Rest => 2,
            })
            .collect();
        if envoy {
            kinds.push(2);
        }
        (self.verb.is_none(), kinds)
    }

    /// Matches a request path (as sent: percent-encoded, without the query). Returns the raw
    /// (still encoded) text of each variable, in [`Self::variables`] order. Allocates only
    /// for a match.
    pub fn matches<'p>(&self, path: &'p str) -> Option<Vec<&'p str>> {
        let mut rest = path.strip_prefix('/')?;
        if let Some(verb) = &self.verb {
            rest = rest.strip_suffix(verb.as_str())?.strip_suffix(':')?;
        }
        // The byte range of `rest` each template segment covers.
        let mut covered = [(0usize, 0usize); MAX_SEGMENTS];
        let mut next = (!rest.is_empty()).then_some(0usize);
        for (k, seg) in self.segs.iter().enumerate() {
            covered[k] = match seg {
                Seg::Rest => {
                    let from = next.take().unwrap_or(rest.len());
                    (from, rest.len())
                }
                Seg::Literal(_) | Seg::One => {
                    let from = next?;
                    let end = rest[from..].find('/').map_or(rest.len(), |i| from + i);
                    let text = &rest[from..end];
                    let ok = match seg {
                        Seg::Literal(l) => literal_eq(text, l),
                        _ => !text.is_empty(),
                    };
                    if !ok {
                        return None;
                    }
                    next = (end < rest.len()).then_some(end + 1);
                    (from, end)
                }
            };
        }
        if next.is_some() {
            return None;
        }
        Some(
            self.vars
                .iter()
                .map(|v| &rest[covered[v.start].0..covered[v.end - 1].1])
                .collect(),
        )
    }
}

impl Variable {
    /// Decodes a matched value by the google.api.http rules: a single-segment variable is
    /// fully percent-decoded; a multi-segment one keeps `%2F` (and `%2f`) as sent.
    pub fn decode(&self, raw: &str) -> Result<String, String> {
        match self.dialect {
            Dialect::Spec => percent_decode(raw, self.multi, false),
            Dialect::Envoy => envoy_decode(raw, self.multi),
        }
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shape())
    }
}

/// Percent-decodes `s`. `keep_slash`: leave `%2F`/`%2f` encoded; `plus_space`: `+` is a space
/// (form encoding, for query strings).
pub(crate) fn percent_decode(
    s: &str,
    keep_slash: bool,
    plus_space: bool,
) -> Result<String, String> {
    if !s.bytes().any(|b| b == b'%' || (plus_space && b == b'+')) {
        return Ok(s.to_owned());
    }
    let out = percent_decode_bytes(s, keep_slash, plus_space)?;
    String::from_utf8(out).map_err(|_| "not UTF-8 once percent-decoded".to_owned())
}

/// [`percent_decode`] to bytes, which need not be UTF-8 (a binary message in a query, as
/// Connect's GET sends one).
pub fn percent_decode_bytes(
    s: &str,
    keep_slash: bool,
    plus_space: bool,
) -> Result<Vec<u8>, String> {
    decode_escapes(s, |v| keep_slash && v == b'/', plus_space, true)
}

/// [`Dialect::Envoy`]'s decoding of a variable: everything for a single segment, all but
/// RFC 6570's reserved characters for several; a malformed escape is kept as it is.
fn envoy_decode(raw: &str, multi: bool) -> Result<String, String> {
    const RESERVED: &[u8] = b"!#$&'()*+,/:;=?@[]";
    let out = decode_escapes(raw, |v| multi && RESERVED.contains(&v), false, false)?;
    String::from_utf8(out).map_err(|_| "not UTF-8 once percent-decoded".to_owned())
}

/// The one percent-decoding loop: `%XX` becomes its byte unless `keep(byte)` (then it stays
/// as sent); `plus_space`: `+` is a space; a malformed escape is an error if `strict`, else
/// kept as sent.
fn decode_escapes(
    s: &str,
    keep: impl Fn(u8) -> bool,
    plus_space: bool,
    strict: bool,
) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |c: Option<&u8>| c.and_then(|&c| (c as char).to_digit(16));
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => match (hex(b.get(i + 1)), hex(b.get(i + 2))) {
                (Some(h), Some(l)) => {
                    let v = (h * 16 + l) as u8;
                    if keep(v) {
                        out.extend_from_slice(&b[i..i + 3]);
                    } else {
                        out.push(v);
                    }
                    i += 3;
                }
                _ if strict => return Err(format!("bad percent-encoding at byte {i}")),
                _ => {
                    out.push(c);
                    i += 1;
                }
            },
            b'+' if plus_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// A path segment against a template literal: equal as sent, or once percent-decoded.
fn literal_eq(raw: &str, literal: &str) -> bool {
    raw == literal
        || (raw.contains('%') && percent_decode(raw, false, false).is_ok_and(|d| d == literal))
}

fn is_literal_byte(b: u8) -> bool {
    !matches!(b, b'/' | b'{' | b'}' | b'*' | b'=' | b':' | b'?' | b'#') && b > b' ' && b < 0x7f
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    segs: Vec<Seg>,
    vars: Vec<Variable>,
    dialect: Dialect,
}

impl Parser<'_> {
    fn segments(&mut self, top: bool) -> Result<(), String> {
        loop {
            self.segment(top)?;
            if self.s.get(self.i) == Some(&b'/') {
                self.i += 1;
            } else {
                return Ok(());
            }
        }
    }

    fn segment(&mut self, top: bool) -> Result<(), String> {
        match self.s.get(self.i) {
            Some(b'*') if self.s.get(self.i + 1) == Some(&b'*') => {
                self.i += 2;
                self.segs.push(Seg::Rest);
            }
            Some(b'*') => {
                self.i += 1;
                self.segs.push(Seg::One);
            }
            Some(b'{') if top => self.variable()?,
            Some(b'{') => return Err("variables cannot nest".into()),
            _ => {
                let start = self.i;
                while self.s.get(self.i).copied().is_some_and(is_literal_byte) {
                    self.i += 1;
                }
                if start == self.i {
                    return Err(match self.s.get(self.i) {
                        Some(&c) => format!("unexpected {:?} at {}", c as char, self.i + 1),
                        None => "empty segment".into(),
                    });
                }
                let lit = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                self.segs.push(Seg::Literal(lit.to_owned()));
            }
        }
        Ok(())
    }

    fn variable(&mut self) -> Result<(), String> {
        self.i += 1;
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            self.i += 1;
        }
        let field_path = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
        if field_path.is_empty()
            || field_path
                .split('.')
                .any(|p| p.is_empty() || p.as_bytes()[0].is_ascii_digit())
        {
            return Err(format!("bad variable name {field_path:?}"));
        }
        let field_path = field_path.to_owned();
        let first = self.segs.len();
        match self.s.get(self.i) {
            Some(b'=') => {
                self.i += 1;
                self.segments(false)?;
            }
            _ => self.segs.push(Seg::One),
        }
        if self.s.get(self.i) != Some(&b'}') {
            return Err(format!("variable {field_path} is not closed with '}}'"));
        }
        self.i += 1;
        let end = self.segs.len();
        let multi = end - first > 1 || self.segs[first..].contains(&Seg::Rest);
        if self.vars.iter().any(|v| v.field_path == field_path) {
            return Err(format!("variable {field_path} appears twice"));
        }
        self.vars.push(Variable {
            field_path,
            start: first,
            end,
            multi,
            dialect: self.dialect,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m<'p>(t: &str, path: &'p str) -> Option<Vec<&'p str>> {
        Template::parse(t).unwrap().matches(path)
    }

    #[test]
    fn parses_the_grammar() {
        for (t, shape) in [
            ("/v1/shelves", "/v1/shelves"),
            ("/v1/shelves/{shelf}", "/v1/shelves/*"),
            ("/v1/{name=shelves/*/books/*}", "/v1/shelves/*/books/*"),
            ("/v1/{name=**}:cancel", "/v1/**:cancel"),
            ("/v1/books:batchGet", "/v1/books:batchGet"),
            ("/v1/{a.b.c}/x/*", "/v1/*/x/*"),
            ("/files/{path=**}", "/files/**"),
        ] {
            assert_eq!(Template::parse(t).unwrap().shape(), shape, "{t}");
        }
        for bad in [
            "v1/x",
            "/v1/{x",
            "/v1/{x=a/{y}}",
            "/v1/**/x",
            "/v1/{}",
            "/v1//x",
            "/v1/x:",
            "/v1/{a}/{a}",
            "/v1/{1a}",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
        assert!(Template::parse(&"/a".repeat(MAX_SEGMENTS + 1)).is_err());
        assert!(Template::parse(&"/a".repeat(MAX_SEGMENTS)).is_ok());
    }

    #[test]
    fn matches_and_captures() {
        assert_eq!(m("/v1/shelves/{shelf}", "/v1/shelves/7"), Some(vec!["7"]));
        assert_eq!(m("/v1/shelves/{shelf}", "/v1/shelves/"), None);
        assert_eq!(m("/v1/shelves/{shelf}", "/v1/shelves/7/x"), None);
        assert_eq!(
            m("/v1/{name=shelves/*/books/*}", "/v1/shelves/1/books/2"),
            Some(vec!["shelves/1/books/2"])
        );
        assert_eq!(m("/v1/{name=shelves/*/books/*}", "/v1/shelves/1/x/2"), None);
        assert_eq!(
            m("/v1/{name=**}:cancel", "/v1/ops/a/b:cancel"),
            Some(vec!["ops/a/b"])
        );
        assert_eq!(m("/v1/{name=**}:cancel", "/v1/ops/a/b"), None);
        assert_eq!(m("/v1/{name=**}", "/v1"), Some(vec![""]));
        assert_eq!(m("/v1/{name=**}", "/v1/"), Some(vec![""]));
        assert_eq!(
            m("/v1/{a}/{b=x/**}", "/v1/1/x/y/z"),
            Some(vec!["1", "x/y/z"])
        );
        // No verb in the template: a colon is part of the segment.
        assert_eq!(m("/v1/things/{id}", "/v1/things/a:b"), Some(vec!["a:b"]));
        // Literals compare percent-decoded too.
        assert_eq!(m("/v1/shelves", "/v1/%73helves"), Some(vec![]));
    }

    #[test]
    fn decodes_by_the_spec() {
        let t = Template::parse("/v1/{one}/{many=x/**}").unwrap();
        let v = t.matches("/v1/a%2Fb%20c/x/y%2Fz%2fw%20").unwrap();
        assert_eq!(t.variables()[0].decode(v[0]).unwrap(), "a/b c");
        assert_eq!(t.variables()[1].decode(v[1]).unwrap(), "x/y%2Fz%2fw ");
        assert!(t.variables()[0].decode("%zz").is_err());
        assert!(t.variables()[0].decode("%ff").is_err());
        assert_eq!(percent_decode("a+b%2B", false, true).unwrap(), "a b+");
        // Bytes need not be UTF-8; the string form refuses them.
        assert_eq!(
            percent_decode_bytes("%ff%00+", false, true).unwrap(),
            [0xff, 0, b' ']
        );
        assert!(percent_decode("%ff", false, false).is_err());
    }

    #[test]
    fn specificity_orders_literals_first() {
        let mut ts: Vec<Template> = ["/v1/{name=**}", "/v1/*/x", "/v1/a/x", "/v1/a/x:go"]
            .iter()
            .map(|t| Template::parse(t).unwrap())
            .collect();
        ts.sort_by_key(|t| t.specificity());
        let order: Vec<String> = ts.iter().map(|t| t.shape()).collect();
        assert_eq!(order, ["/v1/a/x:go", "/v1/a/x", "/v1/*/x", "/v1/**"]);
    }
}
