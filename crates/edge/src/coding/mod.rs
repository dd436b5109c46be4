//! Content codings (RFC 9110 §8.4): the one an answer gets by `Accept-Encoding`
//! ([`negotiate`]), answers compressed as they leave ([`encode`]), request bodies decoded as
//! they arrive ([`decode`]).
//!
//! The codecs are flate2 (gzip, deflate), brotli and zstd, used directly rather than through
//! tower-http's `CompressionLayer` or async-compression's streams: a stream's answer must be
//! flushed after every frame so it stays live (tower-http buffers it and leaves SSE out for
//! that reason), the answer body keeps the request's admission ticket and counts the bytes
//! sent, and a request body's limit applies to its decoded size inside one chunk (a 10 KB
//! chunk may decode to 10 MB). Each of those is a few lines around a synchronous codec.

pub(crate) mod decode;
pub(crate) mod encode;

use http::HeaderMap;
use http::header::ACCEPT_ENCODING;

/// A content coding other than `identity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    /// HTTP's `deflate`: zlib-wrapped DEFLATE (RFC 9110 §8.4.1.2).
    Deflate,
    Br,
    Zstd,
}

impl Coding {
    pub const ALL: [Coding; 4] = [Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Deflate];

    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// A coding by its token (case-insensitive; `x-gzip` is `gzip`, RFC 9110 §8.4.1.3).
    pub fn parse(token: &str) -> Option<Coding> {
        let t = token.trim();
        [
            ("gzip", Coding::Gzip),
            ("x-gzip", Coding::Gzip),
            ("deflate", Coding::Deflate),
            ("br", Coding::Br),
            ("zstd", Coding::Zstd),
        ]
        .into_iter()
        .find(|(name, _)| t.eq_ignore_ascii_case(name))
        .map(|(_, c)| c)
    }
}

/// How hard the codecs work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Each codec's fastest setting (gzip and deflate 1, brotli 0, zstd 1).
    Fastest,
    /// A setting made for answers compressed as they are served (gzip and deflate 6, brotli
    /// 4, zstd 3): brotli's own default, 11, is for files compressed once.
    #[default]
    Default,
    /// Each codec's best (gzip and deflate 9, brotli 11, zstd 19).
    Best,
    /// A number, clamped to each codec's range (gzip and deflate 0-9, brotli 0-11, zstd 1-22).
    Precise(u32),
}

impl Level {
    fn for_coding(self, coding: Coding) -> u32 {
        let (min, fastest, default, best, max) = match coding {
            Coding::Gzip | Coding::Deflate => (0, 1, 6, 9, 9),
            Coding::Br => (0, 0, 4, 11, 11),
            Coding::Zstd => (1, 1, 3, 19, 22),
        };
        match self {
            Level::Fastest => fastest,
            Level::Default => default,
            Level::Best => best,
            Level::Precise(n) => n.clamp(min, max),
        }
    }
}

/// The `[compression]` settings: which answers are compressed, and how.
#[derive(Debug, Clone)]
pub struct CompressionConfig {
    /// Answers are compressed at all (default false: the binary's config turns it on).
    pub enabled: bool,
    /// Answers held whole are compressed from this size up (default 1 KiB); streams always.
    pub min_bytes: usize,
    /// The codings offered, best first: among those the client accepts with the same
    /// q-value, the first here wins (default zstd, br, gzip, deflate).
    pub algorithms: Vec<Coding>,
    pub level: Level,
    /// Protobuf answers are compressed too (default false: passed-through protobuf is
    /// already compact, and compressing it costs more CPU per byte saved than JSON does).
    pub protobuf: bool,
}

impl Default for CompressionConfig {
    fn default() -> CompressionConfig {
        CompressionConfig {
            enabled: false,
            min_bytes: 1024,
            algorithms: Coding::ALL.to_vec(),
            level: Level::Default,
            protobuf: false,
        }
    }
}

/// The coding of an answer to a request with these headers, among `offered` (best first):
/// the highest q-value wins, `offered`'s order breaks ties, `*` stands for every coding not
/// named, q=0 refuses. `None`: identity (no Accept-Encoding, nothing acceptable, or only
/// identity). A client refusing identity too still gets identity: an uncompressed answer
/// serves it better than a 406.
pub fn negotiate(headers: &HeaderMap, offered: &[Coding]) -> Option<Coding> {
    // Weights in thousandths, by `Coding as usize`.
    let mut named = [None::<u16>; 4];
    let mut star: Option<u16> = None;
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for element in value.split(',') {
            let mut parts = element.split(';');
            let token = parts.next().unwrap_or("").trim();
            let Some(q) = qvalue(parts) else { continue };
            if token == "*" {
                star = Some(q);
            } else if let Some(coding) = Coding::parse(token) {
                // A coding named twice: the higher weight.
                let w = &mut named[coding as usize];
                *w = Some(w.map_or(q, |old| old.max(q)));
            }
        }
    }
    let mut best: Option<(u16, Coding)> = None;
    for &coding in offered {
        let q = named[coding as usize].or(star).unwrap_or(0);
        if q > 0 && best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, coding));
        }
    }
    best.map(|(_, c)| c)
}

/// An element's weight in thousandths (RFC 9110 §12.4.2): 1000 without `q`, `None` when the
/// q-value is malformed (the element is ignored).
fn qvalue<'a>(params: impl Iterator<Item = &'a str>) -> Option<u16> {
    let mut q = 1000;
    for param in params {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let value = value.trim();
        let (int, frac) = value.split_once('.').unwrap_or((value, ""));
        if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let thousandths = frac
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(3)
            .fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
        q = match int {
            "0" => thousandths,
            "1" if thousandths == 0 => 1000,
            _ => return None,
        };
    }
    Some(q)
}

/// Whether an answer of this content type is worth compressing: text, JSON, MessagePack and
/// the stream framings of those; protobuf only when configured; anything else (images,
/// archives, an `HttpBody` of another type) is left as it is.
pub(crate) fn compressible(content_type: &[u8], protobuf: bool) -> bool {
    let essence = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let is = |list: &[&str]| {
        list.iter()
            .any(|t| essence.eq_ignore_ascii_case(t.as_bytes()))
    };
    let ends = |suffix: &[u8]| {
        essence.len() >= suffix.len()
            && essence[essence.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    use transcode::media;
    if is(media::PROTOBUF) || is(media::PROTO) {
        return protobuf;
    }
    // Connect's streams compress message by message (Connect-Content-Encoding), never as
    // a whole body.
    if is(media::CONNECT_JSON) || is(media::CONNECT_PROTO) {
        return false;
    }
    is(media::JSON)
        || is(media::MSGPACK)
        || is(media::NDJSON)
        || is(media::SSE)
        || is(&["application/xml", "application/javascript"])
        || (essence.len() > 5 && essence[..5].eq_ignore_ascii_case(b"text/"))
        || ends(b"+json")
        || ends(b"+xml")
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn pick(accept: &str) -> Option<&'static str> {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_str(accept).unwrap());
        negotiate(&h, &Coding::ALL).map(Coding::as_str)
    }

    #[test]
    fn accept_encoding_by_q_value_then_the_servers_order() {
        assert_eq!(pick("gzip"), Some("gzip"));
        assert_eq!(pick("GZIP"), Some("gzip"));
        assert_eq!(pick("x-gzip"), Some("gzip"));
        assert_eq!(pick("gzip, deflate, br, zstd"), Some("zstd"));
        assert_eq!(pick("gzip, deflate, br"), Some("br"));
        assert_eq!(pick("br;q=0.5, gzip;q=0.8"), Some("gzip"));
        assert_eq!(pick("br;q=1.0, gzip;q=0.999"), Some("br"));
        assert_eq!(pick("gzip;q=0"), None);
        assert_eq!(pick("identity"), None);
        assert_eq!(pick("identity;q=0"), None);
        assert_eq!(pick("*"), Some("zstd"));
        assert_eq!(pick("*;q=0.1, zstd;q=0, br;q=0"), Some("gzip"));
        assert_eq!(pick("*, gzip;q=0.5"), Some("zstd"));
        assert_eq!(pick("compress, unknown"), None);
        assert_eq!(pick(""), None);
        // Malformed weights ignore their element only.
        assert_eq!(pick("br;q=2, gzip"), Some("gzip"));
        assert_eq!(pick("br;q=0.5555, gzip;q=0.1"), Some("gzip"));
        assert_eq!(pick("br;q=abc"), None);
        assert_eq!(pick("gzip ; q=0.5 , br ; Q=0.4"), Some("gzip"));
        // Named twice: the higher weight.
        assert_eq!(pick("br;q=0.1, gzip;q=0.5, br;q=0.9"), Some("br"));
        assert_eq!(negotiate(&HeaderMap::new(), &Coding::ALL), None);
    }

    #[test]
    fn only_the_offered_codings_are_chosen() {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_static("zstd, br, gzip"));
        assert_eq!(negotiate(&h, &[Coding::Gzip]), Some(Coding::Gzip));
        assert_eq!(negotiate(&h, &[Coding::Deflate]), None);
        assert_eq!(
            negotiate(&h, &[Coding::Gzip, Coding::Zstd]),
            Some(Coding::Gzip)
        );
    }

    #[test]
    fn what_is_worth_compressing() {
        for t in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/msgpack",
            "application/x-ndjson",
            "text/event-stream",
            "text/plain; charset=utf-8",
            "application/problem+json",
            "image/svg+xml",
        ] {
            assert!(compressible(t.as_bytes(), false), "{t}");
        }
        for t in [
            "application/x-protobuf",
            "image/png",
            "application/octet-stream",
            "",
        ] {
            assert!(!compressible(t.as_bytes(), false), "{t}");
        }
        assert!(compressible(b"application/x-protobuf", true));
        assert!(compressible(b"application/protobuf", true));
    }

    #[test]
    fn levels_stay_in_each_codecs_range() {
        assert_eq!(Level::Precise(30).for_coding(Coding::Gzip), 9);
        assert_eq!(Level::Precise(30).for_coding(Coding::Br), 11);
        assert_eq!(Level::Precise(30).for_coding(Coding::Zstd), 22);
        assert_eq!(Level::Precise(0).for_coding(Coding::Zstd), 1);
        assert_eq!(Level::Precise(0).for_coding(Coding::Gzip), 0);
        assert_eq!(Level::Default.for_coding(Coding::Br), 4);
    }
}
