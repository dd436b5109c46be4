//! The pipeline: every step a request goes through, in the order it runs, listed in one
//! place ([`Edge::handle`] and the three functions it calls: `Edge::begin`, [`Edge::steps`]
//! on the way in, [`Edge::finish`] on the way out).
//!
//! On the way in, each step passes the request on or answers it (an answer, or an error);
//! whatever the answer and wherever it came from, it goes out through `finish`, which writes
//! an error in the request's protocol's form and applies the outbound steps in reverse order
//! of their inbound halves. So no answer leaves unrecorded, without its request id or
//! without its CORS headers, and a new concern is one more line in one of these lists.

use super::*;

/// What kind of answer a request got: the record counts the API's requests, and the
/// gateway's own answers (its endpoints, CORS preflights) only when they refuse, so that
/// probes and scrapes do not dilute the request metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A request for a method (or one that named none: a 404 is the API's answer).
    Api,
    /// One of the gateway's own endpoints (`/healthz`, `/metrics`, `/openapi.json`, …).
    Own,
    /// A CORS preflight.
    Preflight,
}

impl Edge {
    /// Serves one request. Never fails: every error becomes an answer in the request's
    /// protocol's error form.
    ///
    /// | step              | in                                         | out (in reverse)                    |
    /// |-------------------|--------------------------------------------|-------------------------------------|
    /// | record            | the start time (`begin`)                   | metrics, access log, spans          |
    /// | protocol          | recognised from the head (`begin`)         | errors in its form                  |
    /// | request id        | the client's, or one made (`begin`)        | `x-request-id` on the answer        |
    /// | identity          | who is calling (`Edge::identify`)          | —                                   |
    /// | CORS              | preflights answered (`preflight`)          | allow/expose headers                |
    /// | compression       | —                                          | `Accept-Encoding` (`compress`)      |
    /// | own endpoints     | `/healthz`, `/metrics`, … (`own_endpoint`) | —                                   |
    /// | in flight         | the API's requests only (`in_flight`)      | the gauge, when recorded            |
    /// | trace             | the request's span                         | ended by the record                 |
    /// | head limits       | HTTP/1.1 head size and framing             | `Connection: close` after an error  |
    /// | admission         | `Admission::admit` (+ the upstream's slot) | the ticket rides the answer's body  |
    /// | route             | `route`                                    | —                                   |
    /// | auth              | credentials verified (`authenticate`)      | —                                   |
    /// | rate limit        | the caller's budget (`rate_limit`)         | —                                   |
    /// | negotiate         | formats, framings (`Protocol::negotiate`)  | —                                   |
    /// | JSON sunset       | `json_sunset` (account.rs)                 | deprecation headers                 |
    /// | deadline          | the protocol's deadline, capped            | —                                   |
    /// | relay             | gRPC, gRPC-Web: the call relayed (`relay`) | —                                   |
    /// | content coding    | the body decoded as it arrives             | —                                   |
    /// | call              | by the method's shape (`unary`, streams)   | —                                   |
    /// | account           | —                                          | downgrades, migration report        |
    pub async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        self.handle_from(req, None).await
    }

    /// [`Edge::handle`] for a request from `peer` (the connection's address: a rate limit
    /// keys anonymous clients by it).
    pub async fn handle_from<B>(
        self: Arc<Self>,
        req: Request<B>,
        peer: Option<std::net::IpAddr>,
    ) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        // Before the context, which borrows from it (and records when dropped).
        let (head, body) = req.into_parts();
        let had_body = !body.is_end_stream();
        let mut ctx = self.begin(&head);
        ctx.connection_peer = peer;
        ctx.peer = match peer {
            Some(p) if !self.config.trusted_proxies.is_empty() => {
                Some(self.config.trusted_proxies.client(&head.headers, p))
            }
            peer => peer,
        };
        let answer = self.steps(&mut ctx, &head, body).await;
        self.finish(ctx, answer, had_body)
    }

    /// Serves one request on the admin listener: an admin endpoint, else 404, through the
    /// same record and error form as the main listener's.
    pub async fn handle_admin<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody> {
        let (head, _body) = req.into_parts();
        let mut ctx = self.begin(&head);
        ctx.kind = Kind::Own;
        let answer = self.admin_only(&head).await;
        self.finish(ctx, answer, false)
    }

    /// The inbound steps, in order; the first to answer (or fail) ends them.
    async fn steps<'s, B>(
        self: &'s Arc<Self>,
        ctx: &mut RequestCtx<'s>,
        head: &'s http::request::Parts,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        if let Some(preflight) = self.preflight(head) {
            ctx.kind = Kind::Preflight;
            return preflight;
        }
        if let Some(own) = self.own_endpoint(head).await {
            ctx.kind = Kind::Own;
            return own;
        }
        ctx.finish = Some(self.in_flight());
        ctx.span = self.config.tracer.as_ref().map(|t| t.request(head));
        self.head_limits(head)?;
        let mut ticket = self.admission.admit()?;
        let resolved = self.route(ctx, head)?;
        let target = resolved.binding();
        ctx.method = Some(target.method);
        if let Some(slot) = self.upstreams.slot(&target.method.service)? {
            ticket.set_upstream(slot);
        }
        ctx.ticket = Some(ticket);
        self.authenticate(ctx, head, target.method).await?;
        self.rate_limit(ctx, target.method).await?;
        let mut plan = ctx.protocol.negotiate(
            head,
            target,
            self.config.strict_accept,
            self.json.of(target.method).stream,
        )?;
        ctx.plan = Some(plan);
        self.json_sunset(ctx, target.method, plan)?;
        plan.deadline = self.deadline(ctx.protocol, head, target.method)?;
        ctx.plan = Some(plan);
        if ctx.protocol.relays() {
            return self.relay(ctx, head, target.method, plan, body).await;
        }
        let body = self.content_coding(ctx.protocol, head, target.method, body)?;
        match target.method.streaming {
            StreamingKind::Unary => self.unary(ctx, head, target, plan, body).await,
            StreamingKind::ServerStreaming => {
                self.server_stream(ctx, head, target, plan, body).await
            }
            StreamingKind::ClientStreaming => self.client_stream(ctx, target, plan, body).await,
            StreamingKind::Bidirectional => self.bidi_stream(ctx, target, plan, body).await,
        }
    }

    /// The plan's deadline, read once the formats are known (a malformed deadline header is
    /// answered in them). One answer: the client's deadline capped by the method's `timeout`
    /// (default `upstream_timeout`). A response stream lasts as long as it lasts: only the
    /// client's own.
    fn deadline(
        &self,
        protocol: Protocol,
        head: &http::request::Parts,
        method: &Method,
    ) -> Result<Option<Duration>, EdgeError> {
        let client = protocol.client_deadline(&head.headers)?;
        if matches!(
            method.streaming,
            StreamingKind::ServerStreaming | StreamingKind::Bidirectional
        ) {
            return Ok(client);
        }
        let cap = *self.timeouts.of(method);
        Ok(Some(client.map_or(cap, |t| t.min(cap))))
    }

    /// A compressed body is decoded as it arrives; the limits apply to the decoded bytes (a
    /// request stream's: `max_stream_bytes` over all its messages).
    fn content_coding<B>(
        &self,
        protocol: Protocol,
        head: &http::request::Parts,
        method: &Method,
        body: B,
    ) -> Result<Decoded<crate::protocol::connect::Source<B>>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let limit = match method.streaming {
            StreamingKind::Unary | StreamingKind::ServerStreaming => self.config.max_body_bytes,
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional => {
                self.config.max_stream_bytes
            }
        };
        let (body, coding) = protocol.request_body(head, body)?;
        Decoded::new(body, coding, limit)
    }

    /// The outbound steps, in order: the error form, then the inbound steps' outbound halves
    /// in reverse, the record last.
    fn finish(
        &self,
        mut ctx: RequestCtx<'_>,
        answer: Result<Response<ResponseBody>, EdgeError>,
        had_body: bool,
    ) -> Response<ResponseBody> {
        let head = ctx.head;
        let (mut response, code) = match answer {
            Ok(response) => (response, Code::Ok),
            Err(err) => {
                let mut response = self.error_response(&mut ctx, &err);
                // An HTTP/1.1 error may be answered before the body was read (404, 405, 413,
                // 415, …); the connection cannot carry another request then, and the client is
                // told so instead of finding a closed connection under its next request.
                if had_body && head.version < http::Version::HTTP_2 {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                (response, ctx.protocol.code_of(&err))
            }
        };
        self.account(&ctx);
        if let Some(sunset) = ctx.noted.sunset_headers.take() {
            sunset.apply(response.headers_mut());
        }
        self.compress(&head.headers, &mut response);
        if ctx.kind != Kind::Preflight
            && let Some(cors) = &self.cors
            && let Some(origin) = cors.allowed_origin(&head.headers)
        {
            cors.answer(origin, response.headers_mut());
        }
        if let Some(id) = ctx
            .made_request_id
            .clone()
            .or_else(|| head.headers.get(X_REQUEST_ID).map(unindexed))
        {
            response.headers_mut().insert(X_REQUEST_ID, id);
        }
        self.record_at_end(ctx, &mut response, code);
        response
    }

    /// The record's outbound half: the request's outcome, handed to the answer's body when
    /// it is a stream (recorded when its last frame is sent), else recorded now. The
    /// gateway's own answers (which never count in flight) are recorded only when they
    /// refuse (an error, whatever its status: a `/readyz` 503 is an answer, not a refusal):
    /// probes and scrapes are not the API's requests.
    fn record_at_end(
        &self,
        mut ctx: RequestCtx<'_>,
        response: &mut Response<ResponseBody>,
        code: Code,
    ) {
        if ctx.finish.is_none() && code == Code::Ok {
            return;
        }
        // Before the ticket goes to the body: the outcome reads the request's bytes from it.
        let mut outcome = ctx.outcome(response.status(), code);
        if let Some(ticket) = ctx.ticket.take() {
            response.body_mut().hold(ticket);
        }
        let Some(mut finish) = ctx.finish.take() else {
            self.record(&outcome);
            return;
        };
        if let Some(access) = &mut outcome.access {
            access.bytes_out = response.body().size_hint().exact().unwrap_or(0);
        }
        finish.outcome = Some(outcome);
        if response.body().is_stream() {
            // A stream is in flight, and its duration runs, until its last frame is sent.
            response.body_mut().on_end(finish);
        }
    }

    /// HTTP/1.1's own bound on the head is hyper's read buffer, which grows by doubling (a
    /// 24 KiB limit let 32 KiB through); HTTP/2's is exact (h2's header list size).
    fn head_limits(&self, head: &http::request::Parts) -> Result<(), EdgeError> {
        if head.version < http::Version::HTTP_2 {
            if http1_head_size(head) > self.config.max_header_bytes {
                return Err(EdgeError::HeadTooLarge {
                    limit: self.config.max_header_bytes,
                });
            }
            http1_framing(head)?;
        }
        Ok(())
    }

    /// A CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) for a
    /// path that has a route, when CORS is configured: 204 naming what the path's routes
    /// accept for an allowed origin, 403 for another; `None` for anything else.
    fn preflight(
        &self,
        head: &http::request::Parts,
    ) -> Option<Result<Response<ResponseBody>, EdgeError>> {
        let cors = self.cors.as_ref()?;
        let headers = &head.headers;
        if head.method != http::Method::OPTIONS
            || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
            || !headers.contains_key(header::ORIGIN)
        {
            return None;
        }
        let methods = match self
            .routes
            .resolve(&self.schema, "OPTIONS", head.uri.path())
        {
            Resolution::PathNotAllowed(allow) => allow.join(", "),
            Resolution::MethodNotAllowed(_) => "POST".to_owned(),
            Resolution::Found(_) | Resolution::NotFound => return None,
        };
        let Some(origin) = cors.allowed_origin(headers) else {
            let origin = headers
                .get(header::ORIGIN)
                .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned())
                .unwrap_or_default();
            return Some(Err(EdgeError::OriginNotAllowed(origin)));
        };
        let mut response = plain(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
        response.headers_mut().remove(header::CONTENT_TYPE);
        cors.preflight(origin, &methods, response.headers_mut());
        Some(Ok(response))
    }

    /// Compresses an answer worth compressing in the best coding the client accepts, when
    /// `[compression]` is on (the API's answers and the own endpoints'): a whole answer from
    /// `min_bytes` up and only when it gets smaller, a stream always, frame by frame. Every
    /// answer whose type could be compressed says `Vary: Accept-Encoding`, compressed or
    /// not, so caches keep the two apart.
    fn compress(&self, request: &HeaderMap, response: &mut Response<ResponseBody>) {
        let config = &self.config.compression;
        let headers = response.headers();
        if !config.enabled
            || headers.contains_key(header::CONTENT_ENCODING)
            || matches!(
                response.status(),
                StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
            )
            || !headers
                .get(header::CONTENT_TYPE)
                .is_some_and(|t| crate::coding::compressible(t.as_bytes(), config.protobuf))
        {
            return;
        }
        // One field with the negotiation's usual `Vary: Accept`.
        let headers = response.headers_mut();
        if headers.get(header::VARY).is_some_and(|v| v == "Accept") {
            headers.insert(
                header::VARY,
                HeaderValue::from_static("Accept, Accept-Encoding"),
            );
        } else {
            headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        let Some(coding) = crate::coding::negotiate(request, &config.algorithms) else {
            return;
        };
        if response
            .body_mut()
            .compress(coding, config.level, config.min_bytes)
        {
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_ENCODING,
                HeaderValue::from_static(coding.as_str()),
            );
            headers.remove(header::CONTENT_LENGTH);
        }
    }

    /// route: the method a request addresses, by the one precedence
    /// ([`Routes::resolve`]: `POST` to a gRPC path first, then the HTTP rules).
    fn route<'s>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &'s http::request::Parts,
    ) -> Result<Resolved<'s, 's>, EdgeError> {
        let path = head.uri.path();
        match self
            .routes
            .resolve(&self.schema, ctx.protocol.route_verb(head), path)
        {
            Resolution::Found(resolved) => Ok(resolved),
            Resolution::PathNotAllowed(allow) => Err(EdgeError::MethodNotAllowed {
                what: format!("path {path}"),
                allow: allow.join(", "),
            }),
            Resolution::MethodNotAllowed(method) => {
                ctx.method = Some(method);
                Err(EdgeError::MethodNotAllowed {
                    what: format!("method {}", method.full_name),
                    allow: "POST".into(),
                })
            }
            Resolution::NotFound => {
                if let Some(unknown) = &self.config.unknown_method {
                    unknown.notify_one();
                }
                if let Some(why) = &self.config.schema_waiting {
                    return Err(EdgeError::Unavailable(format!(
                        "the gateway has no schema for {path} yet: {why}"
                    )));
                }
                Err(EdgeError::UnknownMethod(format!("{} {path}", head.method)))
            }
        }
    }
}
