//! The request path, step by step: negotiate → route → decode_request → call_upstream →
//! encode_response → record. Every outcome, success or error, passes through `record`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{
    HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, Request, Response, StatusCode, header,
};
use http_body::Body;
use tonic::metadata::MetadataMap;
use transcode::rest::{Lookup, RequestBody, Route, Routes};
use transcode::{Findings, Format, MessageDescriptor, Method, Schema, StreamingKind};

use crate::EdgeConfig;
pub use crate::body::ResponseBody;
use crate::body::{BodyEnd, read_limited};
use crate::downgrade::{Client, Downgrade, DowngradeLog, Reason};
use crate::error::{Code, EdgeError};
use crate::metrics::{DowngradeLabels, MethodLabels, MethodName, Metrics, RequestLabels};
use crate::negotiate::{self, Negotiated};
use crate::upstream::Upstreams;

mod streams;

/// Everything a request needs, built before serving and shared read-only.
pub struct Edge {
    schema: Schema,
    routes: Routes,
    upstreams: Upstreams,
    config: EdgeConfig,
    metrics: Metrics,
    downgrades: DowngradeLog,
    status: MessageDescriptor,
    transcode: transcode::Options,
    /// The method label of requests that name no method.
    unknown_method: std::sync::Arc<str>,
    /// `GET /openapi.json`: the OpenAPI document of the schema and the routes, built once.
    openapi: Bytes,
}

/// One request's context: who asked, for what, in which formats, and what was downgraded.
struct RequestCtx<'a> {
    start: Instant,
    /// The Accept header, for the format of an error answered before negotiation succeeded.
    accept: Option<HeaderValue>,
    method: Option<&'a Method>,
    formats: Option<Negotiated>,
    client: Client,
    /// A streamed answer's final gRPC code, set by the stream when it ends.
    stream_end: Option<Arc<StreamEnd>>,
}

/// How a streamed answer ended, written by the stream and read when its body ends (the
/// answer's 200 and headers left long before): a gRPC code, or `NOT_ENDED`.
pub(crate) struct StreamEnd(std::sync::atomic::AtomicU8);

impl StreamEnd {
    const NOT_ENDED: u8 = u8::MAX;

    fn new() -> StreamEnd {
        StreamEnd(std::sync::atomic::AtomicU8::new(Self::NOT_ENDED))
    }

    fn set(&self, code: Code) {
        self.0
            .store(code as u8, std::sync::atomic::Ordering::Relaxed);
    }

    fn get(&self) -> Option<Code> {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            Self::NOT_ENDED => None,
            code => Some(Code::from_i32(code.into())),
        }
    }
}

/// What a request addresses: a method, through its gRPC path or an HTTP rule.
#[derive(Clone, Copy)]
struct Target<'a, 'v> {
    method: &'a Method,
    /// The HTTP rule and its variables' raw values (None: `POST /pkg.Service/Method`).
    route: Option<(&'a Arc<Route>, &'v [&'a str])>,
}

impl<'a> Target<'a, '_> {
    fn rule(&self) -> Option<&'a Route> {
        self.route.map(|(r, _)| &**r)
    }
}

impl Edge {
    pub fn new(schema: Schema, upstreams: Upstreams, config: EdgeConfig) -> Result<Edge, String> {
        let status = schema
            .message("google.rpc.Status")
            .ok_or("the schema lacks google.rpc.Status and the bundled copy could not be added")?;
        // An upstream for a service the schema lacks routes nothing: a misspelt name.
        if let Some(missing) = upstreams
            .services()
            .find(|name| schema.methods().all(|m| &*m.service != *name))
        {
            let mut known: Vec<&str> = schema.methods().map(|m| &*m.service).collect();
            known.sort_unstable();
            known.dedup();
            return Err(format!(
                "services.\"{missing}\": the schema has no such service (it has {})",
                known.join(", ")
            ));
        }
        let routes = Routes::new(&schema, &config.http_rules).map_err(|e| e.to_string())?;
        let openapi = transcode::openapi::document(&schema, &routes, "protogate");
        let openapi = Bytes::from(openapi.to_string());
        let downgrades = DowngradeLog::new(
            config.downgrade_log_interval,
            crate::downgrade::DEFAULT_CAPACITY,
        );
        Ok(Edge {
            schema,
            routes,
            upstreams,
            config,
            metrics: Metrics::new(),
            downgrades,
            status,
            transcode: transcode::Options::default(),
            unknown_method: "unknown".into(),
            openapi,
        })
    }

    pub fn config(&self) -> &EdgeConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    pub(crate) fn downgrade_log(&self) -> &DowngradeLog {
        &self.downgrades
    }

    /// Serves one request. Never fails: every error becomes a response.
    pub async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display,
    {
        let path = req.uri().path();
        match path {
            "/healthz" => {
                return plain(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    Bytes::from_static(b"ok\n"),
                );
            }
            "/readyz" => return self.readyz().await,
            "/metrics" => {
                return plain(
                    StatusCode::OK,
                    crate::metrics::CONTENT_TYPE,
                    Bytes::from(self.metrics.render()),
                );
            }
            "/openapi.json" => {
                return plain(StatusCode::OK, "application/json", self.openapi.clone());
            }
            _ => {}
        }
        let headers = req.headers();
        let mut ctx = RequestCtx {
            start: Instant::now(),
            accept: headers.get(header::ACCEPT).cloned(),
            method: None,
            formats: None,
            client: Client::new(
                header_str(headers, header::USER_AGENT),
                header_str(headers, "x-client-id"),
            ),
            stream_end: None,
        };
        self.metrics.in_flight.inc();
        let mut finish = Finish {
            edge: Arc::clone(&self),
            outcome: None,
        };
        let (head, body) = req.into_parts();
        let result = self.dispatch(&mut ctx, &head, body).await;
        let (mut response, code) = match result {
            Ok(response) => (response, Code::Ok),
            Err(err) => (self.error_response(&mut ctx, &err), err.code_and_status().0),
        };
        finish.outcome = Some(Outcome::of(ctx, response.status(), code));
        if response.body().is_stream() {
            // A stream is in flight, and its duration runs, until its last frame is sent.
            response.body_mut().on_end(finish);
        }
        response
    }

    /// Routes a request to its method and serves it by the method's shape.
    async fn dispatch<'s, B>(
        self: &'s Arc<Self>,
        ctx: &mut RequestCtx<'s>,
        head: &'s http::request::Parts,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display,
    {
        // HTTP/1.1's own bound on the head is hyper's read buffer, which grows by doubling (a
        // 24 KiB limit let 32 KiB through); HTTP/2's is exact (h2's header list size).
        if head.version < http::Version::HTTP_2
            && http1_head_size(head) > self.config.max_header_bytes
        {
            return Err(EdgeError::HeadTooLarge {
                limit: self.config.max_header_bytes,
            });
        }
        // route: `POST /pkg.Service/Method`, else the HTTP rules.
        let path = head.uri.path();
        let grpc_path = self.schema.method(path);
        let values;
        let target = match grpc_path {
            Some(method) if head.method == HttpMethod::POST => Target {
                method,
                route: None,
            },
            _ => match self.routes.find(head.method.as_str(), path) {
                Lookup::Found(route, found) => {
                    values = found;
                    Target {
                        method: &route.method,
                        route: Some((route, &values)),
                    }
                }
                Lookup::MethodNotAllowed(allow) => {
                    let mut allow = allow.join(", ");
                    if grpc_path.is_some() {
                        allow.push_str(", POST");
                    }
                    return Err(EdgeError::MethodNotAllowed {
                        what: format!("path {path}"),
                        allow,
                    });
                }
                Lookup::NotFound => {
                    return Err(match grpc_path {
                        Some(method) => {
                            ctx.method = Some(method);
                            EdgeError::MethodNotAllowed {
                                what: format!("method {}", method.full_name),
                                allow: "POST".into(),
                            }
                        }
                        None => EdgeError::UnknownMethod(format!("{} {path}", head.method)),
                    });
                }
            },
        };
        ctx.method = Some(target.method);
        match target.method.streaming {
            StreamingKind::Unary => self.unary(ctx, head, target, body).await,
            StreamingKind::ServerStreaming => self.server_stream(ctx, head, target, body).await,
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional => {
                self.client_stream(ctx, head, target, body).await
            }
        }
    }

    /// The request's format and the unary response's, from Content-Type and Accept.
    fn negotiate_unary(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
    ) -> Result<Negotiated, EdgeError> {
        let request = self.request_format(head, target)?;
        let (response, fallback) = self.response_format(head, target, request)?;
        Ok(Negotiated {
            request,
            response,
            fallback,
        })
    }

    /// The request's format from Content-Type. Under an HTTP rule a request without a
    /// (supported) Content-Type is taken as JSON: a GET has no body, and a body is refused
    /// (415) when it is read.
    fn request_format(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
    ) -> Result<Format, EdgeError> {
        let content_type = head.headers.get(header::CONTENT_TYPE);
        match target.route {
            None => negotiate::request_format(content_type),
            Some((route, _)) if route.raw_request() => Ok(Format::Json),
            Some(_) => Ok(negotiate::request_format(content_type).unwrap_or(Format::Json)),
        }
    }

    /// The format of a single answer from Accept (a google.api.HttpBody answer is raw: no
    /// negotiation, reported as protobuf).
    fn response_format(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
        request: Format,
    ) -> Result<(Format, bool), EdgeError> {
        let route = target.rule();
        if route.is_some_and(Route::raw_response) {
            return Ok((Format::Protobuf, false));
        }
        negotiate::response_format(
            request,
            head.headers.get(header::ACCEPT),
            self.config.strict_accept,
            route.is_none_or(Route::protobuf_response),
        )
    }

    /// The deadline of the upstream call: the client's (`grpc-timeout`, `X-Timeout`) capped by
    /// `--upstream-timeout`.
    fn deadline(&self, head: &http::request::Parts) -> Result<Duration, EdgeError> {
        let timeout = client_timeout(&head.headers)?;
        Ok(timeout.map_or(self.config.upstream_timeout, |t| {
            t.min(self.config.upstream_timeout)
        }))
    }

    /// Reads the body and builds the request message: the body converted (or passed through),
    /// and under an HTTP rule the path variables and query parameters bound in.
    async fn request_message<B>(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
        formats: Negotiated,
        body: B,
    ) -> Result<Bytes, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        // Under an HTTP rule that takes a body, an unsupported Content-Type on a body known to
        // be non-empty (a Content-Length) is refused before the body is read; other bodies
        // are checked once read (an empty one needs no type).
        let content_type = head.headers.get(header::CONTENT_TYPE);
        let body_format = match target.route {
            Some((route, _))
                if route.takes_body() && !route.raw_request() && body.size_hint().lower() > 0 =>
            {
                Some(negotiate::request_format(content_type)?)
            }
            _ => None,
        };
        let body = read_limited(
            body,
            self.config.max_body_bytes,
            self.config.body_read_timeout,
        )
        .await?;
        let input = &target.method.input;
        let Some((route, values)) = target.route else {
            return match formats.request {
                // Protobuf goes up as it came, unchecked: checking costs as much as the rest
                // of the pass-through. A malformed body is diagnosed if the upstream fails.
                Format::Protobuf => Ok(body),
                from => {
                    // Protobuf is smaller than the JSON or MessagePack it came from.
                    let mut out = Vec::with_capacity(body.len());
                    self.schema
                        .to_protobuf(input, from, &body, &mut out, &self.transcode)
                        .map_err(EdgeError::BadBody)?;
                    Ok(Bytes::from(out))
                }
            };
        };
        let request_body = if body.is_empty() {
            RequestBody::Empty
        } else if route.raw_request() {
            RequestBody::Raw {
                content_type: header_str(&head.headers, header::CONTENT_TYPE).unwrap_or(""),
                data: &body,
            }
        } else {
            let format = match body_format {
                Some(format) => format,
                // A rule without a body refuses any body (400, naming that), whatever its type.
                None if !route.takes_body() => Format::Json,
                None => negotiate::request_format(content_type)?,
            };
            RequestBody::Formatted(format, &body)
        };
        let mut out = Vec::with_capacity(body.len() + 64);
        route
            .request(
                &self.schema,
                values,
                head.uri.query(),
                request_body,
                self.config.unknown_query,
                &self.transcode,
                &mut out,
            )
            .map_err(bad_request)?;
        Ok(Bytes::from(out))
    }

    async fn unary<'s, B>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &http::request::Parts,
        target: Target<'s, '_>,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let method = target.method;
        // negotiate
        let formats = self.negotiate_unary(head, target)?;
        ctx.formats = Some(formats);
        let timeout = self.deadline(head)?;

        // decode_request
        let message = self.request_message(head, target, formats, body).await?;

        // call_upstream
        let metadata = upstream_metadata(&head.headers);
        let started = Instant::now();
        // A pass-through body is kept (a reference count, no copy) to diagnose a failure;
        // bodies the gateway encoded itself are well-formed and need not be kept.
        let sent = (formats.request == Format::Protobuf).then(|| message.clone());
        let call = self
            .upstreams
            .unary(&method.service, &method.path, message, metadata, timeout);
        let answer = tokio::time::timeout(timeout, call).await;
        self.observe_upstream(method, started);
        let answer = match answer {
            Err(_) => return Err(EdgeError::DeadlineExceeded),
            Ok(Err(status)) => {
                return Err(self.upstream_failure(method, &status, started, Some(timeout), sent));
            }
            Ok(Ok(answer)) => answer,
        };

        // encode_response
        let mut response = self.unary_response(ctx, target, formats, &answer.body)?;
        response
            .headers_mut()
            .extend(metadata_headers(answer.metadata.into_headers()));
        Ok(response)
    }

    fn observe_upstream(&self, method: &Method, started: Instant) {
        self.metrics
            .upstream_duration
            .get_or_create(&MethodLabels {
                method: MethodName(method.full_name.clone()),
            })
            .observe(started.elapsed().as_secs_f64());
    }

    /// The error for a failed upstream call.
    fn upstream_failure(
        &self,
        method: &Method,
        status: &tonic::Status,
        started: Instant,
        timeout: Option<Duration>,
        sent: Option<Bytes>,
    ) -> EdgeError {
        // The upstream enforces the grpc-timeout we sent and may answer first, as CANCELLED
        // (tonic) or DEADLINE_EXCEEDED: either way our deadline has passed.
        if let Some(timeout) = timeout
            && matches!(
                status.code(),
                tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
            )
            && started.elapsed() >= timeout.mul_f64(0.9)
        {
            return EdgeError::DeadlineExceeded;
        }
        // An upstream that cannot decode a pass-through body answers INTERNAL (tonic,
        // grpc-go) or INVALID_ARGUMENT: if the body is malformed, that is the client's error,
        // and it is named as such.
        if let Some(sent) = &sent
            && matches!(
                status.code(),
                tonic::Code::Internal | tonic::Code::InvalidArgument | tonic::Code::Unknown
            )
            && let Err(e) = self
                .schema
                .validate_protobuf(&method.input, sent, &self.transcode)
        {
            return EdgeError::BadBody(e);
        }
        upstream_error(status)
    }

    /// A unary answer in the negotiated format (or raw, for a google.api.HttpBody).
    fn unary_response(
        &self,
        ctx: &RequestCtx<'_>,
        target: Target<'_, '_>,
        formats: Negotiated,
        answer: &Bytes,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        let route = target.rule();
        if let Some(route) = route.filter(|r| r.raw_response()) {
            let (content_type, data) = route
                .raw_response_parts(answer)
                .map_err(|e| EdgeError::Internal(format!("upstream HttpBody is malformed: {e}")))?;
            return Ok(raw_response(&content_type, Bytes::from(data)));
        }
        let to = formats.response;
        let body = match route {
            _ if passes_through(to, route) => answer.clone(),
            route => {
                let mut out = Vec::with_capacity(answer.len() * 2);
                let rendered = match route {
                    Some(route) => {
                        route.response(&self.schema, to, answer, &mut out, &self.transcode)
                    }
                    None => self.schema.from_protobuf(
                        &target.method.output,
                        to,
                        answer,
                        &mut out,
                        &self.transcode,
                    ),
                };
                let findings = rendered.map_err(|e| {
                    EdgeError::Internal(format!(
                        "upstream response does not render as {}: {e}",
                        to.as_str()
                    ))
                })?;
                self.note_downgrades(
                    target.method,
                    &ctx.client,
                    formats.fallback,
                    to,
                    &findings,
                    true,
                );
                Bytes::from(out)
            }
        };
        Ok(plain(StatusCode::OK, negotiate::content_type(to), body))
    }

    /// Counts the downgrades of one rendering of a protobuf message as `to`, and logs them
    /// (rate-limited) when `log` (a stream logs its first message's only).
    fn note_downgrades(
        &self,
        method: &Method,
        client: &Client,
        fallback: bool,
        to: Format,
        findings: &Findings,
        log: bool,
    ) {
        let note = |reason: Reason, findings: Option<&Findings>| {
            self.metrics
                .downgrades
                .get_or_create(&DowngradeLabels {
                    method: MethodName(method.full_name.clone()),
                    reason: reason.as_str(),
                })
                .inc();
            if log {
                self.downgrades.record(&Downgrade {
                    method: &method.full_name,
                    reason,
                    format: to,
                    client,
                    findings,
                });
            }
        };
        if to == Format::Json {
            note(
                if fallback {
                    Reason::AcceptFallback
                } else {
                    Reason::JsonRequested
                },
                None,
            );
        }
        if findings.dropped_data() {
            note(Reason::UnknownFields, Some(findings));
        }
    }

    /// Renders an error as google.rpc.Status in the negotiated format (or the one Accept
    /// asks for when negotiation itself failed).
    fn error_response(&self, ctx: &mut RequestCtx<'_>, err: &EdgeError) -> Response<ResponseBody> {
        let (code, status) = err.code_and_status();
        let message = err.to_string();
        if status.is_server_error() {
            tracing::warn!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request failed");
        } else {
            tracing::debug!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request rejected");
        }
        let format = match ctx.formats {
            Some(f) => f.response,
            None => negotiate::response_format(Format::Json, ctx.accept.as_ref(), false, true)
                .map_or(Format::Json, |(f, _)| f),
        };
        let (body, findings) = self.status_rendering(err, format);
        if let (Some(findings), Some(method)) = (findings, ctx.method) {
            let fallback = ctx.formats.is_some_and(|f| f.fallback);
            self.note_downgrades(method, &ctx.client, fallback, format, &findings, true);
        }
        let mut response = plain(status, negotiate::content_type(format), body);
        let headers = response.headers_mut();
        put_status_headers(headers, code, &message);
        if let EdgeError::MethodNotAllowed { allow, .. } = err
            && let Ok(v) = HeaderValue::from_str(allow)
        {
            headers.insert(header::ALLOW, v);
        }
        if let EdgeError::Upstream(u) = err {
            headers.extend(u.metadata.clone());
        }
        response
    }

    /// An error as google.rpc.Status in `format` (mid-stream status records).
    fn status_body(&self, err: &EdgeError, format: Format) -> Bytes {
        self.status_rendering(err, format).0
    }

    /// An error as google.rpc.Status in `format`, and the findings of rendering upstream
    /// details (a downgrade) when there were any.
    fn status_rendering(&self, err: &EdgeError, format: Format) -> (Bytes, Option<Findings>) {
        let (code, _) = err.code_and_status();
        let message = err.to_string();
        // Upstream details travel as they came: grpc-status-details-bin is a google.rpc.Status.
        let upstream_details = match err {
            EdgeError::Upstream(u) => u.details.clone(),
            _ => None,
        };
        let from_upstream = upstream_details.is_some();
        let status_bytes = upstream_details
            .unwrap_or_else(|| Bytes::from(transcode::encode_status(code as i32, &message)));
        if format == Format::Protobuf {
            return (status_bytes, None);
        }
        let mut out = Vec::new();
        match self.schema.from_protobuf(
            &self.status,
            format,
            &status_bytes,
            &mut out,
            &self.transcode,
        ) {
            Ok(findings) => (Bytes::from(out), from_upstream.then_some(findings)),
            Err(e) => {
                tracing::warn!(error = %e, "upstream grpc-status-details-bin does not render; sending code and message only");
                let fallback = transcode::encode_status(code as i32, &message);
                let mut out = Vec::new();
                let _ = self.schema.from_protobuf(
                    &self.status,
                    format,
                    &fallback,
                    &mut out,
                    &self.transcode,
                );
                (Bytes::from(out), None)
            }
        }
    }

    /// Metrics and the per-request debug line: runs for every outcome.
    fn record(&self, o: &Outcome) {
        let label = MethodName(
            o.method
                .clone()
                .unwrap_or_else(|| self.unknown_method.clone()),
        );
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                method: label.clone(),
                request_format: o.request_format,
                response_format: o.response_format,
                code: o.status.as_u16(),
                grpc_code: o.grpc_code.name(),
            })
            .inc();
        let elapsed = o.start.elapsed();
        self.metrics
            .request_duration
            .get_or_create(&MethodLabels { method: label })
            .observe(elapsed.as_secs_f64());
        tracing::debug!(
            method = o.method.as_deref().unwrap_or("unknown"),
            request_format = o.request_format,
            response_format = o.response_format,
            status = o.status.as_u16(),
            grpc_code = o.grpc_code.name(),
            elapsed_us = elapsed.as_micros() as u64,
            user_agent = %o.user_agent,
            "request"
        );
    }

    /// Ready when the schema is loaded (it is, or we would not be serving) and every upstream
    /// accepts a TCP connection.
    async fn readyz(&self) -> Response<ResponseBody> {
        let problems = self.upstreams.unreachable(Duration::from_secs(1)).await;
        if problems.is_empty() {
            plain(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ready\n"),
            )
        } else {
            let text = format!("not ready: upstream unreachable: {}\n", problems.join("; "));
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from(text),
            )
        }
    }
}

/// A request counted in flight from its head until this is dropped; dropped with an outcome,
/// the request is recorded (count by status, duration). A streamed answer holds it in its
/// body, so a stream counts until its last frame is sent or its client leaves; a request
/// whose client leaves before the answer has no outcome and is not recorded (the gauge drops
/// all the same).
struct Finish {
    edge: Arc<Edge>,
    outcome: Option<Outcome>,
}

struct Outcome {
    method: Option<Arc<str>>,
    request_format: &'static str,
    response_format: &'static str,
    status: StatusCode,
    grpc_code: Code,
    /// A streamed answer's end, which decides `grpc_code` when its body ends.
    stream_end: Option<Arc<StreamEnd>>,
    start: Instant,
    user_agent: Arc<str>,
}

impl Outcome {
    fn of(ctx: RequestCtx<'_>, status: StatusCode, grpc_code: Code) -> Outcome {
        let (request_format, response_format) = ctx.formats.map_or(("unknown", "unknown"), |f| {
            (f.request.as_str(), f.response.as_str())
        });
        Outcome {
            method: ctx.method.map(|m| m.full_name.clone()),
            request_format,
            response_format,
            status,
            grpc_code,
            stream_end: ctx.stream_end,
            start: ctx.start,
            user_agent: ctx.client.user_agent,
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        // Recorded before it leaves the gauge: in-flight 0 means counted.
        if let Some(outcome) = self.outcome.take() {
            self.edge.record(&outcome);
        }
        self.edge.metrics.in_flight.dec();
    }
}

impl BodyEnd for Finish {
    /// A streamed answer whose client left before its end is counted as 499 (the client
    /// closed the request), whatever status its headers carried; one that ended is counted
    /// under the gRPC code it ended with (a failure after the 200 headers is no success).
    fn body_end(mut self: Box<Self>, complete: bool) {
        let Some(outcome) = &mut self.outcome else {
            return;
        };
        if !complete {
            outcome.status = Code::Cancelled.http_status();
            outcome.grpc_code = Code::Cancelled;
        } else if let Some(code) = outcome.stream_end.as_ref().and_then(|e| e.get()) {
            outcome.grpc_code = code;
        }
    }
}

/// A failed call's status as the client's error: the upstream's own status exactly as it sent
/// it (code, message, details, metadata), whatever the code; the gateway's own failure to get
/// an answer in the gateway's words.
fn upstream_error(status: &tonic::Status) -> EdgeError {
    if status.code() == tonic::Code::Unavailable && crate::upstream::made_by_gateway(status) {
        // Its message names the upstream and what went wrong.
        return EdgeError::Unavailable(status.message().to_owned());
    }
    let details = (!status.details().is_empty()).then(|| Bytes::copy_from_slice(status.details()));
    let code = status.code() as i32;
    EdgeError::Upstream(Box::new(crate::error::UpstreamError {
        code,
        message: status.message().to_owned(),
        details,
        metadata: metadata_headers(status.metadata().clone().into_headers()),
    }))
}

/// The size of an HTTP/1.1 request head as written with single spaces: request line, one
/// `name: value` line per header, the empty line.
fn http1_head_size(head: &http::request::Parts) -> usize {
    let target = head.uri.scheme_str().map_or(0, |s| s.len() + 3)
        + head.uri.authority().map_or(0, |a| a.as_str().len())
        + head.uri.path_and_query().map_or(1, |p| p.as_str().len());
    let request_line = head.method.as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let fields: usize = head
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    request_line + fields + 2
}

/// A protobuf answer goes back as it came, unless `response_body` picks a part of it.
fn passes_through(to: Format, route: Option<&Route>) -> bool {
    to == Format::Protobuf && route.is_none_or(|r| r.response_body.is_none())
}

/// A transcoding error as the client's: a request that does not map onto the method under its
/// HTTP rule is a bad request; anything else is a bad body.
fn bad_request(e: transcode::Error) -> EdgeError {
    match e.kind() {
        transcode::ErrorKind::Request { .. } => EdgeError::BadRequest(e.to_string()),
        _ => EdgeError::BadBody(e),
    }
}

/// A google.api.HttpBody answer: its bytes under its own content type.
fn raw_response(content_type: &str, data: Bytes) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::full(data));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, raw_content_type(content_type));
    r
}

/// An HttpBody's content type as a header (application/octet-stream when it has none).
fn raw_content_type(content_type: &str) -> HeaderValue {
    HeaderValue::from_str(content_type)
        .ok()
        .filter(|_| !content_type.is_empty())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The client's deadline: `grpc-timeout` (gRPC's `1*8DIGIT unit`) or `X-Timeout` in seconds.
fn client_timeout(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    if let Some(v) = headers.get("grpc-timeout") {
        let s = v.to_str().unwrap_or("");
        let bad = || {
            EdgeError::BadHeader(format!(
                "grpc-timeout {s:?} is not 1-8 digits followed by H, M, S, m, u or n"
            ))
        };
        if s.len() < 2 || s.len() > 9 {
            return Err(bad());
        }
        let (digits, unit) = s.split_at(s.len() - 1);
        let n: u64 = if digits.bytes().all(|c| c.is_ascii_digit()) {
            digits.parse().map_err(|_| bad())?
        } else {
            return Err(bad());
        };
        let d = match unit {
            "H" => Duration::from_secs(n.saturating_mul(3600)),
            "M" => Duration::from_secs(n.saturating_mul(60)),
            "S" => Duration::from_secs(n),
            "m" => Duration::from_millis(n),
            "u" => Duration::from_micros(n),
            "n" => Duration::from_nanos(n),
            _ => return Err(bad()),
        };
        return Ok(Some(d));
    }
    if let Some(v) = headers.get("x-timeout") {
        let s = v.to_str().unwrap_or("").trim();
        let secs: f64 = s
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x < 1e9)
            .ok_or_else(|| {
                EdgeError::BadHeader(format!(
                    "X-Timeout {s:?} is not a positive number of seconds"
                ))
            })?;
        return Ok(Some(Duration::from_secs_f64(secs)));
    }
    Ok(None)
}

/// Headers forwarded upstream as gRPC metadata: `authorization`, `x-request-id`, and every
/// `grpc-metadata-*` with the prefix stripped (names reserved by gRPC are not forwarded).
fn upstream_metadata(headers: &HeaderMap) -> MetadataMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        if n == "authorization" || n == "x-request-id" {
            out.append(name.clone(), value.clone());
        } else if let Some(rest) = n.strip_prefix("grpc-metadata-") {
            if rest.is_empty() || is_reserved_metadata(rest) {
                continue;
            }
            if let Ok(key) = HeaderName::from_bytes(rest.as_bytes()) {
                out.append(key, value.clone());
            }
        }
    }
    MetadataMap::from_headers(out)
}

fn is_reserved_metadata(name: &str) -> bool {
    name.starts_with("grpc-")
        || matches!(
            name,
            "te" | "content-type"
                | "content-length"
                | "host"
                | "connection"
                | "proxy-connection"
                | "user-agent"
                | "transfer-encoding"
                | "keep-alive"
                | "upgrade"
                | "trailer"
                | "date"
                | "server"
        )
}

/// Upstream metadata (headers and trailers) as `grpc-metadata-*` response headers.
fn metadata_headers(metadata: HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in &metadata {
        let n = name.as_str();
        if is_reserved_metadata(n) {
            continue;
        }
        if let Ok(key) = HeaderName::from_bytes(format!("grpc-metadata-{n}").as_bytes()) {
            out.append(key, value.clone());
        }
    }
    out
}

/// `grpc-status` and `grpc-message` (headers of an error answer, trailers of a stream).
fn put_status_headers(headers: &mut HeaderMap, code: Code, message: &str) {
    headers.insert("grpc-status", HeaderValue::from(code as i32));
    if let Ok(v) = HeaderValue::from_str(&crate::error::encode_grpc_message(message)) {
        headers.insert("grpc-message", v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        let mut h = HeaderMap::new();
        assert_eq!(client_timeout(&h).unwrap(), None);
        h.insert("grpc-timeout", HeaderValue::from_static("250m"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(250))
        );
        h.insert("grpc-timeout", HeaderValue::from_static("2S"));
        assert_eq!(client_timeout(&h).unwrap(), Some(Duration::from_secs(2)));
        for bad in ["", "m", "123456789S", "1x", "-1S", "1.5S"] {
            h.insert("grpc-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
        let mut h = HeaderMap::new();
        h.insert("x-timeout", HeaderValue::from_static("1.5"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in ["0", "-1", "abc", "inf", "NaN"] {
            h.insert("x-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_both_ways() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("x-request-id", HeaderValue::from_static("r1"));
        h.insert("grpc-metadata-tenant", HeaderValue::from_static("acme"));
        h.insert("grpc-metadata-grpc-timeout", HeaderValue::from_static("1S"));
        h.insert("cookie", HeaderValue::from_static("secret"));
        let md = upstream_metadata(&h).into_headers();
        assert_eq!(md.get("authorization").unwrap(), "Bearer x");
        assert_eq!(md.get("x-request-id").unwrap(), "r1");
        assert_eq!(md.get("tenant").unwrap(), "acme");
        assert!(md.get("grpc-timeout").is_none() && md.get("cookie").is_none());
        let mut up = HeaderMap::new();
        up.insert("content-type", HeaderValue::from_static("application/grpc"));
        up.insert("grpc-status", HeaderValue::from_static("0"));
        up.insert("x-trace", HeaderValue::from_static("t"));
        let back = metadata_headers(up);
        assert_eq!(back.len(), 1);
        assert_eq!(back.get("grpc-metadata-x-trace").unwrap(), "t");
    }
}
