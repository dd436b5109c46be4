//! `negotiate`: the one step that reads Content-Type, Accept and the deadline headers, for
//! every call shape, into the request's [`Plan`]. The plan is kept in the request's context:
//! every later step reads it, error answers and the record included.

use super::*;

/// How one request is read and answered.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    /// The request's format (a request stream: its framing's).
    pub(super) request: Format,
    /// The Content-Type's format, when it names one we read. Under an HTTP rule a request
    /// without one is taken as JSON (`request`), and a body is refused (415) once it is
    /// known to be non-empty.
    pub(super) body_type: Option<Format>,
    /// A request stream's framing.
    pub(super) in_framing: Option<InFraming>,
    /// The answer's format (a response stream: its framing's).
    pub(super) response: Format,
    /// A response stream's framing.
    pub(super) out_framing: Option<Framing>,
    /// Accept named nothing we serve: answered in JSON all the same (`accept_fallback`).
    pub(super) fallback: bool,
    /// The upstream call's deadline: the client's capped by `upstream_timeout` for calls with
    /// one answer; the client's own, if any, for response streams ([`Edge::deadline`]).
    pub(super) deadline: Option<Duration>,
}

impl Plan {
    /// A response stream's framing (negotiate sets it for every method that streams its
    /// answers; its absence is a fault of ours, not a default).
    pub(super) fn out_framing(&self) -> Result<Framing, EdgeError> {
        self.out_framing
            .ok_or_else(|| EdgeError::Internal("no response framing was negotiated".into()))
    }

    /// A request stream's framing (see [`Plan::out_framing`]).
    pub(super) fn in_framing(&self) -> Result<InFraming, EdgeError> {
        self.in_framing
            .ok_or_else(|| EdgeError::Internal("no request framing was negotiated".into()))
    }
}

impl Edge {
    /// negotiate: the plan of a request addressed to `target`.
    pub(super) fn negotiate(
        &self,
        head: &http::request::Parts,
        target: Binding<'_, '_>,
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
            self.servable_request_stream(head, target)?;
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
        let strict = self.config.strict_accept;
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
        })
    }

    /// The plan's deadline, read once the formats are known (a malformed deadline header is
    /// answered in them). One answer: the client's deadline capped by `upstream_timeout`. A
    /// response stream lasts as long as it lasts: only the client's own.
    pub(super) fn deadline(
        &self,
        protocol: Protocol,
        head: &http::request::Parts,
        plan: Plan,
    ) -> Result<Option<Duration>, EdgeError> {
        let client = protocol.client_deadline(&head.headers)?;
        if plan.out_framing.is_some() {
            return Ok(client);
        }
        let cap = self.config.upstream_timeout;
        Ok(Some(client.map_or(cap, |t| t.min(cap))))
    }

    /// What a request stream needs before its framing is looked at: a bidirectional stream
    /// needs HTTP/2 (both directions at once); a rule for request streams binds nothing from
    /// the query.
    fn servable_request_stream(
        &self,
        head: &http::request::Parts,
        target: Binding<'_, '_>,
    ) -> Result<(), EdgeError> {
        let method = target.method;
        if method.streaming == StreamingKind::Bidirectional && head.version != http::Version::HTTP_2
        {
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
}

/// The framing a missing Accept picks: the request's own.
fn default_framing(request: Format) -> Framing {
    match request {
        Format::Json => Framing::JsonArray,
        Format::Msgpack => Framing::Msgpack,
        Format::Protobuf => Framing::Delimited,
    }
}
