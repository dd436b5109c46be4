//! Content-Type and Accept parsing and negotiation, through the edge's public `negotiate`
//! functions. Nothing panics; the choices stay among what is offered (no protobuf for an
//! answer without a protobuf form); a Content-Type naming a request format names the stream
//! framing of that format; case does not change any outcome.
//!
//! Input: a flags byte (bit 0 strict, bit 1 protobuf offered, bits 2-3 the request's format,
//! bits 4-6 the default framing), the Content-Type up to `\n`, then the Accept header.
#![no_main]

use edge::negotiate::{request_format, request_framing, response_format, response_framing};
use http::HeaderValue;
use libfuzzer_sys::fuzz_target;
use transcode::Format;
use transcode::stream::Framing;

type Outcomes = (
    Result<Format, String>,
    Result<transcode::stream::InFraming, String>,
    Result<(Format, bool), String>,
    Result<(Framing, bool), String>,
);

fn negotiate(flags: u8, ct: Option<&HeaderValue>, accept: Option<&HeaderValue>) -> Outcomes {
    let strict = flags & 1 != 0;
    let protobuf = flags & 2 != 0;
    let request = [
        Format::Json,
        Format::Msgpack,
        Format::Protobuf,
        Format::Json,
    ][usize::from(flags >> 2 & 3)];
    let framings = [
        Framing::Ndjson,
        Framing::JsonArray,
        Framing::Sse,
        Framing::Msgpack,
        Framing::Delimited,
    ];
    let default = framings[usize::from(flags >> 4 & 7) % framings.len()];
    let rf = request_format(ct).map_err(|e| e.to_string());
    let rfr = request_framing(ct).map_err(|e| e.to_string());
    let resp = response_format(request, accept, strict, protobuf).map_err(|e| e.to_string());
    let fr = response_framing(default, accept, strict, protobuf).map_err(|e| e.to_string());
    if let Ok(f) = &rf {
        match &rfr {
            Ok(framing) => assert_eq!(framing.format(), *f, "Content-Type {ct:?}"),
            Err(e) => panic!("Content-Type {ct:?} is {f:?} but no request framing: {e}"),
        }
    }
    if !protobuf {
        assert!(
            !matches!(resp, Ok((Format::Protobuf, _))),
            "Accept {accept:?}"
        );
        assert!(
            !matches!(fr, Ok((Framing::Delimited, _))),
            "Accept {accept:?}"
        );
    }
    if strict {
        assert!(
            !matches!(resp, Ok((_, true))),
            "strict falls back: Accept {accept:?}"
        );
        assert!(
            !matches!(fr, Ok((_, true))),
            "strict falls back: Accept {accept:?}"
        );
    }
    (rf, rfr, resp, fr)
}

/// The outcomes without the error texts, which quote the header as sent.
type Shape = (
    Option<Format>,
    Option<transcode::stream::InFraming>,
    Option<(Format, bool)>,
    Option<(Framing, bool)>,
);

fn shape(o: &Outcomes) -> Shape {
    (
        o.0.clone().ok(),
        o.1.clone().ok(),
        o.2.clone().ok(),
        o.3.clone().ok(),
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (ct, accept) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let header = |b: &[u8]| HeaderValue::from_bytes(b).ok();
    // An empty Content-Type stands for none; a value the `http` crate refuses never arrives.
    let ct_value = match header(ct) {
        _ if ct.is_empty() => None,
        Some(v) => Some(v),
        None => return,
    };
    let accept_value = accept.and_then(header);
    let got = negotiate(flags, ct_value.as_ref(), accept_value.as_ref());
    let upper = |b: &[u8]| header(&b.to_ascii_uppercase());
    let got_upper = negotiate(
        flags,
        upper(ct).filter(|_| ct_value.is_some()).as_ref(),
        accept_value.as_ref().and(accept.and_then(upper)).as_ref(),
    );
    assert_eq!(
        shape(&got),
        shape(&got_upper),
        "case changed an outcome: {ct:?} / {accept:?}"
    );
});
