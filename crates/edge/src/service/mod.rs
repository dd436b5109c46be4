//! The request path. [`Edge`] is one snapshot of everything a request needs; [`Live`] the
//! snapshot in force. A request's steps are listed, in the order they run, in
//! `pipeline.rs` ([`Edge::handle`]); each step's room:
//! - `account.rs`: who is calling, what is a downgrade, the JSON sunset's decision, the
//!   migration report's share: each decided once per request;
//! - `admin.rs`: the gateway's own endpoints;
//! - `unary.rs`: `decode_request`, unary calls, `encode_response`;
//! - `streams.rs`: server, client and bidirectional streams;
//! - `relay.rs`: gRPC and gRPC-Web calls, relayed in their envelopes;
//! - `call.rs`: `call_upstream`, the one wrapper of every upstream call;
//! - `respond.rs`: errors rendered as google.rpc.Status, the response builders;
//! - `record.rs`: the record of every answer the API gives and every refusal (metrics,
//!   access log, spans);
//! - `tests.rs`: the account room and `Edge::handle` in-process.
//!
//! What differs between client protocols is asked of the request's
//! [`crate::protocol::Protocol`], never branched on here.

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
use crate::coding::decode::Decoded;
use crate::downgrade::{Client, Downgrade, DowngradeLog, Reason};
use crate::error::{Code, EdgeError, SetupError};
use crate::metrics::{DowngradeLabels, MethodName, Metrics, RequestLabels};
use crate::migration::{
    ClientId, Conversion, DeprecationHeaders, Direction, DowngradeSet, Finished, JsonDecision,
    SunsetPolicy, Tracker, Verdict,
};
use crate::negotiate;
use crate::protocol::Protocol;
use crate::upstream::Upstreams;
pub use admin::ADMIN_PATHS;

mod account;
mod admin;
mod call;
mod limit;
mod pipeline;
mod record;
mod relay;
mod respond;
mod streams;
mod unary;

use crate::headers::*;
use crate::protocol::Plan;
use account::{Caller, Noted, Rendering};
use call::mid_stream_failure;
use pipeline::Kind;
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
    /// Input options (the canonical mapping; both field names accepted).
    transcode: transcode::Options,
    /// How each method's JSON answers are rendered (`[json]`).
    json: crate::json_options::Renderings,
    /// Each method's cap of the upstream deadline (`upstream_timeout`, `timeout`).
    timeouts: crate::per_method::PerMethod<Duration>,
    /// Each method's retry policy (`[services."…"] retry`), for unary calls.
    retries: crate::per_method::PerMethod<Option<crate::upstream::RetryPolicy>>,
    /// The requests and request bytes in flight, under their limits.
    admission: Arc<Admission>,
    /// The method label of requests that name no method.
    unknown_method: std::sync::Arc<str>,
    /// `GET {openapi_path}`: the OpenAPI document of the schema and the routes, built once.
    openapi: Bytes,
    /// CORS, when configured.
    cors: Option<crate::cors::Cors>,
    /// Who speaks which format to which method, and what it costs (`/admin/migration`).
    migration: Arc<Tracker>,
    /// What the per-client series showed at the last scrape.
    exported: Arc<crate::migration::Exporter>,
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
    /// `[auth]`, when configured.
    auth: Option<crate::auth::Auth>,
    /// `[rate_limit]`, when configured.
    limiter: Option<crate::rate_limit::RateLimiter>,
    /// The header the verified identity goes upstream in, never the client's own.
    client_header: http::HeaderName,
}

/// What outlives a snapshot: kept by [`Edge::reload`].
struct Lasting {
    metrics: Arc<Metrics>,
    downgrades: Arc<DowngradeLog>,
    admission: Arc<Admission>,
    migration: Arc<Tracker>,
    exported: Arc<crate::migration::Exporter>,
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

/// One request's context: when it began, who asked, in which protocol, for which method,
/// and its plan. Made by [`Edge::begin`], the pipeline's first step; an API request's
/// context dropped without an answer (the client left) records the request as 499.
struct RequestCtx<'a> {
    start: Instant,
    head: &'a http::request::Parts,
    /// The client protocol the request speaks.
    protocol: Protocol,
    /// Whose answer this is: the API's, or the gateway's own.
    kind: Kind,
    /// The id the gateway gave a request that came without `x-request-id`.
    made_request_id: Option<HeaderValue>,
    /// Whether the outcome carries the access log's fields.
    access_log: bool,
    method: Option<&'a Method>,
    /// What `negotiate` decided, once it has.
    plan: Option<Plan>,
    /// Who is calling (`account.rs`).
    caller: Caller<'a>,
    /// What `[auth]` verified of the request's credentials (the claims it forwards).
    verified: Option<Arc<crate::auth::Verified>>,
    /// The client's address, when the listener gave it: the connection's peer, or with
    /// `trusted_proxies` the first untrusted address of `X-Forwarded-For` behind it.
    peer: Option<std::net::IpAddr>,
    /// The connection's peer itself (`X-Forwarded-For`'s last hop).
    connection_peer: Option<std::net::IpAddr>,
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

impl Edge {
    /// The pipeline's first steps, for every request: the record's start time, the
    /// protocol, the request id (the client's, or one made here: sent upstream and answered
    /// with), who is calling. The request counts in flight once it is the API's
    /// ([`Edge::in_flight`]).
    fn begin<'a>(&self, head: &'a http::request::Parts) -> RequestCtx<'a> {
        RequestCtx {
            start: Instant::now(),
            head,
            protocol: Protocol::recognise(head),
            kind: Kind::Api,
            made_request_id: (!head.headers.contains_key(X_REQUEST_ID)).then(new_request_id),
            access_log: self.config.access_log,
            method: None,
            plan: None,
            caller: self.identify(head),
            verified: None,
            peer: None,
            connection_peer: None,
            stream_end: None,
            ticket: None,
            upstream_latency: None,
            span: None,
            call_span: None,
            noted: Noted::default(),
            finish: None,
        }
    }

    /// A request of the API's: in flight from now until its [`Finish`] is dropped (with the
    /// answer, or when its client leaves: 499).
    fn in_flight(self: &Arc<Self>) -> Finish {
        self.metrics.in_flight.inc();
        Finish {
            edge: Arc::clone(self),
            outcome: None,
        }
    }
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

    /// The metadata that goes upstream with the call: the client's (`upstream_metadata`),
    /// the verified identity (`put_identity`) and, when tracing, the trace context of the
    /// call's span, which starts here.
    fn upstream_metadata(&mut self, edge: &Edge) -> Result<HeaderMap, EdgeError> {
        let mut metadata = self
            .protocol
            .upstream_metadata(&self.head.headers, self.made_request_id.as_ref())?;
        let config = &edge.config;
        if self.protocol == Protocol::Http && !config.forward_headers.is_empty() {
            // Every value of a matched header, unless the fixed set already sends that name.
            let mut matched = HeaderMap::new();
            for (name, value) in &self.head.headers {
                if config.forward_headers.matches(name) && !metadata.contains_key(name) {
                    matched.append(name.clone(), value.clone());
                }
            }
            metadata.extend(matched);
        }
        if config.forward_headers.x_forwarded() || !config.trusted_proxies.is_empty() {
            crate::forwarding::put_forwarded(
                &mut metadata,
                &self.head.headers,
                self.head.uri.authority().map(|a| a.as_str()).or_else(|| {
                    self.head
                        .headers
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                }),
                self.connection_peer,
                config.tls.is_some(),
                &config.trusted_proxies,
            );
        }
        edge.put_identity(self, &mut metadata);
        self.start_call_span(&edge.upstreams, &mut metadata);
        Ok(metadata)
    }

    /// When tracing, the upstream call's span starts, its context written into `metadata`.
    fn start_call_span(&mut self, upstreams: &Upstreams, metadata: &mut HeaderMap) {
        if let (Some(span), Some(method)) = (&self.span, self.method) {
            let upstream = upstreams.uri(&method.service).unwrap_or("-");
            let upstream = upstream.split_once("://").map_or(upstream, |(_, a)| a);
            self.call_span = Some(span.upstream_call(&method.full_name, upstream, metadata));
        }
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
            exported: Arc::default(),
            draining: Arc::default(),
            epoch: (Instant::now(), std::time::SystemTime::now()),
        };
        let edge = Edge::build(schema, upstreams, config, lasting)?;
        edge.note_schema(None);
        edge.metrics
            .build_info
            .get_or_create(&crate::metrics::BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                revision: edge.config.revision,
            })
            .set(1);
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
            exported: self.exported.clone(),
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
        let routes = Routes::with_dialect(&schema, &config.http_rules, config.path_templates)
            .map_err(SetupError::Routes)?;
        let openapi = transcode::openapi::document(&schema, &routes, "protogate");
        let openapi = Bytes::from(openapi.to_string());
        // A rule's template may cover the gateway's own paths (their literals win there); a
        // rule whose literal path is one of them would never be reached.
        for path in admin::own_paths(&config) {
            if let Some(route) = routes
                .iter()
                .find(|r| r.template.is_literal() && r.template.shape() == path)
            {
                return Err(SetupError::PathTaken {
                    path: path.to_owned(),
                    rule: format!(
                        "{} {path} of {}",
                        route.rule.method,
                        route.method.full_name.replacen('/', ".", 1)
                    ),
                });
            }
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
            exported,
            draining,
            epoch,
        } = lasting;
        let auth = config.auth.clone().map(crate::auth::Auth::new);
        if auth.is_some() {
            for reason in crate::auth::Reason::ALL {
                let _at_zero = metrics
                    .auth_failures
                    .get_or_create(&crate::metrics::ReasonLabels {
                        reason: reason.as_str(),
                    });
            }
        }
        let limiter = config
            .rate_limit
            .clone()
            .map(crate::rate_limit::RateLimiter::new)
            .transpose()
            .map_err(SetupError::RateLimit)?;
        zero_method_series(&metrics, &schema, &sunset, limiter.is_some());
        let json =
            crate::json_options::renderings(&config.json, &schema, config.schema_waiting.is_some())
                .map_err(SetupError::Override)?;
        let timeouts = crate::per_method::PerMethod::new(
            config.upstream_timeout,
            &config.timeouts,
            &schema,
            config.schema_waiting.is_some(),
            ".timeout",
            |method, service| method.or(service).unwrap_or(config.upstream_timeout),
        )
        .map_err(SetupError::Override)?;
        let retries = crate::per_method::PerMethod::new(
            None,
            &config.retries,
            &schema,
            config.schema_waiting.is_some(),
            ".retry",
            |method, service| {
                method
                    .unwrap_or_default()
                    .or(service.unwrap_or_default())
                    .policy()
            },
        )
        .map_err(SetupError::Override)?;
        Ok(Edge {
            json,
            timeouts,
            retries,
            client_header: auth.as_ref().map_or(crate::auth::CLIENT_HEADER, |a| {
                a.config().client_header.clone()
            }),
            auth,
            limiter,
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
            exported,
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
}

/// A transcoding error as the client's: a request that does not map onto the method under its
/// HTTP rule is a bad request; anything else is a bad body.
fn bad_request(e: transcode::Error) -> EdgeError {
    match e.kind() {
        transcode::ErrorKind::Request { .. } => EdgeError::BadRequest(e.to_string()),
        _ => EdgeError::BadBody(e),
    }
}

#[cfg(test)]
mod tests;

/// Every schema method's counters whose labels are known before any request, at 0, so
/// dashboards and `rate()` alerts see a quiet gateway's zeros, not "no data": downgrades by
/// reason, JSON refusals where a sunset rule governs the method, rate-limit refusals when
/// `[rate_limit]` is on. (Made again by each snapshot: a method a reload adds gets its own.)
fn zero_method_series(metrics: &Metrics, schema: &Schema, sunset: &SunsetPolicy, limits: bool) {
    use crate::metrics::{DowngradeLabels, MethodLabels, RefusedLabels};
    for method in schema.methods() {
        let name = || crate::metrics::MethodName(method.full_name.clone());
        for reason in crate::migration::REASONS {
            let _at_zero = metrics.downgrades.get_or_create(&DowngradeLabels {
                method: name(),
                reason: reason.as_str(),
            });
        }
        if sunset.rule_for(&method.full_name).is_some() {
            for reason in crate::migration::RefusalReason::ALL {
                let _at_zero = metrics.json_refused.get_or_create(&RefusedLabels {
                    method: name(),
                    reason: reason.as_str(),
                });
            }
        }
        if limits {
            let _at_zero = metrics
                .rate_limited
                .get_or_create(&MethodLabels { method: name() });
        }
    }
}
