//! Upstream gRPC calls. Unary calls go over one HTTP/2 connection per upstream driven straight
//! by the `h2` crate ([`unary`]); streaming calls go over a tonic channel per upstream (lazily
//! connected, so an upstream that only serves unary calls gets one connection) with a
//! codec that moves protobuf messages as raw bytes.

mod sanitize;
mod unary;

use crate::error::SetupError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::HeaderMap;
use http::uri::PathAndQuery;
use sanitize::Sanitized;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Endpoint;
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
    by_service: HashMap<String, Route>,
    max_response_bytes: usize,
}

/// Where one service's calls go: unary ones on the shared h2 connection, streaming ones on
/// the tonic channel.
#[derive(Clone, Debug)]
struct Route {
    uri: String,
    /// Streams' request messages go gzip-compressed.
    compress_requests: bool,
    /// Calls in flight to this upstream, under `max_concurrent_requests_per_upstream`.
    calls: Option<Arc<crate::admission::Limit>>,
    unary: Arc<unary::Upstream>,
    channel: Sanitized,
}

impl Route {
    /// A ready streaming client for this upstream.
    async fn client(
        &self,
        max_response_bytes: usize,
    ) -> Result<tonic::client::Grpc<Sanitized>, Status> {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(max_response_bytes)
            .max_encoding_message_size(usize::MAX)
            .accept_compressed(CompressionEncoding::Gzip);
        if self.compress_requests {
            grpc = grpc.send_compressed(CompressionEncoding::Gzip);
        }
        grpc.ready()
            .await
            .map_err(|e| unreached(format!("upstream {} not reachable: {e}", self.uri)))?;
        Ok(grpc)
    }

    /// A streaming call's failure: tonic's own words for a transport failure ("tcp connect
    /// error") with this upstream named, as the unary client words it; the upstream's status
    /// as it is.
    fn name_in(&self, status: Status) -> Status {
        if (status.code() == tonic::Code::Unavailable && made_by_gateway(&status))
            || lost_connection(&status)
        {
            unreached(format!("upstream {}: {}", self.uri, status.message()))
        } else {
            status
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
#[derive(Clone, Copy, Debug)]
pub struct UpstreamOptions {
    pub connect_timeout: Duration,
    /// A PING is sent this long after the last one while calls are in flight (zero: never).
    pub keepalive_interval: Duration,
    /// A connection whose PING is not answered within this is given up.
    pub keepalive_timeout: Duration,
    /// Unary calls on one connection before it is replaced (client stream ids run out at
    /// 2^30 calls).
    pub max_streams_per_connection: u32,
    /// Request messages are sent gzip-compressed (`upstream_compression = "gzip"`; default
    /// off). Answers compressed with gzip are accepted either way.
    pub compress_requests: bool,
}

impl Default for UpstreamOptions {
    /// tonic's and hyper's settings: 5 s to connect, a PING every 30 s while calls are in
    /// flight, 20 s to answer it.
    fn default() -> UpstreamOptions {
        UpstreamOptions {
            connect_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(20),
            max_streams_per_connection: 1 << 29,
            compress_requests: false,
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
        // Services on the same upstream share its connection.
        let mut shared: HashMap<String, Route> = HashMap::new();
        let mut route = |uri: &str| -> Result<Route, SetupError> {
            if let Some(route) = shared.get(uri) {
                return Ok(route.clone());
            }
            let mut endpoint = Endpoint::from_shared(uri.to_owned())
                .map_err(|e| SetupError::Upstream {
                    uri: uri.to_owned(),
                    reason: format!("not a valid URI: {e}"),
                })?
                .tcp_nodelay(true)
                .connect_timeout(options.connect_timeout)
                .keep_alive_while_idle(false);
            if !options.keepalive_interval.is_zero() {
                endpoint = endpoint
                    .http2_keep_alive_interval(options.keepalive_interval)
                    .keep_alive_timeout(options.keepalive_timeout);
            }
            let route = Route {
                uri: uri.to_owned(),
                compress_requests: options.compress_requests,
                calls: None,
                unary: Arc::new(unary::Upstream::new(uri, options, max_response_bytes)?),
                channel: Sanitized(endpoint.connect_lazy()),
            };
            shared.insert(uri.to_owned(), route.clone());
            Ok(route)
        };
        let default = default.map(&mut route).transpose()?;
        let by_service = by_service
            .iter()
            .map(|(service, uri)| Ok((service.clone(), route(uri)?)))
            .collect::<Result<_, SetupError>>()?;
        Ok(Upstreams {
            default,
            by_service,
            max_response_bytes,
        })
    }

    /// The URI of `service`'s upstream.
    pub fn uri(&self, service: &str) -> Option<&str> {
        self.route(service).ok().map(|r| r.uri.as_str())
    }

    /// The services given an upstream of their own.
    pub fn services(&self) -> impl Iterator<Item = &str> {
        self.by_service.keys().map(String::as_str)
    }

    /// Limits the calls in flight to each upstream (services on one upstream share its
    /// limit) to `max`.
    pub(crate) fn limit_calls(&mut self, max: Option<usize>) {
        let Some(max) = max else { return };
        let mut by_uri: HashMap<String, Arc<crate::admission::Limit>> = HashMap::new();
        for route in self.default.iter_mut().chain(self.by_service.values_mut()) {
            let limit = by_uri
                .entry(route.uri.clone())
                .or_insert_with(|| Arc::new(crate::admission::Limit::new(Some(max))));
            route.calls = Some(Arc::clone(limit));
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

    /// The upstreams that do not accept a TCP connection within `timeout`, each with why.
    pub async fn unreachable(&self, timeout: Duration) -> Vec<String> {
        let mut routes: Vec<&Route> = self
            .default
            .iter()
            .chain(self.by_service.values())
            .collect();
        routes.sort_by(|a, b| a.uri.cmp(&b.uri));
        routes.dedup_by(|a, b| a.uri == b.uri);
        let mut problems = Vec::new();
        for route in routes {
            let (host, port) = host_port(route.unary.authority());
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => problems.push(format!("{}: {e}", route.uri)),
                Err(_) => problems.push(format!("{}: connect timed out", route.uri)),
            }
        }
        problems
    }

    /// Calls a unary method with raw protobuf bytes. `timeout` is sent as `grpc-timeout`; the
    /// caller enforces it.
    pub async fn unary(
        &self,
        service: &str,
        path: &str,
        body: Bytes,
        metadata: HeaderMap,
        timeout: Duration,
    ) -> Result<Answer, Status> {
        let upstream = &self.route(service)?.unary;
        upstream.unary(path, body, metadata, timeout).await
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
        let route = self.route(service)?;
        let mut grpc = route.client(self.max_response_bytes).await?;
        let response = grpc
            .streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await
            .map_err(|s| route.name_in(s))?;
        let (metadata, stream, _) = response.into_parts();
        Ok((metadata.into_headers(), stream))
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
        let route = self.route(service)?;
        let mut grpc = route.client(self.max_response_bytes).await?;
        let response = grpc
            .client_streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await
            .map_err(|s| route.name_in(s))?;
        let (metadata, body, _) = response.into_parts();
        Ok(Answer {
            body,
            metadata: metadata.into_headers(),
        })
    }
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

/// True when the gateway made `status` because it could not get an answer: the unary client
/// marks its own ([`unreached`]); tonic attaches the transport error it failed with as the
/// source of its own. A status the upstream sent (read from `grpc-status`) has no source.
pub(crate) fn made_by_gateway(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// True when tonic made `status` from a failure of the connection under the call (an I/O
/// error, a GOAWAY, a connection closed or being closed), whatever code it gave it: gRPC calls
/// that UNAVAILABLE. A stream the upstream reset on purpose (RST_STREAM) keeps tonic's code
/// (gRPC's mapping of the reason), and a status the upstream sent has no source at all.
pub(crate) fn lost_connection(status: &Status) -> bool {
    // tonic's own client timer (the grpc-timeout it was given) is the deadline passing, not a
    // lost connection.
    if status.code() == tonic::Code::Ok || !made_by_gateway(status) || deadline_passed(status) {
        return false;
    }
    let mut cause = std::error::Error::source(status);
    while let Some(err) = cause {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            return !(h2.is_reset() && h2.is_remote());
        }
        if err.is::<Unreached>() {
            return false;
        }
        cause = err.source();
    }
    true
}

/// True when tonic's client timer (the `grpc-timeout` a streaming call was sent with) ended
/// the call: the deadline passed.
pub(crate) fn deadline_passed(status: &Status) -> bool {
    let mut cause = std::error::Error::source(status);
    while let Some(err) = cause {
        if err.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cause = err.source();
    }
    false
}

/// Where to connect for `authority`: the host without IPv6 brackets, the port (80 when none).
fn host_port(authority: &http::uri::Authority) -> (&str, u16) {
    let host = authority.host();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (host, authority.port_u16().unwrap_or(80))
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

fn method_path(path: &str) -> Result<PathAndQuery, Status> {
    PathAndQuery::try_from(path).map_err(|e| Status::internal(format!("bad method path: {e}")))
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
