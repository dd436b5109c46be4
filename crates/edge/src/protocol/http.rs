//! REST/HTTP ([`super::Protocol::Http`]): a request's formats and framings from its
//! Content-Type and Accept (`negotiate.rs`'s pure functions), under the method's shape and its
//! HTTP rule.

use ::http::header;
use transcode::rest::Binding;
use transcode::stream::{Framing, InFraming};
use transcode::{Format, StreamingKind};

use super::Plan;
use crate::error::EdgeError;
use crate::negotiate;

/// negotiate: the plan of a request addressed to `target`, from its Content-Type and
/// Accept (`strict`: 406 instead of falling back to JSON). A JSON answer stream that Accept
/// does not frame (no Accept, `*/*`, `application/json`) is framed as `json_stream`.
pub(super) fn negotiate(
    head: &::http::request::Parts,
    target: Binding<'_, '_>,
    strict: bool,
    json_stream: Framing,
) -> Result<Plan, EdgeError> {
    let method = target.method;
    let content_type = head.headers.get(header::CONTENT_TYPE);
    let streams_in = matches!(
        method.streaming,
        StreamingKind::ClientStreaming | StreamingKind::Bidirectional
    );
    let streams_out = matches!(
        method.streaming,
        StreamingKind::ServerStreaming | StreamingKind::Bidirectional
    );
    let (request, body_type, in_framing) = if streams_in {
        servable_request_stream(head, target)?;
        let framing = negotiate::request_framing(content_type)?;
        (framing.format(), Some(framing.format()), Some(framing))
    } else {
        let body_type = match (target.rule(), negotiate::request_format(content_type)) {
            (None, Err(e)) => return Err(e),
            (_, found) => found.ok(),
        };
        let request = match body_type {
            _ if target.raw_request() => Format::Json,
            Some(format) => format,
            None => Format::Json,
        };
        (request, body_type, None)
    };
    // A google.api.HttpBody answer is raw: nothing to negotiate (reported as protobuf, or
    // as the request stream's framing).
    let raw = target.raw_response();
    let protobuf = target.protobuf_response();
    let accept = head.headers.get(header::ACCEPT);
    let (response, out_framing, fallback) = if streams_out {
        let default = match in_framing {
            Some(InFraming::Ndjson) => Framing::Ndjson,
            _ => default_framing(request),
        };
        let (framing, fallback) = if raw {
            (default, false)
        } else {
            negotiate::response_framing(default, accept, strict, protobuf)?
        };
        let framing = match framing {
            Framing::JsonArray if !raw => json_stream,
            framing => framing,
        };
        (framing.format(), Some(framing), fallback)
    } else if raw {
        (Format::Protobuf, None, false)
    } else {
        let (format, fallback) = negotiate::response_format(request, accept, strict, protobuf)?;
        (format, None, fallback)
    };
    Ok(Plan {
        request,
        body_type,
        in_framing,
        response,
        out_framing,
        fallback,
        deadline: None,
        enveloped_request: false,
        message_coding: None,
    })
}

/// What a request stream needs before its framing is looked at: a bidirectional stream
/// needs HTTP/2 (both directions at once); a rule for request streams binds nothing from
/// the query.
fn servable_request_stream(
    head: &::http::request::Parts,
    target: Binding<'_, '_>,
) -> Result<(), EdgeError> {
    let method = target.method;
    if method.streaming == StreamingKind::Bidirectional && head.version != ::http::Version::HTTP_2 {
        return Err(EdgeError::NotImplemented(format!(
            "method {} streams both ways: it is served over HTTP/2 only (h2c with prior knowledge); this request came over {:?}",
            method.full_name, head.version
        )));
    }
    // Rules for request streams bind no path variables (checked when the routes load).
    if let Some(route) = target.rule()
        && head.uri.query().is_some_and(|q| !q.is_empty())
    {
        return Err(EdgeError::BadRequest(format!(
            "{} {} streams its requests: every field comes from the body's messages, not from the query",
            route.rule.method, route.rule.path
        )));
    }
    Ok(())
}

/// The framing a missing Accept picks: the request's own.
fn default_framing(request: Format) -> Framing {
    match request {
        Format::Json => Framing::JsonArray,
        Format::Msgpack => Framing::Msgpack,
        Format::Protobuf => Framing::Delimited,
    }
}
