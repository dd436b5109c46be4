//! Upstream gRPC calls. Each configured upstream is a [`pool`] of endpoints (every address its
//! URLs resolve to, re-resolved every `dns_refresh`), balanced by power of two choices,
//! ejected when they fail and probed back ([`endpoint`]), optionally health-checked
//! ([`health`]). Unary calls ([`unary`]) and streams ([`stream`]: tonic's client framing over
//! the same connections, with a codec that moves protobuf messages as raw bytes) share the
//! endpoints' HTTP/2 connections, driven straight on the `h2` crate ([`exchange`]: one call's
//! request head and answer) and dialed by [`connect`]: h2c for `http://` upstreams, TLS
//! (ALPN h2) for `https://` ones.

mod connect;
mod endpoint;
mod exchange;
mod health;
mod pool;
mod reflection;

pub use pool::MIN_INTERVAL;
mod random;
mod resolve;
mod retry;
mod stream;
pub(crate) use stream::AnswerBody;
mod unary;

pub use connect::UpstreamTls;
pub use reflection::{Reflected, ReflectedFile, ReflectionQuery};
pub use resolve::{Resolution, Resolve, SystemResolver};
pub use retry::{Codes, MAX_ATTEMPTS, MIN_RETRIES, RetryPolicy, RetrySettings};

use crate::error::SetupError;
use crate::metrics::{EndpointLabels, MethodName, UpstreamFamilies, UpstreamLabels};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::HeaderMap;
use http::uri::PathAndQuery;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Status, metadata::MetadataMap};

/// The answers' decoder of streaming calls: each message is its protobuf bytes, nothing
/// decoded, so fields the gateway's schema does not know travel intact.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BytesDecoder;

impl Decoder for BytesDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The codec of streaming calls: protobuf bytes both ways; a `None` request aborts the call
/// (the encoder fails, so the HTTP/2 stream is reset rather than ended).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamCodec;

impl Codec for StreamCodec {
    type Encode = Option<Bytes>;
    type Decode = Bytes;
    type Encoder = StreamCodec;
    type Decoder = BytesDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        StreamCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesDecoder
    }
}

impl Encoder for StreamCodec {
    type Item = Option<Bytes>;
    type Error = Status;

    fn encode(&mut self, item: Option<Bytes>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        match item {
            Some(bytes) => {
                dst.put(bytes);
                Ok(())
            }
            None => Err(Status::cancelled("the client's request stream broke off")),
        }
    }
}

/// The upstreams: per-service ones from the config, and a default.
#[derive(Clone, Debug)]
pub struct Upstreams {
    default: Option<Route>,
    by_service: HashMap<String, Route, foldhash::fast::RandomState>,
    max_response_bytes: usize,
    families: UpstreamFamilies,
}

/// Where one service's calls go: its upstream's pool, unary calls and streams alike.
#[derive(Clone, Debug)]
struct Route {
    pool: Arc<pool::Pool>,
    /// Calls in flight to this upstream, under `max_concurrent_requests_per_upstream`.
    calls: Option<Arc<crate::admission::Limit>>,
}

impl Route {
    /// A streaming client for this upstream.
    fn client(&self, max_response_bytes: usize) -> tonic::client::Grpc<stream::PoolService> {
        let grpc = tonic::client::Grpc::new(stream::PoolService(self.pool.clone()))
            .max_decoding_message_size(max_response_bytes)
            .max_encoding_message_size(usize::MAX)
            .accept_compressed(CompressionEncoding::Gzip);
        if self.pool.options.compress_requests {
            grpc.send_compressed(CompressionEncoding::Gzip)
        } else {
            grpc
        }
    }
}

/// One URL of an upstream as configured, and, for `https://`, how to speak TLS to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub uri: String,
    pub tls: Option<UpstreamTls>,
}

impl Target {
    /// An upstream reached without TLS (`http://`, gRPC over h2c).
    pub fn plain(uri: &str) -> Target {
        Target {
            uri: uri.to_owned(),
            tls: None,
        }
    }
}

/// An upstream as configured: its URLs (each host name stands for every address it resolves
/// to) and whether its endpoints are health-checked (`grpc.health.v1.Health/Check`).
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamSpec {
    pub targets: Vec<Target>,
    pub health_check: bool,
}

impl UpstreamSpec {
    /// One URL, no active health check.
    pub fn single(target: Target) -> UpstreamSpec {
        UpstreamSpec {
            targets: vec![target],
            health_check: false,
        }
    }
}

/// A successful upstream answer: the protobuf body and the metadata (headers and trailers).
pub struct Answer {
    pub body: Bytes,
    /// Its headers and trailers (the edge answers with those that are not gRPC's own).
    pub metadata: HeaderMap,
}

/// How upstream connections are dialed, watched and replaced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpstreamOptions {
    pub connect_timeout: Duration,
    /// A PING is sent this long after the last one while calls are in flight (zero: never).
    pub keepalive_interval: Duration,
    /// A connection whose PING is not answered within this is given up.
    pub keepalive_timeout: Duration,
    /// Calls on one connection before it is replaced (client stream ids run out at 2^30
    /// calls).
    pub max_streams_per_connection: u32,
    /// Request messages are sent gzip-compressed (`upstream_compression = "gzip"`; default
    /// off). Answers compressed with gzip are accepted either way.
    pub compress_requests: bool,
    /// Host names are resolved again this often (`dns_refresh`, default 5 s).
    pub dns_refresh: Duration,
    /// Health-checked upstreams are asked this often (`health_interval`, default 5 s).
    pub health_interval: Duration,
    /// The share of calls with a retry policy that may be retries, per upstream over ten
    /// seconds (`retry_budget`, default 0.2).
    pub retry_budget: f64,
    /// An endpoint whose calls are answered UNAVAILABLE or INTERNAL this many times in a row
    /// is ejected (`consecutive_failures`, default 5; 0: never).
    pub consecutive_failures: u32,
}

impl Default for UpstreamOptions {
    /// tonic's and hyper's settings: 5 s to connect, a PING every 30 s while calls are in
    /// flight, 20 s to answer it; names resolved and health checked every 5 s.
    fn default() -> UpstreamOptions {
        UpstreamOptions {
            connect_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(20),
            max_streams_per_connection: 1 << 29,
            compress_requests: false,
            dns_refresh: Duration::from_secs(5),
            health_interval: Duration::from_secs(5),
            retry_budget: 0.2,
            consecutive_failures: 5,
        }
    }
}

impl Upstreams {
    /// Builds lazily-connecting upstreams (nothing is dialed until the first call). Must run
    /// inside a Tokio runtime. URIs are `http://host:port` (gRPC over h2c).
    pub fn new(
        default: Option<&str>,
        by_service: &[(String, String)],
        max_response_bytes: usize,
    ) -> Result<Upstreams, SetupError> {
        Upstreams::with_options(
            default,
            by_service,
            max_response_bytes,
            UpstreamOptions::default(),
        )
    }

    /// [`Upstreams::new`] with other connection settings.
    pub fn with_options(
        default: Option<&str>,
        by_service: &[(String, String)],
        max_response_bytes: usize,
        options: UpstreamOptions,
    ) -> Result<Upstreams, SetupError> {
        Upstreams::from_targets(
            default.map(Target::plain),
            by_service
                .iter()
                .map(|(service, uri)| (service.clone(), Target::plain(uri)))
                .collect(),
            max_response_bytes,
            options,
        )
    }

    /// Upstreams of one URL each, each with its TLS settings when it is `https://`.
    pub fn from_targets(
        default: Option<Target>,
        by_service: Vec<(String, Target)>,
        max_response_bytes: usize,
        options: UpstreamOptions,
    ) -> Result<Upstreams, SetupError> {
        Upstreams::build(
            default.map(UpstreamSpec::single),
            by_service
                .into_iter()
                .map(|(service, target)| (service, UpstreamSpec::single(target)))
                .collect(),
            max_response_bytes,
            options,
            Arc::new(SystemResolver),
        )
    }

    /// Upstreams as configured, host names resolved by `resolver`. Services whose upstreams
    /// have the same URLs (and TLS settings) share one pool of endpoints.
    pub fn build(
        default: Option<UpstreamSpec>,
        by_service: Vec<(String, UpstreamSpec)>,
        max_response_bytes: usize,
        options: UpstreamOptions,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Upstreams, SetupError> {
        Upstreams::build_after(
            None,
            default,
            by_service,
            max_response_bytes,
            options,
            resolver,
        )
    }

    /// Upstreams as configured now, for a reloaded snapshot: an upstream configured exactly as
    /// before keeps its pool (its endpoints, their connections and health), the others get new
    /// ones; the metrics are this one's.
    pub fn rebuild(
        &self,
        default: Option<UpstreamSpec>,
        by_service: Vec<(String, UpstreamSpec)>,
        max_response_bytes: usize,
        options: UpstreamOptions,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Upstreams, SetupError> {
        Upstreams::build_after(
            Some(self),
            default,
            by_service,
            max_response_bytes,
            options,
            resolver,
        )
    }

    fn build_after(
        previous: Option<&Upstreams>,
        default: Option<UpstreamSpec>,
        by_service: Vec<(String, UpstreamSpec)>,
        max_response_bytes: usize,
        options: UpstreamOptions,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Upstreams, SetupError> {
        // The services each distinct upstream health-checks ("" for the default upstream:
        // the server's overall health, as the health protocol defines it).
        let mut distinct: Vec<(Vec<Target>, Vec<String>)> = Vec::new();
        for (service, spec) in default
            .iter()
            .map(|spec| ("", spec))
            .chain(by_service.iter().map(|(s, spec)| (s.as_str(), spec)))
        {
            let at = match distinct.iter().position(|(t, _)| *t == spec.targets) {
                Some(at) => at,
                None => {
                    distinct.push((spec.targets.clone(), Vec::new()));
                    distinct.len() - 1
                }
            };
            if spec.health_check {
                distinct[at].1.push(service.to_owned());
            }
        }
        let families = match previous {
            Some(previous) => previous.metric_families(),
            None => UpstreamFamilies::default(),
        };
        let mut pools: Vec<(Vec<Target>, Arc<pool::Pool>)> = Vec::new();
        for (targets, health_services) in distinct {
            let kept = previous.and_then(|p| {
                p.default
                    .iter()
                    .chain(p.by_service.values())
                    .map(|r| &r.pool)
                    .find(|pool| {
                        pool.is_configured(&targets, &health_services, options, max_response_bytes)
                    })
            });
            if let Some(pool) = kept {
                pools.push((targets, pool.clone()));
                continue;
            }
            let name = pool::name(&targets);
            let label = MethodName(name);
            let gauge = |state| {
                families
                    .endpoints
                    .get_or_create(&EndpointLabels {
                        upstream: label.clone(),
                        state,
                    })
                    .clone()
            };
            let settings = pool::PoolSettings {
                options,
                max_response_bytes,
                health_services,
                gauges: endpoint::StateGauges {
                    healthy: gauge("healthy"),
                    ejected: gauge("ejected"),
                },
                calls: families
                    .calls
                    .get_or_create(&UpstreamLabels {
                        upstream: label.clone(),
                    })
                    .clone(),
                budget: retry::Budget::new(options.retry_budget, label, &families),
                resolver: resolver.clone(),
            };
            let pool = pool::Pool::new(&targets, settings)?;
            pools.push((targets, pool));
        }
        let route = |spec: &UpstreamSpec| -> Option<Route> {
            let (_, pool) = pools.iter().find(|(t, _)| *t == spec.targets)?;
            Some(Route {
                pool: pool.clone(),
                calls: None,
            })
        };
        Ok(Upstreams {
            default: default.as_ref().and_then(route),
            by_service: by_service
                .iter()
                .filter_map(|(service, spec)| Some((service.clone(), route(spec)?)))
                .collect(),
            max_response_bytes,
            families,
        })
    }

    /// The upstream of `service` as configured (its URLs, comma-separated).
    pub fn uri(&self, service: &str) -> Option<&str> {
        self.route(service).ok().map(|r| &*r.pool.name)
    }

    /// The services given an upstream of their own.
    pub fn services(&self) -> impl Iterator<Item = &str> {
        self.by_service.keys().map(String::as_str)
    }

    /// The upstreams' metric families, for the registry.
    pub(crate) fn metric_families(&self) -> UpstreamFamilies {
        self.families.clone()
    }

    /// Limits the calls in flight to each upstream (services on one upstream share its
    /// limit) to `max`.
    pub(crate) fn limit_calls(&mut self, max: Option<usize>) {
        let Some(max) = max else { return };
        for route in self.default.iter_mut().chain(self.by_service.values_mut()) {
            route.calls = Some(route.pool.limit(max));
        }
    }

    /// A place among the calls in flight to `service`'s upstream when its calls are
    /// limited, or the upstream's refusal.
    pub(crate) fn slot(
        &self,
        service: &str,
    ) -> Result<Option<crate::admission::UpstreamSlot>, crate::EdgeError> {
        match self.route(service).ok().and_then(|r| r.calls.as_ref()) {
            Some(limit) => crate::admission::UpstreamSlot::take(limit).map(Some),
            None => Ok(None),
        }
    }

    fn route(&self, service: &str) -> Result<&Route, Status> {
        self.by_service
            .get(service)
            .or(self.default.as_ref())
            .ok_or_else(|| unreached(format!("no upstream configured for service {service}")))
    }

    /// Each upstream by name, reachable or why not: reachable when one of its endpoints has a
    /// connection up or makes one within `timeout` (an upstream's endpoints are tried in
    /// turn, the upstreams at once).
    pub async fn readiness(&self, timeout: Duration) -> Vec<(Arc<str>, Result<(), String>)> {
        let mut pools: Vec<&Arc<pool::Pool>> = Vec::new();
        for route in self.default.iter().chain(self.by_service.values()) {
            if !pools.iter().any(|p| Arc::ptr_eq(p, &route.pool)) {
                pools.push(&route.pool);
            }
        }
        pools.sort_by(|a, b| a.name.cmp(&b.name));
        let checks = pools
            .iter()
            .map(|pool| async { (Arc::clone(&pool.name), pool.ready(timeout).await) });
        futures_util::future::join_all(checks).await
    }

    /// Calls a unary method with raw protobuf bytes. `timeout` is sent as `grpc-timeout`; the
    /// caller enforces it. With a `policy`, attempts answered with its codes go again.
    pub async fn unary(
        &self,
        method: &transcode::Method,
        body: Bytes,
        metadata: HeaderMap,
        timeout: Duration,
        policy: Option<&RetryPolicy>,
    ) -> Result<Answer, Status> {
        let pool = &self.route(&method.service)?.pool;
        unary::call(pool, &method.path, body, metadata, timeout, policy).await
    }

    /// Calls a method whose responses stream, with one request message (server streaming)
    /// or a stream of them (bidirectional). Returns the response headers' metadata and the
    /// stream; `timeout`, when given, is sent as `grpc-timeout`.
    pub async fn streaming<S>(
        &self,
        service: &str,
        path: &str,
        requests: S,
        metadata: HeaderMap,
        timeout: Option<Duration>,
    ) -> Result<(HeaderMap, tonic::Streaming<Bytes>), Status>
    where
        S: futures_core::Stream<Item = Option<Bytes>> + Send + 'static,
    {
        let path = method_path(path)?;
        let mut grpc = self.route(service)?.client(self.max_response_bytes);
        let response = grpc
            .streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await?;
        let (metadata, stream, _) = response.into_parts();
        Ok((metadata.into_headers(), stream))
    }

    /// Relays a call whose messages come framed (gRPC, gRPC-Web): `body` goes to the
    /// upstream as it comes, with `headers` (the caller's, gRPC's content type and `te`
    /// included); the answer is the upstream's head and its body (data, then trailers),
    /// untouched. Same pool, balancing and retry (of a call that provably did not leave) as
    /// every other call.
    pub(crate) async fn relay<B>(
        &self,
        service: &str,
        path: &str,
        headers: HeaderMap,
        body: B,
    ) -> Result<http::Response<stream::AnswerBody>, Status>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let body = stream::Outgoing::Stream(tonic::body::Body::new(body));
        self.relay_outgoing(service, path, headers, body).await
    }

    /// [`Upstreams::relay`] with the body already whole (a method that takes one message):
    /// sent with the request's head, on the request's own task. With a retry policy and the
    /// call's deadline (`retry`), an attempt answered at once (trailers only) with one of the
    /// policy's codes goes again; an answer that brings a message is the call's (gRFC A6:
    /// the call is committed), and `per_try_timeout` bounds the wait for the answer's head.
    pub(crate) async fn relay_whole(
        &self,
        service: &str,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
        retry: Option<(&RetryPolicy, Duration)>,
    ) -> Result<http::Response<stream::AnswerBody>, Status> {
        let Some((policy, timeout)) = retry else {
            let body = stream::Outgoing::Whole(body);
            return self.relay_outgoing(service, path, headers, body).await;
        };
        let pool = &self.route(service)?.pool;
        // Boxed, as a unary call's attempts are (unary.rs): the relay's future stays small.
        Box::pin(relay_attempts(pool, path, headers, body, policy, timeout)).await
    }

    async fn relay_outgoing(
        &self,
        service: &str,
        path: &str,
        headers: HeaderMap,
        body: stream::Outgoing,
    ) -> Result<http::Response<stream::AnswerBody>, Status> {
        let pool = self.route(service)?.pool.clone();
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from(method_path(path)?);
        *request.headers_mut() = headers;
        stream::open(pool, request).await
    }

    /// Calls a client-streaming method: a stream of request messages, one answer.
    pub async fn client_streaming<S>(
        &self,
        service: &str,
        path: &str,
        requests: S,
        metadata: HeaderMap,
        timeout: Option<Duration>,
    ) -> Result<Answer, Status>
    where
        S: futures_core::Stream<Item = Option<Bytes>> + Send + 'static,
    {
        let path = method_path(path)?;
        let mut grpc = self.route(service)?.client(self.max_response_bytes);
        let response = grpc
            .client_streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await?;
        let (metadata, body, _) = response.into_parts();
        Ok(Answer {
            body,
            metadata: metadata.into_headers(),
        })
    }
}

/// A relayed unary call's attempts under `policy` within `timeout` (`Upstreams::relay_whole`).
async fn relay_attempts(
    pool: &Arc<pool::Pool>,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
    policy: &RetryPolicy,
    timeout: Duration,
) -> Result<http::Response<stream::AnswerBody>, Status> {
    let path = method_path(path)?;
    let mut attempts = retry::Attempts::new(policy, &pool.budget, timeout);
    loop {
        let (previous, limit) = attempts.begin();
        let mut request = http::Request::new(stream::Outgoing::Whole(body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from(path.clone());
        let head = request.headers_mut();
        *head = headers.clone();
        head.insert(exchange::GRPC_TIMEOUT, grpc_timeout(limit));
        if let Some(previous) = previous {
            head.insert(retry::PREVIOUS_ATTEMPTS, previous);
        }
        let attempt = stream::open(pool.clone(), request);
        let outcome = match policy.per_try_timeout {
            Some(_) => tokio::time::timeout(limit, attempt)
                .await
                .unwrap_or_else(|_| Err(retry::per_try_expired(limit))),
            None => attempt.await,
        };
        let (status, outcome) = match outcome {
            Ok(response) => match stream::trailers_only_status(&response) {
                Some(status) => (status, Ok(response)),
                None => return Ok(response),
            },
            Err(status) => (status.clone(), Err(status)),
        };
        if !attempts.again(&status).await {
            return outcome;
        }
    }
}

/// `grpc-timeout`'s value for `timeout`, as every call upstream sends it.
pub(crate) fn grpc_timeout(timeout: Duration) -> http::HeaderValue {
    exchange::grpc_timeout(timeout)
}

/// The mark of a status the gateway made itself because it could not get an answer (a failed
/// dial, a lost connection, a refused stream): never a status the upstream sent.
#[derive(Debug)]
struct Unreached;

impl std::fmt::Display for Unreached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the gateway could not get an answer from the upstream")
    }
}

impl std::error::Error for Unreached {}

/// An UNAVAILABLE status of the gateway's own (see [`made_by_gateway`]).
fn unreached(message: impl Into<String>) -> Status {
    let mut status = Status::unavailable(message);
    status.set_source(Arc::new(Unreached));
    status
}

/// True when the gateway made `status` because it could not get an answer: the upstream
/// clients mark their own ([`unreached`]). A status the upstream sent (read from
/// `grpc-status`) has no source.
pub(crate) fn made_by_gateway(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// A gRPC binary header's value (`*-bin`): base64, sent unpadded, correct padding accepted
/// (as tonic reads it: a value this refuses would make tonic's client panic).
pub(crate) fn decode_binary_header(value: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const BINARY_HEADER: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    BINARY_HEADER.decode(value).ok()
}

/// A method's `:path`, made once per thread and method and cloned after (parsing and copying
/// it on every call cost ≈ 560 instructions, BENCHMARKS.md, history of 2026-12-02). The paths are the
/// schema's methods', so the map is as bounded as the schema; it starts over past
/// `MAX_MADE_PATHS`, should reloads keep adding methods.
fn method_path(path: &str) -> Result<PathAndQuery, Status> {
    const MAX_MADE_PATHS: usize = 4096;
    type Made = HashMap<Box<str>, PathAndQuery, foldhash::fast::RandomState>;
    thread_local! {
        static MADE: std::cell::RefCell<Made> = std::cell::RefCell::default();
    }
    MADE.with_borrow_mut(|made| {
        if let Some(made) = made.get(path) {
            return Ok(made.clone());
        }
        let parsed = PathAndQuery::try_from(path)
            .map_err(|e| Status::internal(format!("bad method path: {e}")))?;
        if made.len() >= MAX_MADE_PATHS {
            made.clear();
        }
        made.insert(path.into(), parsed.clone());
        Ok(parsed)
    })
}

/// A tonic request: the metadata as tonic keeps it (the one conversion, at tonic's boundary).
fn request<T>(message: T, metadata: HeaderMap, timeout: Option<Duration>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = MetadataMap::from_headers(metadata);
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_path_is_made_once_and_a_bad_one_never_kept() {
        for _ in 0..2 {
            let path = method_path("/pkg.Svc/Method").unwrap();
            assert_eq!(path.as_str(), "/pkg.Svc/Method");
            let other = method_path("/pkg.Svc/Other").unwrap();
            assert_eq!(other.as_str(), "/pkg.Svc/Other");
            assert!(method_path("/pkg.Svc/M\u{7f}").is_err());
        }
    }
}
