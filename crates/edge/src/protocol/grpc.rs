//! gRPC ([`super::Protocol::Grpc`]) and gRPC-Web ([`super::Protocol::GrpcWeb`]): the client's
//! messages relayed to the upstream in their envelopes, byte for byte (compressed ones too),
//! the upstream's answer relayed back. What differs from the upstream's own protocol is
//! written here: recognising the request, its headers going up (every header is metadata,
//! less those of the connection), the answer's head coming back, and gRPC-Web's trailers,
//! which travel in the body as a frame of their own (flags `0x80`), base64 in its text form.
//! Envoy's gRPC-Web filter is the reference.

use std::time::Duration;

use ::http::header::{self, HeaderName};
use ::http::{HeaderMap, HeaderValue, Response, StatusCode};
use bytes::Bytes;
use transcode::{Format, Method, StreamingKind};

use super::envelope::{self, Limits};
use super::{Plan, Protocol, essence};
use crate::body::ResponseBody;
use crate::error::{Code, EdgeError};

const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
const DETAILS: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// The message codings gRPC names (its compression registry). The gateway relays messages
/// without opening them, so any the upstream takes passes; a name outside these is refused
/// here, as a gRPC server refuses a coding it does not have.
const CODINGS: [&str; 5] = ["identity", "gzip", "deflate", "snappy", "zstd"];

/// The protocol a Content-Type names, when it is one of gRPC's: `application/grpc` (any
/// `+suffix`), `application/grpc-web`, `application/grpc-web-text` (parameters after `;`
/// allowed).
pub(super) fn recognise(content_type: &[u8]) -> Option<Protocol> {
    let essence = essence(content_type);
    let starts = |prefix: &[u8]| {
        essence.len() >= prefix.len() && essence[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    let then_subtype_ends = |at: usize| matches!(essence.get(at), None | Some(b'+'));
    if starts(b"application/grpc-web-text") && then_subtype_ends(25) {
        Some(Protocol::GrpcWeb { text: true })
    } else if starts(b"application/grpc-web") && then_subtype_ends(20) {
        Some(Protocol::GrpcWeb { text: false })
    } else if starts(b"application/grpc") && then_subtype_ends(16) {
        Some(Protocol::Grpc)
    } else {
        None
    }
}

/// negotiate: protobuf both ways (the messages travel as they are); a codec suffix other
/// than `+proto` is refused, as is gRPC (not gRPC-Web) over HTTP/1.1, which cannot carry
/// its trailers, and a `grpc-encoding` gRPC does not name.
pub(super) fn negotiate(
    protocol: Protocol,
    head: &::http::request::Parts,
) -> Result<Plan, EdgeError> {
    let content_type = head
        .headers
        .get(header::CONTENT_TYPE)
        .map_or(&b""[..], |v| v.as_bytes());
    let essence = essence(content_type);
    if let Some(plus) = essence.iter().position(|&b| b == b'+')
        && !essence[plus..].eq_ignore_ascii_case(b"+proto")
    {
        return Err(EdgeError::NotImplemented(format!(
            "{} messages are not served: protogate relays protobuf ({}+proto)",
            String::from_utf8_lossy(essence),
            String::from_utf8_lossy(&essence[..plus]),
        )));
    }
    if protocol == Protocol::Grpc && head.version < ::http::Version::HTTP_2 {
        return Err(EdgeError::NotImplemented(
            "gRPC needs HTTP/2 (its status travels in trailers) and this request came over \
             HTTP/1.1: call over h2 or h2c, or use gRPC-Web (application/grpc-web) over HTTP/1.1"
                .into(),
        ));
    }
    if let Some(coding) = head.headers.get(GRPC_ENCODING) {
        let name = coding.to_str().unwrap_or("");
        if !CODINGS.contains(&name) {
            return Err(EdgeError::NotImplemented(format!(
                "grpc-encoding {:?} is not a gRPC message coding (one of {})",
                String::from_utf8_lossy(coding.as_bytes()),
                CODINGS.join(", ")
            )));
        }
    }
    Ok(Plan {
        request: Format::Protobuf,
        body_type: Some(Format::Protobuf),
        in_framing: None,
        response: Format::Protobuf,
        out_framing: None,
        fallback: false,
        deadline: None,
        enveloped_request: false,
        message_coding: None,
    })
}

/// The client's deadline: `grpc-timeout`, and nothing else.
pub(super) fn client_deadline(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    crate::headers::grpc_timeout(headers)
}

/// What a relayed body of `method` may hold, for a request with `headers`.
pub(crate) fn limits(
    method: &Method,
    headers: &HeaderMap,
    max_body_bytes: usize,
    max_stream_bytes: usize,
) -> Limits {
    let total = match method.streaming {
        StreamingKind::Unary | StreamingKind::ServerStreaming => max_body_bytes,
        StreamingKind::ClientStreaming | StreamingKind::Bidirectional => max_stream_bytes,
    };
    Limits {
        message: max_body_bytes,
        total,
        encoded: headers
            .get(GRPC_ENCODING)
            .is_some_and(|c| c.as_bytes() != b"identity"),
    }
}

/// Headers that belong to the client's connection or to HTTP, not to the call: never
/// relayed either way.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "trailer"
            | "host"
            | "content-length"
            | "accept-encoding"
            | "content-encoding"
    )
}

/// The call's headers going upstream: the client's (its metadata), less those of the
/// connection, with gRPC's content type (gRPC-Web's own headers dropped), `te: trailers`, the
/// deadline the gateway holds the call to as `grpc-timeout`, and the request id the gateway
/// made when the client sent none.
pub(super) fn upstream_headers(
    protocol: Protocol,
    headers: &HeaderMap,
    deadline: Option<Duration>,
    made_request_id: Option<&HeaderValue>,
) -> HeaderMap {
    let web = matches!(protocol, Protocol::GrpcWeb { .. });
    // A copy of the client's, less what is not the call's (usually nothing but `te`, set
    // again below): cloned whole and trimmed, cheaper than rebuilt name by name.
    let mut out = headers.clone();
    without(&mut out, |name| {
        // `te` is set again below, to the one value it may have.
        (hop_by_hop(name) && name != header::TE)
            || (web
                && (name == header::ACCEPT
                    || name == header::CONTENT_TYPE
                    || name.as_str() == "x-grpc-web"))
    });
    if web {
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
    }
    out.insert(header::TE, HeaderValue::from_static("trailers"));
    match deadline {
        Some(deadline) => {
            out.insert(GRPC_TIMEOUT, crate::upstream::grpc_timeout(deadline));
        }
        None => {
            out.remove(GRPC_TIMEOUT);
        }
    }
    if let Some(id) = made_request_id {
        out.insert(crate::headers::X_REQUEST_ID, id.clone());
    }
    out
}

/// The upstream's answer head as the client's: its headers less those of the connection;
/// gRPC-Web's content type for a gRPC-Web client.
pub(super) fn answer_head(protocol: Protocol, mut upstream: HeaderMap) -> HeaderMap {
    without(&mut upstream, hop_by_hop);
    let mut out = upstream;
    if let Protocol::GrpcWeb { text } = protocol {
        out.insert(header::CONTENT_TYPE, web_content_type(text));
    }
    out
}

/// Removes the fields whose names `drop` picks (looked for first: usually there are none).
fn without(fields: &mut HeaderMap, drop: impl Fn(&HeaderName) -> bool) {
    let mut dropping: Vec<HeaderName> = Vec::new();
    for name in fields.keys() {
        if drop(name) {
            dropping.push(name.clone());
        }
    }
    for name in dropping {
        fields.remove(name);
    }
}

fn web_content_type(text: bool) -> HeaderValue {
    HeaderValue::from_static(if text {
        "application/grpc-web-text+proto"
    } else {
        "application/grpc-web+proto"
    })
}

/// gRPC-Web's trailers frame: flags `0x80`, then the trailers as an HTTP/1.1 header block
/// (`name:value\r\n`, names in lower case).
pub(super) fn trailers_frame(trailers: &HeaderMap) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in trailers {
        block.extend_from_slice(name.as_str().as_bytes());
        block.push(b':');
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    envelope::envelope(envelope::TRAILERS, &block)
}

/// The status of an answer's headers or trailers (`grpc-status`), if they carry one.
pub(crate) fn status_of(fields: &HeaderMap) -> Option<Code> {
    const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
    let value = fields.get(GRPC_STATUS)?;
    let code = value.to_str().ok()?.parse::<i32>().ok()?;
    Some(Code::from_i32(code))
}

/// An error as gRPC writes one the call never reached: a trailers-only answer (status 200,
/// `grpc-status`, `grpc-message` and, when the upstream sent details, `grpc-status-details-bin`
/// in the headers, no body). Over HTTP/1.1, where no gRPC client can be listening (gRPC, not
/// gRPC-Web, refused there), the HTTP status is the code's, so the refusal reads as one.
pub(super) fn error_answer(
    protocol: Protocol,
    version: ::http::Version,
    err: &EdgeError,
    code: Code,
    status: Bytes,
) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(Bytes::new()));
    if protocol == Protocol::Grpc && version < ::http::Version::HTTP_2 {
        *response.status_mut() = err.code_and_status().1;
    } else {
        *response.status_mut() = StatusCode::OK;
    }
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        match protocol {
            Protocol::GrpcWeb { text } => web_content_type(text),
            _ => HeaderValue::from_static("application/grpc"),
        },
    );
    crate::headers::put_status_headers(headers, code, &err.to_string());
    match err {
        EdgeError::Upstream(u) if u.details.is_some() => {
            use base64::Engine as _;
            let details = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&status);
            if let Ok(v) = HeaderValue::from_str(&details) {
                headers.insert(DETAILS, v);
            }
        }
        EdgeError::NotImplemented(_) => {
            headers.insert(
                GRPC_ACCEPT_ENCODING,
                HeaderValue::from_static("identity, gzip, deflate, snappy, zstd"),
            );
        }
        _ => {}
    }
    err.put_headers(headers);
    response
}

/// The code a gRPC client is answered with: gRPC's own for a method it does not have
/// (UNIMPLEMENTED, whether the path names no method or names it under another verb).
pub(super) fn code_of(err: &EdgeError) -> Code {
    match err {
        EdgeError::UnknownMethod(_) | EdgeError::MethodNotAllowed { .. } => Code::Unimplemented,
        _ => err.code_and_status().0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_name_the_protocol() {
        for (t, want) in [
            ("application/grpc", Some(Protocol::Grpc)),
            ("application/grpc+proto", Some(Protocol::Grpc)),
            ("Application/GRPC; charset=utf-8", Some(Protocol::Grpc)),
            ("application/grpc+json", Some(Protocol::Grpc)),
            (
                "application/grpc-web",
                Some(Protocol::GrpcWeb { text: false }),
            ),
            (
                "application/grpc-web+proto",
                Some(Protocol::GrpcWeb { text: false }),
            ),
            (
                "application/grpc-web-text",
                Some(Protocol::GrpcWeb { text: true }),
            ),
            (
                "application/grpc-web-text+proto",
                Some(Protocol::GrpcWeb { text: true }),
            ),
            ("application/grpcx", None),
            ("application/grpc-webby", None),
            ("application/json", None),
            ("", None),
        ] {
            assert_eq!(recognise(t.as_bytes()), want, "{t}");
        }
    }

    #[test]
    fn trailers_frame_is_an_http1_block_in_an_envelope() {
        let mut t = HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static("0"));
        t.insert("grpc-message", HeaderValue::from_static("fine"));
        let frame = trailers_frame(&t);
        assert_eq!(frame[0], 0x80);
        let len = u32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize;
        assert_eq!(&frame[5..], b"grpc-status:0\r\ngrpc-message:fine\r\n");
        assert_eq!(len, frame.len() - 5);
    }

    #[test]
    fn connection_headers_never_go_upstream() {
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("content-type", "application/grpc-web-text"),
            ("x-grpc-web", "1"),
            ("accept", "application/grpc-web-text"),
            ("connection", "keep-alive"),
            ("grpc-timeout", "5S"),
            ("x-user-agent", "grpc-web-javascript/0.1"),
            ("custom-bin", "AAEC"),
        ] {
            h.insert(HeaderName::from_static(n), HeaderValue::from_static(v));
        }
        let out = upstream_headers(
            Protocol::GrpcWeb { text: true },
            &h,
            Some(Duration::from_millis(250)),
            None,
        );
        assert_eq!(out["content-type"], "application/grpc+proto");
        assert_eq!(out["te"], "trailers");
        assert_eq!(out["grpc-timeout"], "250000u");
        assert_eq!(out["x-user-agent"], "grpc-web-javascript/0.1");
        assert_eq!(out["custom-bin"], "AAEC");
        for gone in ["x-grpc-web", "accept", "connection"] {
            assert!(!out.contains_key(gone), "{gone}");
        }
    }
}
