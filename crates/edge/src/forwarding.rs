//! What of a request's headers reaches the upstream besides the fixed set, and what of the
//! upstream's metadata reaches a REST client as plain headers: `forward_headers` and
//! `forward_response_headers` (exact names and `prefix*` patterns), and `X-Forwarded-For`,
//! `-Proto` and `-Host`, with `trusted_proxies` deciding whose `X-Forwarded-*` are believed
//! and which address is the client's.

use std::net::IpAddr;

use http::{HeaderMap, HeaderName, HeaderValue};

/// Header names no pattern may forward: the connection's own (hop-by-hop) and the
/// message's framing. gRPC's own names (`grpc-*`, `te`, `content-type`, …) are refused too
/// (`reserved::is_reserved_metadata`).
const NEVER: &[&str] = &[
    "host",
    "content-length",
    "te",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "trailer",
    "proxy-authorization",
    "proxy-authenticate",
];

/// A list of header names and `prefix*` patterns, lowercase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderPatterns {
    exact: Vec<HeaderName>,
    prefixes: Vec<String>,
    /// The list names `X-Forwarded-For`, `-Proto` or `-Host`: the gateway sends all three,
    /// made as [`put_forwarded`] makes them. Opt-in: the three headers cost about 9,000
    /// instructions per call (11 % of an EchoOrder request, `make bench-ir`, 2026-12-07),
    /// most of it HTTP/2 header encoding.
    x_forwarded: bool,
}

impl HeaderPatterns {
    /// Reads `patterns` (`key` names the setting in errors): each a header name, or a name's
    /// start followed by `*`; names HTTP or gRPC keep for themselves are refused, naming them.
    pub fn parse(key: &str, patterns: &[String]) -> Result<HeaderPatterns, String> {
        let mut out = HeaderPatterns::default();
        for pattern in patterns {
            let lower = pattern.to_ascii_lowercase();
            let (name, prefix) = match lower.strip_suffix('*') {
                Some(start) => (start, true),
                None => (lower.as_str(), false),
            };
            if name.is_empty() || HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!(
                    "{key}: {pattern:?} is not a header name (a name, or the start of one followed by *)"
                ));
            }
            let refused = |n: &str| NEVER.contains(&n) || crate::reserved::is_reserved_metadata(n);
            let covers_refused =
                prefix && (NEVER.iter().any(|n| n.starts_with(name)) || "grpc-".starts_with(name));
            if refused(name) || covers_refused || name.starts_with("grpc-") {
                return Err(format!(
                    "{key}: {pattern:?} would forward a header HTTP or gRPC keep for themselves (hop-by-hop headers, host, content-length, te, content-type, user-agent, grpc-*)"
                ));
            }
            out.x_forwarded |= [X_FORWARDED_FOR, X_FORWARDED_PROTO, X_FORWARDED_HOST]
                .iter()
                .any(|x| x.as_str() == name || (prefix && x.as_str().starts_with(name)));
            if prefix {
                out.prefixes.push(name.to_owned());
            } else if let Ok(n) = HeaderName::from_bytes(name.as_bytes()) {
                out.exact.push(n);
            }
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty()
    }

    /// Whether the list names one of the `X-Forwarded-*` headers.
    pub fn x_forwarded(&self) -> bool {
        self.x_forwarded
    }

    /// Whether `name` (lowercase, as `HeaderName`s are) is one the list forwards.
    pub fn matches(&self, name: &HeaderName) -> bool {
        self.exact.contains(name) || self.prefixes.iter().any(|p| name.as_str().starts_with(p))
    }
}

/// `trusted_proxies`: the addresses whose `X-Forwarded-*` headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Reads CIDRs (`10.0.0.0/8`, `fd00::/8`) and single addresses.
    pub fn parse(list: &[String]) -> Result<TrustedProxies, String> {
        list.iter()
            .map(|s| {
                s.parse::<ipnet::IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        format!(
                            "trusted_proxies: {s:?} is neither a CIDR (10.0.0.0/8) nor an address"
                        )
                    })
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: from the peer back along `X-Forwarded-For` (right to left),
    /// the first address that is not a trusted proxy — the peer itself unless it is one. A
    /// malformed entry ends the walk at the address before it.
    pub fn client(&self, headers: &HeaderMap, peer: IpAddr) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for value in headers.get_all(X_FORWARDED_FOR).iter().rev() {
            let Ok(text) = value.to_str() else {
                return client;
            };
            for entry in text.rsplit(',') {
                let Some(ip) = parse_entry(entry) else {
                    return client;
                };
                client = ip;
                if !self.trusts(ip) {
                    return client;
                }
            }
        }
        client
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 one (a dual-stack listener's peers).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One `X-Forwarded-For` entry: an address, perhaps in brackets or with a port.
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let e = entry.trim();
    if let Ok(ip) = e.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    e.parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| canonical(s.ip()))
}

pub(crate) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(crate) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
pub(crate) const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// The `X-Forwarded-*` metadata of a call: a trusted peer's chain kept with the peer
/// appended (else the peer alone); a trusted peer's `-Proto` and `-Host` kept (else the
/// listener's scheme and the request's authority).
pub(crate) fn put_forwarded(
    metadata: &mut HeaderMap,
    headers: &HeaderMap,
    authority: Option<&str>,
    peer: Option<IpAddr>,
    tls: bool,
    trusted: &TrustedProxies,
) {
    let believed = peer.is_some_and(|p| !trusted.is_empty() && trusted.trusts(p));
    let chain = believed
        .then(|| joined(headers, &X_FORWARDED_FOR))
        .flatten();
    if let Some(peer) = peer {
        let peer = canonical(peer).to_string();
        let value = match chain {
            Some(chain) => format!("{chain}, {peer}"),
            None => peer,
        };
        if let Ok(v) = HeaderValue::try_from(value) {
            metadata.insert(X_FORWARDED_FOR, v);
        }
    }
    match headers.get(X_FORWARDED_PROTO).filter(|_| believed) {
        Some(v) => metadata.insert(X_FORWARDED_PROTO, v.clone()),
        None => metadata.insert(
            X_FORWARDED_PROTO,
            HeaderValue::from_static(if tls { "https" } else { "http" }),
        ),
    };
    let host = headers
        .get(X_FORWARDED_HOST)
        .filter(|_| believed)
        .cloned()
        .or_else(|| authority.and_then(|a| HeaderValue::from_str(a).ok()));
    if let Some(host) = host {
        metadata.insert(X_FORWARDED_HOST, host);
    }
}

/// Every value of `name`, joined by `, ` (a chain may come in several header lines).
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut out: Option<String> = None;
    for v in headers.get_all(name) {
        let text = v.to_str().ok()?.trim();
        match &mut out {
            Some(o) => {
                o.push_str(", ");
                o.push_str(text);
            }
            None => out = Some(text.to_owned()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Result<HeaderPatterns, String> {
        HeaderPatterns::parse(
            "forward_headers",
            &list.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn patterns_are_names_and_prefixes_never_the_protocols_own() {
        let p = patterns(&["X-Tenant", "x-feature-*"]).unwrap();
        assert!(!p.x_forwarded());
        assert!(patterns(&["x-forwarded-for"]).unwrap().x_forwarded());
        assert!(patterns(&["X-*"]).unwrap().x_forwarded());
        let m = |n: &'static str| p.matches(&HeaderName::from_static(n));
        assert!(m("x-tenant") && m("x-feature-a") && m("x-feature-"));
        assert!(!m("x-tenants") && !m("x-feature") && !m("x-other"));
        for bad in [
            "host",
            "Content-Length",
            "te",
            "connection",
            "grpc-timeout",
            "grpc-*",
            "g*",
            "t*",
            "content-type",
            "user-agent",
            "",
            "*",
            "a b",
        ] {
            let e = patterns(&[bad]).unwrap_err();
            assert!(e.starts_with("forward_headers: "), "{bad}: {e}");
        }
    }

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append(X_FORWARDED_FOR, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_client_is_the_first_untrusted_address_from_the_right() {
        let t = TrustedProxies::parse(&["10.0.0.0/8".into(), "::1".into()]).unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let peer = ip("10.1.1.1");
        assert_eq!(t.client(&headers(&[]), peer), peer);
        assert_eq!(
            t.client(&headers(&["203.0.113.9, 10.2.2.2"]), peer),
            ip("203.0.113.9")
        );
        // A spoofed left end behind an untrusted hop is not believed.
        assert_eq!(
            t.client(&headers(&["1.1.1.1", "198.51.100.7, 10.3.3.3"]), peer),
            ip("198.51.100.7")
        );
        // An untrusted peer's chain is never read.
        assert_eq!(
            t.client(&headers(&["1.1.1.1"]), ip("192.0.2.1")),
            ip("192.0.2.1")
        );
        // Ports and brackets; a malformed entry stops the walk before it.
        assert_eq!(
            t.client(&headers(&["[2001:db8::1]:443, 10.0.0.2:80"]), ip("::1")),
            ip("2001:db8::1")
        );
        assert_eq!(
            t.client(&headers(&["junk, 10.0.0.2"]), peer),
            ip("10.0.0.2")
        );
        // Only proxies: the leftmost.
        assert_eq!(t.client(&headers(&["10.0.0.3"]), peer), ip("10.0.0.3"));
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["proxy".into()]).is_err());
    }

    #[test]
    fn forwarded_headers_keep_a_trusted_chain_only() {
        let t = TrustedProxies::parse(&["10.0.0.0/8".into()]).unwrap();
        let mut incoming = headers(&["203.0.113.9"]);
        incoming.insert(X_FORWARDED_PROTO, HeaderValue::from_static("https"));
        incoming.insert(
            X_FORWARDED_HOST,
            HeaderValue::from_static("api.example.com"),
        );
        let run = |peer: &str, trusted: &TrustedProxies| {
            let mut m = HeaderMap::new();
            put_forwarded(
                &mut m,
                &incoming,
                Some("gw:8080"),
                Some(peer.parse().unwrap()),
                false,
                trusted,
            );
            let get = |n: &HeaderName| m.get(n).unwrap().to_str().unwrap().to_owned();
            (
                get(&X_FORWARDED_FOR),
                get(&X_FORWARDED_PROTO),
                get(&X_FORWARDED_HOST),
            )
        };
        assert_eq!(
            run("10.9.9.9", &t),
            (
                "203.0.113.9, 10.9.9.9".into(),
                "https".into(),
                "api.example.com".into()
            )
        );
        let untrusted = ("192.0.2.5".into(), "http".into(), "gw:8080".into());
        assert_eq!(run("192.0.2.5", &t), untrusted);
        assert_eq!(
            run("::ffff:192.0.2.5", &TrustedProxies::default()),
            untrusted
        );
    }
}
