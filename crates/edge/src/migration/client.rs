//! Who the client is: the verified mTLS identity, else (set by `[auth]`, [`ClientId::verified`])
//! a verified token's client claim or an API key's client; only without any of them the
//! client's own word: `x-client-id`, else the configured `client_id_header`, else the
//! User-Agent's product token (`okhttp/4.12.0 (Linux)` → `okhttp`, version `4.12.0`), else `-`.
//!
//! Runs per request, so it borrows: a clean header value is a slice of the header, and only a
//! value that needs cleaning is copied. Names and versions are trimmed, cut to
//! [`MAX_NAME_BYTES`], and hold printable ASCII and spaces only (anything else becomes `?`):
//! safe in logs and, once escaped, in HTML. The values are the client's own words, so they are
//! attacker-controlled: the tracker bounds how many it keeps, the page escapes them.

use std::borrow::Cow;

use http::header::{HeaderMap, HeaderName, USER_AGENT};

/// The longest client name or version kept, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// `x-client-id`, read before anything else.
pub const X_CLIENT_ID: HeaderName = HeaderName::from_static("x-client-id");

/// The name of a client that says nothing about itself.
pub const UNKNOWN: &str = "-";

/// A client: its name and, when known, the version it runs. From `x-client-id`, the
/// configured header or mTLS, the version is the User-Agent's product token in full
/// (`okhttp/4.12.0`); from the User-Agent, the token's version (`4.12.0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientId<'a> {
    name: Cow<'a, str>,
    version: Option<Cow<'a, str>>,
    source: Source,
}

/// Where a client's name came from, in the order the gateway looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The verified identity of the client's TLS certificate.
    Certificate,
    /// A verified bearer token's client claim (`[auth]`).
    Token,
    /// A verified API key's client (`[[auth.api_keys]]`).
    ApiKey,
    /// `x-client-id`.
    ClientIdHeader,
    /// The configured `client_id_header`.
    ConfiguredHeader,
    /// The User-Agent's first product token.
    UserAgent,
    /// Nothing named the client: `-`.
    Unknown,
}

impl<'a> ClientId<'a> {
    /// The client of a request before `[auth]` looked at its credentials:
    /// `mtls_identity` (the peer's verified certificate identity, if any), else the
    /// client's own word: `x-client-id`, then `client_id_header`, then the User-Agent.
    pub fn from_request(
        headers: &'a HeaderMap,
        client_id_header: Option<&HeaderName>,
        mtls_identity: Option<&'a str>,
    ) -> ClientId<'a> {
        let header = |name: &HeaderName| headers.get(name).and_then(|v| clean(v.as_bytes()));
        let named = mtls_identity
            .and_then(|s| clean(s.as_bytes()))
            .map(|name| (name, Source::Certificate))
            .or_else(|| header(&X_CLIENT_ID).map(|name| (name, Source::ClientIdHeader)))
            .or_else(|| {
                client_id_header
                    .and_then(header)
                    .map(|name| (name, Source::ConfiguredHeader))
            });
        match named {
            Some((name, source)) => ClientId {
                name,
                version: ua_token(headers),
                source,
            },
            None => ClientId::from_user_agent_bytes(headers.get(USER_AGENT).map(|v| v.as_bytes())),
        }
    }

    /// A name as a client row holds it: trimmed, cut to [`MAX_NAME_BYTES`], printable ASCII
    /// (else `?`); `-` when empty.
    pub fn clean_name(name: &str) -> String {
        clean(name.as_bytes()).map_or_else(|| UNKNOWN.to_string(), Cow::into_owned)
    }

    /// A client verified by `[auth]` (a token's claim, an API key's client), its version the
    /// User-Agent's product token.
    pub fn verified(name: &str, source: Source, headers: &'a HeaderMap) -> ClientId<'a> {
        ClientId {
            name: Cow::Owned(
                clean(name.as_bytes()).map_or_else(|| UNKNOWN.to_string(), Cow::into_owned),
            ),
            version: ua_token(headers),
            source,
        }
    }

    /// The client a User-Agent names: its first product token.
    pub fn from_user_agent(user_agent: Option<&'a str>) -> ClientId<'a> {
        ClientId::from_user_agent_bytes(user_agent.map(str::as_bytes))
    }

    fn from_user_agent_bytes(user_agent: Option<&'a [u8]>) -> ClientId<'a> {
        match user_agent.and_then(product) {
            Some((_, name, version)) => ClientId {
                name: Cow::Borrowed(name),
                version: version.map(Cow::Borrowed),
                source: Source::UserAgent,
            },
            None => ClientId {
                name: Cow::Borrowed(UNKNOWN),
                version: None,
                source: Source::Unknown,
            },
        }
    }

    /// A client by name (cleaned as header values are; an empty name is `-`), as if it had
    /// named itself by `x-client-id`.
    pub fn new(name: &'a str, version: Option<&'a str>) -> ClientId<'a> {
        let name = clean(name.as_bytes());
        ClientId {
            source: match name {
                Some(_) => Source::ClientIdHeader,
                None => Source::Unknown,
            },
            name: name.unwrap_or(Cow::Borrowed(UNKNOWN)),
            version: version.and_then(|v| clean(v.as_bytes())),
        }
    }

    /// Where the name came from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Whether the gateway verified the name (a certificate, a token, an API key) rather
    /// than took the client's word for it.
    pub fn is_verified(&self) -> bool {
        matches!(
            self.source,
            Source::Certificate | Source::Token | Source::ApiKey
        )
    }

    /// The name, when the client gave one (credentials or a header) rather than only a
    /// User-Agent.
    pub fn declared(&self) -> Option<&str> {
        match self.source {
            Source::UserAgent | Source::Unknown => None,
            _ => Some(&self.name),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// A copy that outlives the request's headers (for an answer streamed after them).
    pub fn into_owned(self) -> ClientId<'static> {
        ClientId {
            name: Cow::Owned(self.name.into_owned()),
            version: self.version.map(|v| Cow::Owned(v.into_owned())),
            source: self.source,
        }
    }
}

/// The User-Agent's first product token in full (`okhttp/4.12.0`): a named client's version.
fn ua_token(headers: &HeaderMap) -> Option<Cow<'_, str>> {
    headers
        .get(USER_AGENT)
        .and_then(|ua| product(ua.as_bytes()))
        .map(|(token, _, _)| Cow::Borrowed(token))
}

/// A header value trimmed, cut to [`MAX_NAME_BYTES`], printable ASCII (else `?`); `None` when
/// empty. Borrowed when nothing needed replacing.
fn clean(bytes: &[u8]) -> Option<Cow<'_, str>> {
    let bytes = bytes.trim_ascii();
    if bytes.is_empty() {
        return None;
    }
    let cut = &bytes[..bytes.len().min(MAX_NAME_BYTES)];
    if cut.iter().all(|b| (b' '..=b'~').contains(b))
        && let Ok(s) = std::str::from_utf8(cut)
    {
        return Some(Cow::Borrowed(s.trim_end()));
    }
    // A non-ASCII character may take four bytes and becomes one `?`: read enough for
    // MAX_NAME_BYTES characters, no more.
    let head = &bytes[..bytes.len().min(4 * MAX_NAME_BYTES)];
    let s: String = String::from_utf8_lossy(head)
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(MAX_NAME_BYTES)
        .collect();
    Some(Cow::Owned(s.trim_end().to_string()))
}

/// A token character (RFC 9110 §5.6.2): a table, as this runs per byte of a User-Agent.
fn tchar(b: u8) -> bool {
    const TABLE: [bool; 256] = {
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            let c = i as u8;
            t[i] = c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                );
            i += 1;
        }
        t
    };
    TABLE[b as usize]
}

/// The first product of a User-Agent: (`name/version`, `name`, `version`), each cut to
/// [`MAX_NAME_BYTES`]. `None` when the User-Agent does not start with a token.
fn product(ua: &[u8]) -> Option<(&str, &str, Option<&str>)> {
    let ua = ua.trim_ascii_start();
    let name_len = ua.iter().take_while(|&&b| tchar(b)).count();
    if name_len == 0 {
        return None;
    }
    let mut token_len = name_len;
    let mut version = None;
    if ua.get(name_len) == Some(&b'/') {
        let v = &ua[name_len + 1..];
        let v_len = v.iter().take_while(|&&b| tchar(b)).count();
        if v_len > 0 {
            version = Some(&v[..v_len.min(MAX_NAME_BYTES)]);
            token_len = name_len + 1 + v_len;
        }
    }
    // Token characters are ASCII: these conversions cannot fail.
    fn s(b: &[u8]) -> Option<&str> {
        std::str::from_utf8(b).ok()
    }
    Some((
        s(&ua[..token_len.min(MAX_NAME_BYTES)])?,
        s(&ua[..name_len.min(MAX_NAME_BYTES)])?,
        version.and_then(s),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn user_agent_product_tokens() {
        let long = "x".repeat(300);
        for (ua, name, version) in [
            (Some("okhttp/4.12.0 (Linux)"), "okhttp", Some("4.12.0")),
            (
                Some("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36"),
                "Mozilla",
                Some("5.0"),
            ),
            (Some("curl/8.5.0"), "curl", Some("8.5.0")),
            (
                Some("grpc-java-netty/1.62.2"),
                "grpc-java-netty",
                Some("1.62.2"),
            ),
            (
                Some("python-requests/2.31.0"),
                "python-requests",
                Some("2.31.0"),
            ),
            (Some("Go-http-client/1.1"), "Go-http-client", Some("1.1")),
            (Some("Dart/3.2 (dart:io)"), "Dart", Some("3.2")),
            (Some("  okhttp/4.12.0"), "okhttp", Some("4.12.0")),
            (Some("MyApp"), "MyApp", None),
            (Some("MyApp/"), "MyApp", None),
            (Some("MyApp/ 1.0"), "MyApp", None),
            (Some("a;b"), "a", None),
            (Some(""), "-", None),
            (Some("   "), "-", None),
            (Some("(compatible; bot)"), "-", None),
            (Some("évil/1"), "-", None),
            (Some("<script>/1"), "-", None),
            (None, "-", None),
            (Some(long.as_str()), &long[..128], None),
        ] {
            let c = ClientId::from_user_agent(ua);
            assert_eq!((c.name(), c.version()), (name, version), "{ua:?}");
            assert!(matches!(c.name, Cow::Borrowed(_)), "no copy for {ua:?}");
        }
    }

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn sources_in_order() {
        let configured = HeaderName::from_static("x-team");
        let all = headers(&[
            ("x-client-id", b"billing"),
            ("x-team", b"payments"),
            ("user-agent", b"okhttp/4.12.0 (Linux)"),
        ]);
        // A verified certificate before anything the client says of itself.
        let c = ClientId::from_request(&all, Some(&configured), Some("spiffe://a/b"));
        assert_eq!(
            (c.name(), c.version()),
            ("spiffe://a/b", Some("okhttp/4.12.0"))
        );
        assert!(c.is_verified());
        let c = ClientId::from_request(&all, Some(&configured), None);
        assert_eq!((c.name(), c.version()), ("billing", Some("okhttp/4.12.0")));
        assert!(!c.is_verified());
        let no_id = headers(&[("x-team", b"payments"), ("user-agent", b"curl/8.5.0")]);
        let c = ClientId::from_request(&no_id, Some(&configured), None);
        assert_eq!((c.name(), c.version()), ("payments", Some("curl/8.5.0")));
        let c = ClientId::verified("billing-legacy", Source::ApiKey, &no_id);
        assert_eq!(
            (c.name(), c.version(), c.declared()),
            ("billing-legacy", Some("curl/8.5.0"), Some("billing-legacy"))
        );
        assert!(c.is_verified());
        let c = ClientId::from_request(&no_id, None, None);
        assert_eq!((c.name(), c.version()), ("curl", Some("8.5.0")));
        // An empty x-client-id counts as none.
        let empty = headers(&[("x-client-id", b"  "), ("user-agent", b"curl/8.5.0")]);
        assert_eq!(ClientId::from_request(&empty, None, None).name(), "curl");
        let nothing = HeaderMap::new();
        let c = ClientId::from_request(&nothing, Some(&configured), None);
        assert_eq!((c.name(), c.version()), ("-", None));
    }

    #[test]
    fn values_are_cleaned_and_bounded() {
        let long = "é".repeat(500);
        let h = headers(&[("x-client-id", long.as_bytes())]);
        let c = ClientId::from_request(&h, None, None);
        assert_eq!(c.name(), "?".repeat(128));
        let h = headers(&[("x-client-id", b" caf\xc3\xa9\tbar ")]);
        assert_eq!(ClientId::from_request(&h, None, None).name(), "caf??bar");
        let h = headers(&[("x-client-id", b"\xff\xfe")]);
        assert_eq!(ClientId::from_request(&h, None, None).name(), "??");
        let h = headers(&[("x-client-id", "x".repeat(1000).as_bytes())]);
        let c = ClientId::from_request(&h, None, None);
        assert_eq!(c.name().len(), 128);
        assert!(matches!(c.name, Cow::Borrowed(_)));
        // Markup passes as text: the page escapes it.
        let h = headers(&[("x-client-id", b"<script>alert(1)</script>")]);
        assert_eq!(
            ClientId::from_request(&h, None, None).name(),
            "<script>alert(1)</script>"
        );
        assert_eq!(ClientId::new("", None).name(), "-");
        let owned: ClientId<'static> = ClientId::new("a", Some("1")).into_owned();
        assert_eq!(owned.version(), Some("1"));
    }
}
