//! The client protocols a listener speaks, and everything that differs between them: how a
//! request is recognised, where its deadline comes from, how metadata maps to headers both
//! ways, how a status is written (an error answer, the end of a stream) and how streams end.
//! The request path (`service/`) asks the request's [`Protocol`] instead of branching on it;
//! a protocol never converts a message (that is the codec's, `transcode`'s) and never decides
//! what is counted (that is `service/account.rs`'s).
//!
//! [`Protocol::Http`] is the REST/HTTP edge (`http.rs`): a whole body in JSON, MessagePack or
//! protobuf (Content-Type and Accept, `media_type.rs` and `negotiate.rs`), request and response
//! streams in the framing Accept picks (`transcode::stream`), the deadline from `grpc-timeout`
//! or `X-Timeout`, metadata as `grpc-metadata-*` headers, errors as google.rpc.Status with
//! the HTTP status of their code and `grpc-status` / `grpc-message` headers, a stream's end as
//! its framing's status record and `grpc-status` trailers.
//!
//! [`Protocol::Grpc`] and [`Protocol::GrpcWeb`] (`grpc.rs`) relay: the client's messages go
//! upstream in their envelopes, byte for byte, and the answer comes back as the upstream sent
//! it (`envelope.rs` follows the envelopes on the way, for the limits and to name a broken
//! body; gRPC-Web's trailers become a body frame). The request path asks
//! [`Protocol::relays`] which way a request's messages travel.
//!
//! [`Protocol::Connect`] (`connect.rs`) is converted as REST/HTTP is: its unary calls (POST,
//! or a GET whose message is in the query) and its streams (5-byte envelopes, the
//! end-of-stream message) in JSON or protobuf, `Connect-Timeout-Ms`, metadata as plain
//! headers, errors as Connect's error JSON.

use std::time::Duration;

use ::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use bytes::Bytes;
use transcode::Format;
use transcode::stream::Framing;

use crate::body::ResponseBody;
use crate::coding::Coding;
use crate::error::{Code, EdgeError};
use crate::headers;

pub(crate) mod connect;
pub(crate) mod envelope;
pub(crate) mod grpc;
mod http;
mod plan;

pub(crate) use plan::Plan;

/// A client protocol. Chosen once per request, from its head, by [`Protocol::recognise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// REST/HTTP: `POST /pkg.Service/Method` and the google.api.http rules, with JSON,
    /// MessagePack or protobuf bodies.
    Http,
    /// gRPC (`application/grpc`, `+proto`) over HTTP/2: relayed.
    Grpc,
    /// gRPC-Web (`application/grpc-web`, `+proto`; `-text`: base64 both ways) over HTTP/1.1
    /// or HTTP/2: relayed, the trailers in the body.
    GrpcWeb { text: bool },
    /// Connect (version 1): unary calls as a POST of JSON or protobuf, or a GET; streams in
    /// enveloped messages (`streaming`: `application/connect+json` / `+proto`).
    Connect { streaming: bool },
}

impl Protocol {
    /// The protocol a request speaks, from its head. Every request is REST/HTTP until another
    /// protocol claims it (by its Content-Type or its protocol's own headers).
    pub fn recognise(head: &::http::request::Parts) -> Protocol {
        let content_type = head
            .headers
            .get(header::CONTENT_TYPE)
            .map_or(&b""[..], |t| t.as_bytes());
        // The other protocols' POSTs say so in an `application/…` type: one look at its
        // subtype's first letter, and Connect's header looked for only under JSON or proto.
        if content_type.len() > 12 && content_type[..12].eq_ignore_ascii_case(b"application/") {
            let found = match content_type[12].to_ascii_lowercase() {
                b'g' => grpc::recognise(content_type),
                b'c' | b'j' | b'p' => connect::recognise(head, content_type)
                    .map(|streaming| Protocol::Connect { streaming }),
                _ => None,
            };
            if let Some(protocol) = found {
                return protocol;
            }
        }
        if connect::is_get(head) {
            return Protocol::Connect { streaming: false };
        }
        Protocol::Http
    }

    /// The protocols' names, in the order [`Protocol::index`] counts them.
    pub const LABELS: [&'static str; 4] = ["http", "grpc", "grpc-web", "connect"];

    /// The protocol's place in [`Protocol::LABELS`].
    pub fn index(self) -> usize {
        match self {
            Protocol::Http => 0,
            Protocol::Grpc => 1,
            Protocol::GrpcWeb { .. } => 2,
            Protocol::Connect { .. } => 3,
        }
    }

    /// The protocol's name, as the `protocol` label and the access log write it.
    pub fn label(self) -> &'static str {
        Protocol::LABELS[self.index()]
    }

    /// Whether the request's messages are relayed in their envelopes (gRPC, gRPC-Web) rather
    /// than converted (`Edge::relay` instead of the call by shape).
    pub fn relays(self) -> bool {
        matches!(self, Protocol::Grpc | Protocol::GrpcWeb { .. })
    }

    /// How the request is read and answered ([`Plan`]): its format or request-stream
    /// framing, the answer's format or framing, whether JSON was a fallback. For REST/HTTP,
    /// from Content-Type and Accept (`strict`: 406 instead of the JSON fallback) under the
    /// method's shape and HTTP rule (`target`); `json_stream` is the framing of a JSON
    /// answer stream whose Accept names none (`[json] stream`).
    pub(crate) fn negotiate(
        self,
        head: &::http::request::Parts,
        target: transcode::rest::Binding<'_, '_>,
        strict: bool,
        json_stream: Framing,
    ) -> Result<Plan, EdgeError> {
        match self {
            Protocol::Http => http::negotiate(head, target, strict, json_stream),
            Protocol::Grpc | Protocol::GrpcWeb { .. } => grpc::negotiate(self, head),
            Protocol::Connect { streaming } => connect::negotiate(streaming, head, target.method),
        }
    }

    /// The client's own deadline, if it sent one: `grpc-timeout` (gRPC's `1*8DIGIT unit`),
    /// else, for REST/HTTP, `X-Timeout` in seconds. A malformed one is the client's error,
    /// naming the header.
    pub fn client_deadline(self, headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
        match self {
            Protocol::Http => headers::client_timeout(headers),
            Protocol::Grpc | Protocol::GrpcWeb { .. } => grpc::client_deadline(headers),
            Protocol::Connect { .. } => connect::client_deadline(headers),
        }
    }

    /// The HTTP verb the request is routed under (a Connect GET is its method's POST).
    pub fn route_verb(self, head: &::http::request::Parts) -> &str {
        match self {
            Protocol::Connect { streaming: false } => connect::route_verb(head),
            _ => head.method.as_str(),
        }
    }

    /// The request's body: the client's, or a Connect GET's message from its query; and the
    /// body's content coding (`Content-Encoding`, or a Connect GET's `compression`).
    pub(crate) fn request_body<B>(
        self,
        head: &::http::request::Parts,
        body: B,
    ) -> Result<(connect::Source<B>, Option<Coding>), EdgeError> {
        if matches!(self, Protocol::Connect { streaming: false }) && connect::is_get(head) {
            let (message, coding) = connect::get_message(head)?;
            return Ok((connect::Source::Query(Some(message)), coding));
        }
        Ok((
            connect::Source::Body(body),
            crate::coding::decode::request_coding(&head.headers)?,
        ))
    }

    /// The content type of a whole answer in `format`.
    pub fn content_type(self, format: Format) -> &'static str {
        match self {
            Protocol::Connect { .. } => connect::content_type(format),
            _ => crate::negotiate::content_type(format),
        }
    }

    /// A relayed call's headers going upstream (see `grpc::upstream_headers`).
    pub(crate) fn relay_headers(
        self,
        headers: &HeaderMap,
        deadline: Option<Duration>,
        made_request_id: Option<&HeaderValue>,
    ) -> HeaderMap {
        grpc::upstream_headers(self, headers, deadline, made_request_id)
    }

    /// How a relayed answer's trailers travel: as trailers (gRPC: `None`), or as the body's
    /// last frame (gRPC-Web: the frame).
    pub(crate) fn trailers_in_body(self, trailers: &HeaderMap) -> Option<Vec<u8>> {
        matches!(self, Protocol::GrpcWeb { .. }).then(|| grpc::trailers_frame(trailers))
    }

    /// A relayed answer's head, from the upstream's.
    pub(crate) fn relay_answer_head(self, upstream: HeaderMap) -> HeaderMap {
        grpc::answer_head(self, upstream)
    }

    /// The metadata sent upstream with a converted call: `authorization`, `x-request-id`
    /// (the one the gateway made, `made_request_id`, when the client sent none), the trace
    /// context and every `grpc-metadata-*` with its prefix stripped. (A relayed call's are
    /// [`Protocol::relay_headers`].)
    pub fn upstream_metadata(
        self,
        headers: &HeaderMap,
        made_request_id: Option<&HeaderValue>,
    ) -> Result<HeaderMap, EdgeError> {
        match self {
            Protocol::Connect { .. } => connect::upstream_metadata(headers, made_request_id),
            _ => headers::upstream_metadata(headers, made_request_id),
        }
    }

    /// The upstream's metadata (headers and trailers) as a converted answer's headers:
    /// `grpc-metadata-*`, those `forward` names as they came (Connect: all as they came).
    pub fn answer_metadata(
        self,
        metadata: &HeaderMap,
        forward: &crate::forwarding::HeaderPatterns,
    ) -> HeaderMap {
        match self {
            Protocol::Connect { .. } => connect::answer_metadata(metadata),
            _ => headers::metadata_headers(metadata, forward),
        }
    }

    /// The format an error is written in: the answer's negotiated format when the request
    /// got that far (`negotiated`), else the one Accept asks for (JSON when it names nothing
    /// we serve).
    pub fn error_format(self, negotiated: Option<Format>, headers: &HeaderMap) -> Format {
        match (self, negotiated) {
            (Protocol::Grpc | Protocol::GrpcWeb { .. }, _) => Format::Protobuf,
            // Connect's errors are JSON whatever the codec (the status rendered in JSON is
            // where its details' `debug` comes from).
            (Protocol::Connect { .. }, _) => Format::Json,
            (Protocol::Http, Some(format)) => format,
            (Protocol::Http, None) => crate::negotiate::response_format(
                Format::Json,
                headers.get(header::ACCEPT),
                false,
                true,
            )
            .map_or(Format::Json, |(f, _)| f),
        }
    }

    /// The gRPC code an error answers with in this protocol: gRPC's clients get
    /// UNIMPLEMENTED for a method the gateway does not have.
    pub fn code_of(self, err: &EdgeError) -> Code {
        match self {
            Protocol::Http | Protocol::Connect { .. } => err.code_and_status().0,
            Protocol::Grpc | Protocol::GrpcWeb { .. } => grpc::code_of(err),
        }
    }

    /// An error answer. REST/HTTP: `status` (google.rpc.Status, already rendered in
    /// `format`) as the body, the HTTP status of the error's code, `grpc-status` and
    /// `grpc-message` headers, and what the error itself adds (`Allow`, `Retry-After`, the
    /// upstream's metadata, `forward` naming what goes as plain headers). gRPC and gRPC-Web:
    /// a trailers-only answer (`grpc::error_answer`). Connect: its error JSON, or a stream's
    /// end-of-stream message (`connect::error_answer`). `head`: the request's.
    pub fn error_answer(
        self,
        head: &::http::request::Parts,
        err: &EdgeError,
        format: Format,
        status: Bytes,
        forward: &crate::forwarding::HeaderPatterns,
    ) -> Response<ResponseBody> {
        let (version, content_type) = (head.version, head.headers.get(header::CONTENT_TYPE));
        if self.relays() {
            return grpc::error_answer(self, version, err, self.code_of(err), status);
        }
        if let Protocol::Connect { streaming } = self {
            return connect::error_answer(streaming, err, self.code_of(err), &status, content_type);
        }
        let (code, http_status) = err.code_and_status();
        let mut response = plain(http_status, crate::negotiate::content_type(format), status);
        let headers = response.headers_mut();
        headers::put_status_headers(headers, code, &err.to_string());
        match err {
            EdgeError::MethodNotAllowed { allow, .. } => {
                if let Ok(v) = HeaderValue::from_str(allow) {
                    headers.insert(header::ALLOW, v);
                }
            }
            EdgeError::Upstream(u) => {
                headers.extend(self.answer_metadata(&u.metadata, forward));
            }
            _ => {}
        }
        err.put_headers(headers);
        response
    }

    /// The headers a response stream starts with, besides its content type: no caching, no
    /// buffering by proxies, and over HTTP/1.1 the trailers declared (hyper drops undeclared
    /// ones) when the client said it takes them (`TE: trailers`).
    pub fn stream_headers(self, request: &::http::request::Parts, headers: &mut HeaderMap) {
        headers.insert(header::VARY, HeaderValue::from_static("Accept"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        if self == Protocol::Http
            && request.version < ::http::Version::HTTP_2
            && request
                .headers
                .get_all(header::TE)
                .iter()
                .any(|te| te.as_bytes().eq_ignore_ascii_case(b"trailers"))
        {
            headers.insert(
                header::TRAILER,
                HeaderValue::from_static("grpc-status, grpc-message"),
            );
        }
    }

    /// A response stream that ended cleanly: its framing's end in `out`; the trailers.
    pub fn stream_ok(self, framing: Option<Framing>, out: &mut Vec<u8>) -> HeaderMap {
        if let Some(framing) = framing {
            framing.end(out);
        }
        if let Protocol::Connect { .. } = self {
            // The end-of-stream message says it all; no trailers.
            connect::end_of_stream(None, &HeaderMap::new(), out);
            return HeaderMap::new();
        }
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        trailers
    }

    /// A response stream that failed after `count` messages: its framing's status record
    /// (`status`, google.rpc.Status in the framing's format) in `out`; the trailers.
    pub fn stream_failed(
        self,
        framing: Option<Framing>,
        count: usize,
        err: &EdgeError,
        status: &[u8],
        out: &mut Vec<u8>,
    ) -> HeaderMap {
        if let Protocol::Connect { .. } = self {
            let metadata = match err {
                EdgeError::Upstream(u) => connect::answer_metadata(&u.metadata),
                _ => HeaderMap::new(),
            };
            let error = connect::error_object(err, self.code_of(err), status);
            connect::end_of_stream(Some(error), &metadata, out);
            return HeaderMap::new();
        }
        if let Some(framing) = framing {
            framing.error(count, status, out);
        }
        let mut trailers = HeaderMap::new();
        headers::put_status_headers(&mut trailers, err.code_and_status().0, &err.to_string());
        trailers
    }
}

/// A Content-Type's media type without its parameters, trimmed.
fn essence(content_type: &[u8]) -> &[u8] {
    content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii()
}

/// The protocols that can call `method` at its gRPC path, as `protogate check` lists them:
/// REST/HTTP, gRPC and Connect every method (Connect also with a GET when the method has no
/// side effects); gRPC-Web the methods its protocol has (unary and server streams).
pub fn reaching(method: &transcode::Method) -> Vec<&'static str> {
    let mut out = vec!["http", "grpc"];
    if matches!(
        method.streaming,
        transcode::StreamingKind::Unary | transcode::StreamingKind::ServerStreaming
    ) {
        out.push("grpc-web");
    }
    out.push("connect");
    if method.no_side_effects && method.streaming == transcode::StreamingKind::Unary {
        out.push("connect-get");
    }
    out
}

/// A whole answer of `content_type`, varying by Accept (every answer of the API is negotiated).
pub(crate) fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}
