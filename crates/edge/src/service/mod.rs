//! The request path, step by step: route → negotiate → decode_request → call_upstream →
//! encode_response → record: `route` here, `negotiate` in plan.rs, `decode_request` and
//! `encode_response` in unary.rs, `call_upstream` in call.rs, `record` in record.rs; unary.rs
//! and streams.rs drive them per call shape. Every answer, success or error, leaves through the end of
//! [`Edge::handle`] and is recorded once (a streamed answer when its body ends); a request
//! whose client leaves before its answer is recorded as 499 when its context is dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body::Body;
use transcode::rest::{Binding, RequestBody, Resolution, Resolved, Route, Routes};
use transcode::stream::{Framing, InFraming};
use transcode::{Findings, Format, MessageDescriptor, Method, Schema, StreamingKind};

use crate::EdgeConfig;
use crate::admission::{Admission, Ticket};
pub use crate::body::ResponseBody;
use crate::body::{BodyEnd, read_limited};
use crate::coding::decode::{Decoded, request_coding};
use crate::downgrade::{Client, Downgrade, DowngradeLog, Reason};
use crate::error::{Code, EdgeError, SetupError};
use crate::metrics::{DowngradeLabels, MethodName, Metrics, RequestLabels};
use crate::migration::{
    ClientId, Conversion, DeprecationHeaders, Direction, DowngradeSet, Finished, JsonDecision,
    SunsetPolicy, Tracker, Verdict,
};
use crate::negotiate;
use crate::upstream::Upstreams;

mod admin;
mod call;
mod plan;
mod record;
mod respond;
mod streams;
mod unary;

use crate::headers::*;
use call::mid_stream_failure;
use plan::Plan;
use record::{Finish, Outcome, StreamEnd};
use respond::*;

/// Everything a request needs, built before serving and shared read-only: one snapshot of
/// the schema, routes, upstreams and settings. A reload builds a new one
/// ([`Edge::reload`]) that keeps what outlives snapshots — the metrics, the downgrade log, the
/// admission counters, the migration report, the drain — and [`Live`] swaps it in; a request
/// runs to its end on the snapshot it started with.
pub struct Edge {
    schema: Schema,
    routes: Routes,
    upstreams: Upstreams,
    config: EdgeConfig,
    metrics: Arc<Metrics>,
    downgrades: Arc<DowngradeLog>,
    status: MessageDescriptor,
    transcode: transcode::Options,
    /// The requests and request bytes in flight, under their limits.
    admission: Arc<Admission>,
    /// The method label of requests that name no method.
    unknown_method: std::sync::Arc<str>,
    /// `GET /openapi.json`: the OpenAPI document of the schema and the routes, built once.
    openapi: Bytes,
    /// CORS, when configured.
    cors: Option<crate::cors::Cors>,
    /// Who speaks which format to which method, and what it costs (`/admin/migration`).
    migration: Arc<Tracker>,
    /// The JSON sunset rules.
    sunset: SunsetPolicy,
    /// An instant and the wall-clock time it was: a request's wall-clock time for the
    /// migration report comes from its start instant, with no clock read of its own (the
    /// monotonic clock is slewed as the wall clock is; only a step of the wall clock is not
    /// followed, which a report counting by the minute can afford).
    epoch: (Instant, std::time::SystemTime),
    /// Set when the shutdown begins: `/readyz` answers 503 and HTTP/1.1 answers close their
    /// connection.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// A short hash of the schema's FileDescriptorSet (`protogate_schema_info{digest}`).
    digest: Arc<str>,
}

/// What outlives a snapshot: kept by [`Edge::reload`].
struct Lasting {
    metrics: Arc<Metrics>,
    downgrades: Arc<DowngradeLog>,
    admission: Arc<Admission>,
    migration: Arc<Tracker>,
    draining: Arc<std::sync::atomic::AtomicBool>,
    epoch: (Instant, std::time::SystemTime),
}

/// The gateway's snapshot in force, swapped whole by a reload (`arc-swap`: a request takes
/// the current one with a reference count, no lock).
#[derive(Clone)]
pub struct Live(Arc<arc_swap::ArcSwap<Edge>>);

impl Live {
    pub fn new(edge: Arc<Edge>) -> Live {
        Live(Arc::new(arc_swap::ArcSwap::new(edge)))
    }

    /// The snapshot in force.
    pub fn load(&self) -> Arc<Edge> {
        self.0.load_full()
    }

    /// Puts `edge` in force; requests already running keep the one they took. Returns it.
    pub fn swap(&self, edge: Arc<Edge>) -> Arc<Edge> {
        self.0.swap(edge)
    }
}

impl From<Arc<Edge>> for Live {
    fn from(edge: Arc<Edge>) -> Live {
        Live::new(edge)
    }
}

/// A schema's digest: 16 hex digits of a hash of its FileDescriptorSet (what
/// `protogate_schema_info{digest}` and [`Edge::digest`] say).
pub fn schema_digest(schema: &Schema) -> Arc<str> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    schema.to_descriptor_set().hash(&mut hasher);
    format!("{:016x}", hasher.finish()).into()
}

/// One request's context: when it began, who asked, for which method, and its plan.
struct RequestCtx<'a> {
    start: Instant,
    head: &'a http::request::Parts,
    /// The id the gateway gave a request that came without `x-request-id`.
    made_request_id: Option<HeaderValue>,
    /// Whether the outcome carries the access log's fields.
    access_log: bool,
    method: Option<&'a Method>,
    /// What `negotiate` decided, once it has.
    plan: Option<Plan>,
    client: Client,
    /// A streamed answer's final gRPC code, set by the stream when it ends.
    stream_end: Option<Arc<StreamEnd>>,
    /// The request's share of the limits (once admitted); the answer's body keeps it.
    ticket: Option<Ticket>,
    /// How long the upstream took to answer (or fail), once it was called.
    upstream_latency: Option<Duration>,
    /// The request's span, when tracing (until the outcome takes it).
    span: Option<Box<dyn crate::trace::Span>>,
    /// The upstream call's span, from the call until its answer (a stream's: its end).
    call_span: Option<Box<dyn crate::trace::Span>>,
    /// What the migration report and the sunset policy note of the request.
    noted: Noted<'a>,
    /// The request in flight until the answer takes it (a streamed answer's body keeps it);
    /// a request dropped before its answer (its client left) is recorded from here as 499.
    finish: Option<Finish>,
}

/// A request's share of the migration report: the sunset policy's verdict (and its headers
/// for the answer), the unknown fields its answer dropped, the conversions and their costs.
#[derive(Default)]
struct Noted<'a> {
    verdict: Verdict,
    sunset_headers: Option<&'a DeprecationHeaders>,
    dropped: Vec<transcode::UnknownField>,
    request_conversion: Option<Conversion>,
    answer_conversion: Option<Conversion>,
}

impl RequestCtx<'_> {
    fn ticket(&mut self) -> Result<&mut Ticket, EdgeError> {
        self.ticket
            .as_mut()
            .ok_or_else(|| EdgeError::Internal("a request served without admission".into()))
    }

    /// The outcome of the request, taking its spans along to end with it.
    fn outcome(&mut self, status: StatusCode, grpc_code: Code) -> Outcome {
        let mut outcome = Outcome::of(self, status, grpc_code);
        if self.span.is_some() {
            outcome.spans = Some(Box::new((self.span.take(), self.call_span.take())));
        }
        outcome
    }

    /// The metadata that goes upstream with the call: the client's (`upstream_metadata`) and,
    /// when tracing, the trace context of the call's span, which starts here.
    fn upstream_metadata(&mut self, upstreams: &Upstreams) -> Result<HeaderMap, EdgeError> {
        let mut metadata = upstream_metadata(&self.head.headers, self.made_request_id.as_ref())?;
        if let (Some(span), Some(method)) = (&self.span, self.method) {
            let upstream = upstreams.uri(&method.service).unwrap_or("-");
            let upstream = upstream.split_once("://").map_or(upstream, |(_, a)| a);
            self.call_span = Some(span.upstream_call(&method.full_name, upstream, &mut metadata));
        }
        Ok(metadata)
    }

    /// A unary call's answer came (or its failure): its span ends.
    fn end_call(&mut self, code: Code) {
        if let Some(span) = self.call_span.take() {
            span.end(&crate::trace::End {
                method: self.method.map(|m| &*m.full_name),
                http_status: None,
                grpc_code: code,
            });
        }
    }
}

impl Drop for RequestCtx<'_> {
    fn drop(&mut self) {
        if let Some(mut finish) = self.finish.take()
            && finish.outcome.is_none()
        {
            finish.outcome = Some(self.outcome(Code::Cancelled.http_status(), Code::Cancelled));
        }
    }
}

impl Edge {
    pub fn new(
        schema: Schema,
        upstreams: Upstreams,
        config: EdgeConfig,
    ) -> Result<Edge, SetupError> {
        let mut metrics = Metrics::new();
        metrics.register_upstreams(upstreams.metric_families());
        let metrics = Arc::new(metrics);
        let downgrades = DowngradeLog::new(
            config.downgrade_log_interval,
            crate::downgrade::DEFAULT_CAPACITY,
        )
        .with_max_lines(config.downgrade_log_max_lines);
        let lasting = Lasting {
            admission: Arc::new(Admission::new(
                config.max_concurrent_requests,
                config.max_inflight_bytes,
                metrics.request_bytes_held.clone(),
            )),
            metrics,
            downgrades: Arc::new(downgrades),
            migration: Arc::new(Tracker::new(config.migration.max_clients)),
            draining: Arc::default(),
            epoch: (Instant::now(), std::time::SystemTime::now()),
        };
        let edge = Edge::build(schema, upstreams, config, lasting)?;
        edge.note_schema(None);
        Ok(edge)
    }

    /// A new snapshot of `schema`, `upstreams` and `config` that keeps this one's metrics,
    /// downgrade log, admission counters, migration report and drain. `upstreams` must come
    /// from [`Upstreams::rebuild`] of this snapshot's (its metrics are registered once). What
    /// those lasting parts were built from (the downgrade log's interval, the admission
    /// limits, `max_clients`) keeps its first value until a restart.
    pub fn reload(
        &self,
        schema: Schema,
        upstreams: Upstreams,
        config: EdgeConfig,
    ) -> Result<Edge, SetupError> {
        let lasting = Lasting {
            metrics: self.metrics.clone(),
            downgrades: self.downgrades.clone(),
            admission: self.admission.clone(),
            migration: self.migration.clone(),
            draining: self.draining.clone(),
            epoch: self.epoch,
        };
        let edge = Edge::build(schema, upstreams, config, lasting)?;
        edge.note_schema(Some((&self.digest, self.config.schema_source)));
        Ok(edge)
    }

    /// `protogate_schema_info{digest,source}` = 1 for this snapshot's schema (and the one it
    /// replaces, `previous`, gone).
    fn note_schema(&self, previous: Option<(&str, &'static str)>) {
        if let Some((previous, previous_source)) = previous.filter(|(digest, source)| {
            (*digest, *source) != (&*self.digest, self.config.schema_source)
        }) {
            self.metrics
                .schema_info
                .remove(&crate::metrics::SchemaLabels {
                    digest: previous.to_owned(),
                    source: previous_source,
                });
        }
        self.metrics
            .schema_info
            .get_or_create(&crate::metrics::SchemaLabels {
                digest: self.digest.to_string(),
                source: self.config.schema_source,
            })
            .set(1);
    }

    /// The schema's digest (a short hash of its FileDescriptorSet).
    pub fn digest(&self) -> &str {
        &self.digest
    }

    fn build(
        schema: Schema,
        mut upstreams: Upstreams,
        config: EdgeConfig,
        lasting: Lasting,
    ) -> Result<Edge, SetupError> {
        let status = schema
            .message("google.rpc.Status")
            .ok_or(SetupError::NoStatus)?;
        // An upstream for a service the schema lacks routes nothing: a misspelt name.
        if let Some(missing) = upstreams
            .services()
            .find(|name| schema.methods().all(|m| &*m.service != *name))
        {
            let mut known: Vec<String> = schema.methods().map(|m| m.service.to_string()).collect();
            known.sort_unstable();
            known.dedup();
            return Err(SetupError::UnknownService {
                service: missing.to_owned(),
                known,
            });
        }
        upstreams.limit_calls(config.max_concurrent_requests_per_upstream);
        let routes = Routes::new(&schema, &config.http_rules).map_err(SetupError::Routes)?;
        let openapi = transcode::openapi::document(&schema, &routes, "protogate");
        let openapi = Bytes::from(openapi.to_string());
        // A rule on a path the gateway answers itself would never be reached.
        for path in admin::own_paths(&config) {
            let rule = match routes.resolve(&schema, "GET", path) {
                // Named by its selector, as rules are written.
                Resolution::Found(found) => format!(
                    "GET {path} of {}",
                    found.binding().method.full_name.replacen('/', ".", 1)
                ),
                Resolution::PathNotAllowed(methods) => {
                    format!("for {} {path}", methods.join(", "))
                }
                _ => continue,
            };
            return Err(SetupError::PathTaken { path, rule });
        }
        let sunset = SunsetPolicy::new(config.json_sunset.clone()).map_err(SetupError::Sunset)?;
        // Two equally specific rules on one method are refused now, not met by a request.
        sunset
            .effective(schema.methods().map(|m| &*m.full_name))
            .map_err(SetupError::Sunset)?;
        let cors = config
            .cors
            .clone()
            .map(crate::cors::Cors::new)
            .transpose()
            .map_err(SetupError::Cors)?;
        let Lasting {
            metrics,
            downgrades,
            admission,
            migration,
            draining,
            epoch,
        } = lasting;
        Ok(Edge {
            digest: schema_digest(&schema),
            admission,
            schema,
            routes,
            upstreams,
            config,
            metrics,
            downgrades,
            status,
            transcode: transcode::Options::default(),
            unknown_method: "unknown".into(),
            openapi,
            draining,
            cors,
            migration,
            sunset,
            epoch,
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

    /// The downgrade log every snapshot shares.
    pub(crate) fn downgrades_shared(&self) -> Arc<DowngradeLog> {
        self.downgrades.clone()
    }

    /// The metrics every snapshot shares.
    pub(crate) fn metrics_shared(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The shutdown began: from now on `/readyz` answers 503 and every HTTP/1.1 answer closes
    /// its connection.
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Serves one request. Never fails: every error becomes a response.
    pub async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        if let Some(mut own) = self.own_endpoint(&req).await {
            self.compress(req.headers(), &mut own);
            return own;
        }
        if let Some(preflight) = self.preflight(&req) {
            return preflight;
        }
        // Before the context, which borrows from it (and records when dropped).
        let (head, body) = req.into_parts();
        let headers = &head.headers;
        self.metrics.in_flight.inc();
        // The request's id: the client's, or one made here; sent upstream and answered with.
        let made_request_id = (!headers.contains_key(X_REQUEST_ID)).then(new_request_id);
        let mut ctx = RequestCtx {
            start: Instant::now(),
            head: &head,
            made_request_id,
            access_log: self.config.access_log,
            method: None,
            plan: None,
            client: Client::new(
                header_str(headers, header::USER_AGENT),
                header_str(headers, "x-client-id").or(peer_identity(&head)),
            ),
            stream_end: None,
            ticket: None,
            upstream_latency: None,
            span: self.config.tracer.as_ref().map(|t| t.request(&head)),
            call_span: None,
            noted: Noted::default(),
            finish: Some(Finish {
                edge: Arc::clone(&self),
                outcome: None,
            }),
        };
        let had_body = !body.is_end_stream();
        let result = self.dispatch(&mut ctx, &head, body).await;
        let (mut response, code) = match result {
            Ok(response) => (response, Code::Ok),
            Err(err) => {
                let mut response = self.error_response(&mut ctx, &head.headers, &err);
                // An HTTP/1.1 error may be answered before the body was read (404, 405, 413,
                // 415, …); the connection cannot carry another request then, and the client is
                // told so instead of finding a closed connection under its next request.
                if had_body && head.version < http::Version::HTTP_2 {
                    response
                        .headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                (response, err.code_and_status().0)
            }
        };
        if let Some(cors) = &self.cors
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
        if let Some(sunset) = ctx.noted.sunset_headers {
            sunset.apply(response.headers_mut());
        }
        self.note_migration(&mut ctx);
        self.compress(&head.headers, &mut response);
        let status = response.status();
        let outcome = ctx.outcome(status, code);
        if let Some(ticket) = ctx.ticket.take() {
            response.body_mut().hold(ticket);
        }
        if let Some(mut finish) = ctx.finish.take() {
            let mut outcome = outcome;
            if let Some(access) = &mut outcome.access {
                access.bytes_out = response.body().size_hint().exact().unwrap_or(0);
            }
            finish.outcome = Some(outcome);
            if response.body().is_stream() {
                // A stream is in flight, and its duration runs, until its last frame is sent.
                response.body_mut().on_end(finish);
            }
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
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        // HTTP/1.1's own bound on the head is hyper's read buffer, which grows by doubling (a
        // 24 KiB limit let 32 KiB through); HTTP/2's is exact (h2's header list size).
        if head.version < http::Version::HTTP_2 {
            if http1_head_size(head) > self.config.max_header_bytes {
                return Err(EdgeError::HeadTooLarge {
                    limit: self.config.max_header_bytes,
                });
            }
            http1_framing(head)?;
        }
        let mut ticket = self.admission.admit()?;
        let resolved = self.route(ctx, head)?;
        let target = resolved.binding();
        ctx.method = Some(target.method);
        if let Some(slot) = self.upstreams.slot(&target.method.service)? {
            ticket.set_upstream(slot);
        }
        ctx.ticket = Some(ticket);
        let mut plan = self.negotiate(head, target)?;
        ctx.plan = Some(plan);
        self.json_sunset(ctx, plan)?;
        plan.deadline = self.deadline(head, plan)?;
        ctx.plan = Some(plan);
        // A compressed body is decoded as it arrives; the limits apply to the decoded bytes.
        let limit = match target.method.streaming {
            StreamingKind::Unary | StreamingKind::ServerStreaming => self.config.max_body_bytes,
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional => {
                self.config.max_stream_bytes
            }
        };
        let body = Decoded::new(body, request_coding(&head.headers)?, limit)?;
        match target.method.streaming {
            StreamingKind::Unary => self.unary(ctx, head, target, plan, body).await,
            StreamingKind::ServerStreaming => {
                self.server_stream(ctx, head, target, plan, body).await
            }
            StreamingKind::ClientStreaming => self.client_stream(ctx, target, plan, body).await,
            StreamingKind::Bidirectional => self.bidi_stream(ctx, target, plan, body).await,
        }
    }

    /// A CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) for a
    /// path that has a route, when CORS is configured: 204 naming what the path's routes
    /// accept for an allowed origin, 403 for another; `None` for anything else.
    fn preflight<B>(&self, req: &Request<B>) -> Option<Response<ResponseBody>> {
        let cors = self.cors.as_ref()?;
        let headers = req.headers();
        if req.method() != http::Method::OPTIONS
            || !headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
            || !headers.contains_key(header::ORIGIN)
        {
            return None;
        }
        let methods = match self
            .routes
            .resolve(&self.schema, "OPTIONS", req.uri().path())
        {
            Resolution::PathNotAllowed(allow) => allow.join(", "),
            Resolution::MethodNotAllowed(_) => "POST".to_owned(),
            Resolution::Found(_) | Resolution::NotFound => return None,
        };
        let Some(origin) = cors.allowed_origin(headers) else {
            return Some(plain(
                StatusCode::FORBIDDEN,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"CORS: this origin is not allowed\n"),
            ));
        };
        let mut response = plain(StatusCode::NO_CONTENT, "text/plain", Bytes::new());
        response.headers_mut().remove(header::CONTENT_TYPE);
        cors.preflight(origin, &methods, response.headers_mut());
        Some(response)
    }

    /// The JSON sunset policy for a request with JSON on either side: nothing before a
    /// rule's deprecation; the deprecation headers (and a `json_deprecated` downgrade) until
    /// its sunset; a refusal in a brownout and after the sunset (an exempt client is served
    /// with the headers).
    fn json_sunset<'s>(&'s self, ctx: &mut RequestCtx<'s>, plan: Plan) -> Result<(), EdgeError> {
        let json_body = plan.body_type == Some(Format::Json);
        if self.sunset.is_empty() || !(plan.response == Format::Json || json_body) {
            return Ok(());
        }
        let Some(method) = ctx.method else {
            return Ok(());
        };
        let client = ClientId::from_request(
            &ctx.head.headers,
            self.config.migration.client_id_header.as_ref(),
            peer_identity(ctx.head),
        );
        let decision = self.sunset.decide(
            &method.full_name,
            std::time::SystemTime::now(),
            client.name(),
        );
        ctx.noted.verdict = decision.verdict();
        match decision {
            JsonDecision::Allowed => Ok(()),
            JsonDecision::Deprecated { headers } => {
                ctx.noted.sunset_headers = Some(headers);
                self.metrics
                    .downgrades
                    .get_or_create(&DowngradeLabels {
                        method: MethodName(method.full_name.clone()),
                        reason: Reason::JsonDeprecated.as_str(),
                    })
                    .inc();
                Ok(())
            }
            JsonDecision::Exempt { headers, .. } => {
                ctx.noted.sunset_headers = Some(headers);
                Ok(())
            }
            JsonDecision::Refused { reason, message } => {
                self.metrics
                    .json_refused
                    .get_or_create(&crate::metrics::RefusedLabels {
                        method: MethodName(method.full_name.clone()),
                        reason: reason.as_str(),
                    })
                    .inc();
                Err(EdgeError::JsonRefused { message, json_body })
            }
        }
    }

    /// Counts the request in the migration report, once it had a method and a plan (errors
    /// included: who sends what matters whatever the answer was).
    fn note_migration(&self, ctx: &mut RequestCtx<'_>) {
        let (Some(method), Some(plan)) = (ctx.method, ctx.plan) else {
            return;
        };
        let noted = std::mem::take(&mut ctx.noted);
        let mut downgrades = DowngradeSet::default();
        match noted.verdict {
            // A refusal is a JSON answer (the one it could read).
            Verdict::Refused(_) => downgrades.insert(Reason::JsonRequested),
            Verdict::Deprecated => downgrades.insert(Reason::JsonDeprecated),
            _ => {}
        }
        if plan.response == Format::Json {
            downgrades.insert(if plan.fallback {
                Reason::AcceptFallback
            } else {
                Reason::JsonRequested
            });
        }
        if !noted.dropped.is_empty() {
            downgrades.insert(Reason::UnknownFields);
        }
        let refused = matches!(noted.verdict, Verdict::Refused(_));
        let client = ClientId::from_request(
            &ctx.head.headers,
            self.config.migration.client_id_header.as_ref(),
            peer_identity(ctx.head),
        );
        self.migration.record(
            &method.full_name,
            &client,
            &Finished {
                request: plan.request,
                response: if refused { Format::Json } else { plan.response },
                downgrades,
                dropped: &noted.dropped,
                verdict: noted.verdict,
                request_conversion: noted.request_conversion,
                answer_conversion: noted.answer_conversion,
            },
            self.epoch.1 + ctx.start.saturating_duration_since(self.epoch.0),
        );
    }

    /// Compresses an answer worth compressing in the best coding the client accepts, when
    /// `[compression]` is on (the API's answers and the own endpoints'): a whole answer from `min_bytes` up and only when it gets smaller, a
    /// stream always, frame by frame. Every answer whose type could be compressed says
    /// `Vary: Accept-Encoding`, compressed or not, so caches keep the two apart.
    pub(super) fn compress(&self, request: &HeaderMap, response: &mut Response<ResponseBody>) {
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
            .resolve(&self.schema, head.method.as_str(), path)
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
                Err(EdgeError::UnknownMethod(format!("{} {path}", head.method)))
            }
        }
    }
}

/// A transcoding error as the client's: a request that does not map onto the method under its
/// HTTP rule is a bad request; anything else is a bad body.
fn bad_request(e: transcode::Error) -> EdgeError {
    match e.kind() {
        transcode::ErrorKind::Request { .. } => EdgeError::BadRequest(e.to_string()),
        _ => EdgeError::BadBody(e),
    }
}

/// The verified identity of the client certificate the request came with (TLS listeners
/// with client certificates).
fn peer_identity(head: &http::request::Parts) -> Option<&str> {
    head.extensions
        .get::<crate::server::PeerIdentity>()
        .map(|identity| &*identity.0)
}
