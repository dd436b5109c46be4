//! Upstream gRPC calls: one HTTP/2 channel per upstream (tonic, reconnecting by itself, shared
//! by all requests) and a pass-through codec that moves protobuf bodies as raw bytes.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, metadata::MetadataMap};

/// A codec whose messages are the protobuf bytes themselves: nothing is decoded or
/// re-encoded, so fields the gateway's schema does not know travel intact.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The codec of request streams: [`BytesCodec`]'s messages, where `None` aborts the call (the
/// encoder fails, so the HTTP/2 stream is reset rather than ended).
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamCodec;

impl Codec for StreamCodec {
    type Encode = Option<Bytes>;
    type Decode = Bytes;
    type Encoder = StreamCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        StreamCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
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

/// The upstream channels: per-service ones from the config, and a default.
#[derive(Clone, Debug)]
pub struct Upstreams {
    default: Option<(String, Channel)>,
    by_service: HashMap<String, (String, Channel)>,
    max_response_bytes: usize,
}

/// A successful upstream answer: the protobuf body and the metadata (headers and trailers).
pub struct Answer {
    pub body: Bytes,
    pub metadata: MetadataMap,
}

impl Upstreams {
    /// Builds lazily-connecting channels (nothing is dialed until the first call). Must run
    /// inside a Tokio runtime. URIs are `http://host:port` (gRPC over h2c).
    pub fn new(
        default: Option<&str>,
        by_service: &[(String, String)],
        max_response_bytes: usize,
    ) -> Result<Upstreams, String> {
        let channel = |uri: &str| -> Result<(String, Channel), String> {
            let endpoint = Endpoint::from_shared(uri.to_owned())
                .map_err(|e| format!("upstream {uri:?} is not a valid URI: {e}"))?
                .tcp_nodelay(true)
                .connect_timeout(Duration::from_secs(5))
                .http2_keep_alive_interval(Duration::from_secs(30))
                .keep_alive_while_idle(false);
            Ok((uri.to_owned(), endpoint.connect_lazy()))
        };
        let default = default.map(channel).transpose()?;
        let by_service = by_service
            .iter()
            .map(|(service, uri)| Ok((service.clone(), channel(uri)?)))
            .collect::<Result<_, String>>()?;
        Ok(Upstreams {
            default,
            by_service,
            max_response_bytes,
        })
    }

    /// The upstream URI serving `service`, if any.
    pub fn uri_for(&self, service: &str) -> Option<&str> {
        self.by_service
            .get(service)
            .or(self.default.as_ref())
            .map(|(u, _)| u.as_str())
    }

    /// Every distinct upstream URI.
    pub fn uris(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .default
            .iter()
            .chain(self.by_service.values())
            .map(|(u, _)| u.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// A ready client for `service`'s upstream.
    async fn client(&self, service: &str) -> Result<tonic::client::Grpc<Channel>, Status> {
        let Some((_, channel)) = self.by_service.get(service).or(self.default.as_ref()) else {
            return Err(Status::unavailable(format!(
                "no upstream configured for service {service}"
            )));
        };
        let mut grpc = tonic::client::Grpc::new(channel.clone())
            .max_decoding_message_size(self.max_response_bytes)
            .max_encoding_message_size(usize::MAX);
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("upstream not reachable: {e}")))?;
        Ok(grpc)
    }

    /// Calls a unary method with raw protobuf bytes. `timeout` is sent as `grpc-timeout`; the
    /// caller enforces it too (tonic reports its own timeouts as Cancelled).
    pub async fn unary(
        &self,
        service: &str,
        path: &str,
        body: Bytes,
        metadata: MetadataMap,
        timeout: Duration,
    ) -> Result<Answer, Status> {
        let path = method_path(path)?;
        let mut grpc = self.client(service).await?;
        let request = request(body, metadata, Some(timeout));
        let response = grpc.unary(request, path, BytesCodec).await?;
        let (metadata, body, _) = response.into_parts();
        Ok(Answer { body, metadata })
    }

    /// Calls a method whose responses stream, with one request message (server streaming)
    /// or a stream of them (bidirectional). Returns the response headers' metadata and the
    /// stream; `timeout`, when given, is sent as `grpc-timeout`.
    pub async fn streaming<S>(
        &self,
        service: &str,
        path: &str,
        requests: S,
        metadata: MetadataMap,
        timeout: Option<Duration>,
    ) -> Result<(MetadataMap, tonic::Streaming<Bytes>), Status>
    where
        S: futures_core::Stream<Item = Option<Bytes>> + Send + 'static,
    {
        let path = method_path(path)?;
        let mut grpc = self.client(service).await?;
        let response = grpc
            .streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await?;
        let (metadata, stream, _) = response.into_parts();
        Ok((metadata, stream))
    }

    /// Calls a client-streaming method: a stream of request messages, one answer.
    pub async fn client_streaming<S>(
        &self,
        service: &str,
        path: &str,
        requests: S,
        metadata: MetadataMap,
        timeout: Option<Duration>,
    ) -> Result<Answer, Status>
    where
        S: futures_core::Stream<Item = Option<Bytes>> + Send + 'static,
    {
        let path = method_path(path)?;
        let mut grpc = self.client(service).await?;
        let response = grpc
            .client_streaming(request(requests, metadata, timeout), path, StreamCodec)
            .await?;
        let (metadata, body, _) = response.into_parts();
        Ok(Answer { body, metadata })
    }
}

fn method_path(path: &str) -> Result<PathAndQuery, Status> {
    PathAndQuery::try_from(path).map_err(|e| Status::internal(format!("bad method path: {e}")))
}

fn request<T>(message: T, metadata: MetadataMap, timeout: Option<Duration>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = metadata;
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}
