//! Content negotiation: the request's format from Content-Type, the response's from Accept.
//!
//! Pure functions of two headers. The request path calls them once per request, in its `negotiate`
//! step (REST/HTTP's `Protocol::negotiate`, `protocol/http.rs`), whose plan every later step
//! reads.

use http::HeaderValue;
use transcode::Format;
// Media types per format and framing, the canonical one (used on responses) first.
use transcode::media::{JSON, MSGPACK, NDJSON, PROTOBUF, SSE};
use transcode::stream::{Framing, InFraming};

use crate::error::EdgeError;
use crate::media_type::{self, MediaType};

/// The server's preference among formats tied at the same q: protobuf > msgpack > JSON.
const PREFERENCE: [Format; 3] = [Format::Protobuf, Format::Msgpack, Format::Json];

fn types_of(f: Format) -> &'static [&'static str] {
    match f {
        Format::Json => JSON,
        Format::Msgpack => MSGPACK,
        Format::Protobuf => PROTOBUF,
    }
}

/// The Content-Type a response in `f` carries.
pub fn content_type(f: Format) -> &'static str {
    types_of(f)[0]
}

/// The format named by a Content-Type header (parameters ignored, any case).
pub fn request_format(content_type: Option<&HeaderValue>) -> Result<Format, EdgeError> {
    // Most clients send one of our types exactly as we spell it: found by comparing bytes,
    // without parsing (`parsed_request_format` gives the same, a test holds them equal).
    if let Some(value) = content_type
        && let Some(f) = PREFERENCE
            .into_iter()
            .find(|f| spelled_as_one_of(value, types_of(*f)))
    {
        return Ok(f);
    }
    parsed_request_format(content_type)
}

/// Whether `value` is, byte for byte, one of `types`.
fn spelled_as_one_of(value: &HeaderValue, types: &[&str]) -> bool {
    types.iter().any(|t| t.as_bytes() == value.as_bytes())
}

/// [`request_format`] by the grammar alone.
fn parsed_request_format(content_type: Option<&HeaderValue>) -> Result<Format, EdgeError> {
    let Some(value) = content_type else {
        return Err(EdgeError::UnsupportedMediaType(
            "missing Content-Type header".into(),
        ));
    };
    let text = value
        .to_str()
        .map_err(|_| EdgeError::UnsupportedMediaType("Content-Type header is not ASCII".into()))?;
    let m = media_type::parse(text).ok_or_else(|| {
        EdgeError::UnsupportedMediaType(format!("Content-Type {text:?} is not a media type"))
    })?;
    PREFERENCE
        .into_iter()
        .find(|f| is_one_of(&m, types_of(*f)))
        .ok_or_else(|| {
            EdgeError::UnsupportedMediaType(format!(
                "Content-Type \"{}/{}\" is not supported",
                m.ty.to_ascii_lowercase(),
                m.sub.to_ascii_lowercase()
            ))
        })
}

/// Whether `m` is one of `types` (`type/subtype`, any case).
fn is_one_of(m: &MediaType<'_>, types: &[&str]) -> bool {
    types.iter().any(|t| is(t, m.ty, m.sub))
}

/// Whether `full` (one of ours, `type/subtype`) is `ty/sub`, any case; the lengths first.
fn is(full: &str, ty: &str, sub: &str) -> bool {
    full.len() == ty.len() + 1 + sub.len()
        && type_is(full, ty)
        && full[ty.len() + 1..].eq_ignore_ascii_case(sub)
}

/// Whether the type of `full` (one of ours, `type/subtype`) is `ty`, any case; compared in
/// place (splitting ours at the slash cost a third of negotiation's instructions).
fn type_is(full: &str, ty: &str) -> bool {
    full.len() > ty.len()
        && full.as_bytes()[ty.len()] == b'/'
        && full[..ty.len()].eq_ignore_ascii_case(ty)
}

/// The response format from Accept, `request` being the format a missing Accept (or a tie)
/// picks. `protobuf` false: the response has no protobuf form (a `response_body` that is not
/// a message), so protobuf is not offered.
pub fn response_format(
    request: Format,
    accept: Option<&HeaderValue>,
    strict: bool,
    protobuf: bool,
) -> Result<(Format, bool), EdgeError> {
    let offers: &[(Format, &[&str])] = if protobuf {
        &[
            (Format::Protobuf, PROTOBUF),
            (Format::Msgpack, MSGPACK),
            (Format::Json, JSON),
        ]
    } else {
        &[(Format::Msgpack, MSGPACK), (Format::Json, JSON)]
    };
    let default = if protobuf || request != Format::Protobuf {
        request
    } else {
        Format::Json
    };
    choose(offers, default, Format::Json, accept, strict)
}

/// The framing of a response stream from Accept; `default` is what a missing Accept (or a
/// tie) picks. Ties otherwise: protobuf > msgpack > NDJSON > JSON array > SSE. `protobuf`
/// false: the messages have no protobuf form, so delimited protobuf is not offered.
pub fn response_framing(
    default: Framing,
    accept: Option<&HeaderValue>,
    strict: bool,
    protobuf: bool,
) -> Result<(Framing, bool), EdgeError> {
    const ALL: &[(Framing, &[&str])] = &[
        (Framing::Delimited, PROTOBUF),
        (Framing::Msgpack, MSGPACK),
        (Framing::Ndjson, NDJSON),
        (Framing::JsonArray, JSON),
        (Framing::Sse, SSE),
    ];
    let (offers, default) = if protobuf {
        (ALL, default)
    } else if default == Framing::Delimited {
        (&ALL[1..], Framing::JsonArray)
    } else {
        (&ALL[1..], default)
    };
    choose(offers, default, Framing::JsonArray, accept, strict)
}

/// The framing of a request stream from its Content-Type.
pub fn request_framing(content_type: Option<&HeaderValue>) -> Result<InFraming, EdgeError> {
    let m = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(media_type::parse);
    match &m {
        Some(m) if is_one_of(m, NDJSON) => Ok(InFraming::Ndjson),
        Some(m) if is_one_of(m, JSON) => Ok(InFraming::JsonArray),
        Some(m) if is_one_of(m, MSGPACK) => Ok(InFraming::Msgpack),
        Some(m) if is_one_of(m, PROTOBUF) => Ok(InFraming::Delimited),
        _ => Err(EdgeError::UnsupportedMediaType(format!(
            "a request stream is application/x-ndjson, application/json (one array), \
             application/msgpack (consecutive values) or application/x-protobuf \
             (varint-delimited messages); got {}",
            content_type
                .and_then(|v| v.to_str().ok())
                .map_or("no Content-Type".to_owned(), |t| format!("{t:?}"))
        ))),
    }
}

/// Picks among `offers` (in the server's order of preference) by Accept. A tie at the top q
/// goes to `default` when it is among them; nothing acceptable gives `fallback` (flagged), or
/// 406 when `strict`.
fn choose<T: Copy + PartialEq>(
    offers: &[(T, &[&str])],
    default: T,
    fallback: T,
    accept: Option<&HeaderValue>,
    strict: bool,
) -> Result<(T, bool), EdgeError> {
    // An Accept of exactly one type, spelled as we spell it and offered once, picks that
    // offer: the grammar would give it q=1 and every other offer nothing. Compared as bytes,
    // without parsing (`parsed_choose` gives the same, a test holds them equal).
    if let Some(value) = accept {
        let mut spelled = offers
            .iter()
            .filter(|(_, types)| spelled_as_one_of(value, types));
        if let (Some((offer, _)), None) = (spelled.next(), spelled.next()) {
            return Ok((*offer, false));
        }
    }
    parsed_choose(offers, default, fallback, accept, strict)
}

/// [`choose`] by the grammar alone.
fn parsed_choose<T: Copy + PartialEq>(
    offers: &[(T, &[&str])],
    default: T,
    fallback: T,
    accept: Option<&HeaderValue>,
    strict: bool,
) -> Result<(T, bool), EdgeError> {
    let accept = accept
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("");
    if accept.is_empty() {
        return Ok((default, false));
    }
    // Each offer's q: that of the most specific range matching any of its media types (at
    // most five offers: the framings), in one pass over the ranges, without allocating.
    let mut best: [Option<(u8, u16)>; 5] = [None; 5];
    debug_assert!(offers.len() <= best.len());
    for range in media_type::parse_list(accept).flatten() {
        // A range whose q breaks the grammar is dropped.
        let Some(q) = range.param("q").map_or(Some(1000), parse_q) else {
            continue;
        };
        for (best, (_, types)) in best.iter_mut().zip(offers) {
            for ty in *types {
                let spec = if is(ty, range.ty, range.sub) {
                    2
                } else if range.sub == "*" && type_is(ty, range.ty) {
                    1
                } else if range.ty == "*" && range.sub == "*" {
                    0
                } else {
                    continue;
                };
                if best.is_none_or(|(bs, bq)| spec > bs || (spec == bs && q > bq)) {
                    *best = Some((spec, q));
                }
            }
        }
    }
    let mut qs = [0u16; 5];
    for (q, best) in qs.iter_mut().zip(best) {
        *q = best.map_or(0, |(_, q)| q);
    }
    let qs = &qs[..offers.len().min(qs.len())];
    let top = qs.iter().copied().max().unwrap_or(0);
    if top == 0 {
        if strict {
            let served: Vec<&str> = offers.iter().map(|(_, t)| t[0]).collect();
            return Err(EdgeError::NotAcceptable(format!(
                "Accept {accept:?} names no type this gateway serves here ({})",
                served.join(", ")
            )));
        }
        return Ok((fallback, true));
    }
    let mut tied = offers.iter().zip(qs).filter(|&(_, &q)| q == top);
    let chosen = if tied.clone().any(|((f, _), _)| *f == default) {
        default
    } else {
        tied.next().map_or(fallback, |((f, _), _)| *f)
    };
    Ok((chosen, false))
}

/// RFC 9110 qvalue: `0(.ddd)?` or `1(.000)?`; anything else drops the range.
fn parse_q(s: &str) -> Option<u16> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u16 = match int {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    let mut thousandths: u16 = 0;
    for (i, c) in frac.bytes().enumerate() {
        thousandths += (c - b'0') as u16 * [100, 10, 1][i];
    }
    let q = whole + thousandths;
    (q <= 1000).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neg(ct: &str, accept: Option<&str>, strict: bool) -> Result<(Format, bool), String> {
        let ct = HeaderValue::from_str(ct).unwrap();
        let accept = accept.map(|a| HeaderValue::from_str(a).unwrap());
        let request = request_format(Some(&ct)).map_err(|e| e.to_string())?;
        response_format(request, accept.as_ref(), strict, true).map_err(|e| e.to_string())
    }

    /// Every header value the byte-compare fast paths could take, and near misses.
    fn spellings() -> Vec<String> {
        let mut all = Vec::new();
        for t in [JSON, MSGPACK, PROTOBUF, NDJSON, SSE].concat() {
            all.push(t.to_owned());
            all.push(t.to_ascii_uppercase());
            all.push(format!("{t}; charset=utf-8"));
            all.push(format!("{t};q=0"));
            all.push(format!(" {t}"));
            all.push(format!("{t}, application/json"));
            all.push(t[..t.len() - 1].to_owned());
        }
        all.extend(["*/*", "application/*", "text/plain", ""].map(str::to_owned));
        all
    }

    #[test]
    fn the_fast_paths_answer_as_the_grammar_does() {
        let shown = |r: Result<(usize, bool), EdgeError>| r.map_err(|e| e.to_string());
        let offer_sets: [&[(usize, &[&str])]; 3] = [
            &[(0, PROTOBUF), (1, MSGPACK), (2, JSON)],
            &[(1, MSGPACK), (2, JSON)],
            &[
                (0, PROTOBUF),
                (1, MSGPACK),
                (3, NDJSON),
                (2, JSON),
                (4, SSE),
            ],
        ];
        for text in spellings() {
            let value = HeaderValue::from_str(&text).unwrap();
            assert_eq!(
                request_format(Some(&value)).map_err(|e| e.to_string()),
                parsed_request_format(Some(&value)).map_err(|e| e.to_string()),
                "{text:?}"
            );
            for offers in offer_sets {
                for strict in [false, true] {
                    for default in [0, 1, 2] {
                        assert_eq!(
                            shown(choose(offers, default, 2, Some(&value), strict)),
                            shown(parsed_choose(offers, default, 2, Some(&value), strict)),
                            "{text:?} {offers:?} default {default} strict {strict}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn content_types_and_aliases() {
        use Format::*;
        for (ct, f) in [
            ("application/json", Json),
            ("Application/JSON; charset=UTF-8", Json),
            // RFC 9110 allows whitespace before the `;` and a quoted value.
            ("application/json ; charset=\"utf-8\"", Json),
            ("application/msgpack\t;\tx=1;;", Msgpack),
            ("application/msgpack", Msgpack),
            ("application/x-msgpack", Msgpack),
            ("application/vnd.msgpack", Msgpack),
            ("application/x-protobuf", Protobuf),
            ("application/protobuf; proto=bench.v1.Order", Protobuf),
            ("APPLICATION/X-GOOGLE-PROTOBUF", Protobuf),
        ] {
            assert_eq!(
                request_format(Some(&HeaderValue::from_static(ct))).unwrap(),
                f,
                "{ct}"
            );
        }
        for bad in [
            "text/plain",
            "application/xml",
            "json",
            "",
            "application/json; charset",
            "application/json charset=utf-8",
        ] {
            let e = request_format(Some(&HeaderValue::from_static(bad))).unwrap_err();
            assert!(matches!(e, EdgeError::UnsupportedMediaType(_)), "{bad}");
        }
        assert!(request_format(None).is_err());
    }

    #[test]
    fn accept_matrix() {
        use Format::*;
        let cases: &[(&str, Option<&str>, Format, bool)] = &[
            ("application/json", None, Json, false),
            ("application/x-protobuf", None, Protobuf, false),
            ("application/msgpack", Some("*/*"), Msgpack, false),
            ("application/json", Some("*/*"), Json, false),
            ("application/json", Some("application/*"), Json, false),
            // Case-insensitive, bare or with parameters.
            (
                "application/json",
                Some("APPLICATION/X-Protobuf"),
                Protobuf,
                false,
            ),
            (
                "application/json",
                Some("Application/MsgPack; q=1"),
                Msgpack,
                false,
            ),
            // A structured-syntax suffix names another type: nothing served, JSON anyway.
            (
                "application/x-protobuf",
                Some("application/json+foo"),
                Json,
                true,
            ),
            (
                "application/x-protobuf",
                Some("application/vnd.x+json;q=1"),
                Json,
                true,
            ),
            (
                "application/json",
                Some("application/x-protobuf"),
                Protobuf,
                false,
            ),
            (
                "application/json",
                Some("application/x-msgpack"),
                Msgpack,
                false,
            ),
            (
                "application/json",
                Some("application/vnd.msgpack;q=0.5, application/json;q=0.4"),
                Msgpack,
                false,
            ),
            // q=0 excludes a type even when a wildcard would admit it.
            (
                "application/json",
                Some("application/json;q=0, */*"),
                Protobuf,
                false,
            ),
            // Most specific match first: */*;q=1 does not lift json above its own q=0.1.
            (
                "application/json",
                Some("application/json;q=0.1, */*;q=0.5"),
                Protobuf,
                false,
            ),
            // Ties: the request's own format wins, otherwise protobuf > msgpack > json.
            (
                "application/msgpack",
                Some("application/json, application/msgpack"),
                Msgpack,
                false,
            ),
            (
                "application/json",
                Some("application/msgpack, application/x-protobuf"),
                Protobuf,
                false,
            ),
            (
                "application/x-protobuf",
                Some("application/json, application/msgpack"),
                Msgpack,
                false,
            ),
            // Nothing acceptable: JSON, flagged as a fallback.
            ("application/x-protobuf", Some("text/html"), Json, true),
            (
                "application/x-protobuf",
                Some("application/xml, text/*;q=0.9"),
                Json,
                true,
            ),
            ("application/json", Some("*/*;q=0"), Json, true),
            ("application/msgpack", Some("garbage;;;"), Json, true),
            // Whitespace around `;` and quoted commas, as RFC 9110 allows.
            (
                "application/json",
                Some("application/x-protobuf ; q=0.2 , application/msgpack\t;\tq=0.3"),
                Msgpack,
                false,
            ),
            (
                "application/json",
                Some("application/x-protobuf;x=\"a,application/msgpack\""),
                Protobuf,
                false,
            ),
            // A range that breaks the grammar is skipped, the others still count.
            (
                "application/json",
                Some("application/msgpack;q, application/x-protobuf;q=0.5"),
                Protobuf,
                false,
            ),
            (
                "application/json",
                Some("APPLICATION/X-PROTOBUF"),
                Protobuf,
                false,
            ),
            (
                "application/json",
                Some("application/json;q=1.0, application/x-protobuf;q=1.0"),
                Json,
                false,
            ),
            (
                "application/json",
                Some("application/x-protobuf;q=2"),
                Json,
                true,
            ),
        ];
        for (ct, accept, want, fallback) in cases {
            assert_eq!(
                neg(ct, *accept, false),
                Ok((*want, *fallback)),
                "{ct} / {accept:?}"
            );
        }
    }

    #[test]
    fn stream_framings() {
        let framing = |default, accept: Option<&str>| {
            let accept = accept.map(|a| HeaderValue::from_str(a).unwrap());
            response_framing(default, accept.as_ref(), false, true).unwrap()
        };
        use Framing::*;
        assert_eq!(framing(JsonArray, None), (JsonArray, false));
        assert_eq!(framing(Ndjson, Some("*/*")), (Ndjson, false));
        assert_eq!(framing(JsonArray, Some("text/event-stream")), (Sse, false));
        assert_eq!(
            framing(JsonArray, Some("application/x-ndjson")),
            (Ndjson, false)
        );
        assert_eq!(
            framing(JsonArray, Some("application/jsonl")),
            (Ndjson, false)
        );
        assert_eq!(
            framing(JsonArray, Some("application/x-protobuf, application/json")),
            (JsonArray, false)
        );
        assert_eq!(
            framing(Sse, Some("application/x-protobuf, application/json")),
            (Delimited, false)
        );
        assert_eq!(framing(JsonArray, Some("text/html")), (JsonArray, true));
        let hv = |s: &'static str| Some(HeaderValue::from_static(s));
        assert_eq!(
            request_framing(hv("application/x-ndjson").as_ref()).unwrap(),
            InFraming::Ndjson
        );
        assert_eq!(
            request_framing(hv("application/json; charset=utf-8").as_ref()).unwrap(),
            InFraming::JsonArray
        );
        assert_eq!(
            request_framing(hv("application/x-msgpack").as_ref()).unwrap(),
            InFraming::Msgpack
        );
        assert_eq!(
            request_framing(hv("application/protobuf").as_ref()).unwrap(),
            InFraming::Delimited
        );
        assert!(request_framing(hv("text/plain").as_ref()).is_err());
        assert!(request_framing(None).is_err());
        // Messages without a protobuf form: delimited protobuf is not offered.
        let pb = HeaderValue::from_static("application/x-protobuf");
        assert_eq!(
            response_framing(Delimited, None, false, false).unwrap(),
            (JsonArray, false)
        );
        assert_eq!(
            response_framing(JsonArray, Some(&pb), false, false).unwrap(),
            (JsonArray, true)
        );
        assert!(response_framing(JsonArray, Some(&pb), true, false).is_err());
        // A response without a protobuf form: protobuf is not offered.
        let accept = HeaderValue::from_static("application/x-protobuf");
        assert_eq!(
            response_format(Format::Protobuf, Some(&accept), false, false).unwrap(),
            (Format::Json, true)
        );
        assert_eq!(
            response_format(Format::Protobuf, None, false, false).unwrap(),
            (Format::Json, false)
        );
    }

    #[test]
    fn strict_accept_answers_406() {
        let e = neg("application/json", Some("text/html"), true).unwrap_err();
        assert!(
            e.contains("text/html") && e.contains("application/x-protobuf"),
            "{e}"
        );
        assert_eq!(
            neg("application/json", Some("application/json"), true),
            Ok((Format::Json, false))
        );
    }
}
