//! Support for the integration tests: a real tonic backend built from the v2 test schema, the
//! real gateway given the v1 schema, both on 127.0.0.1:0, an HTTP client, and captured logs.

// Test support: a failed unwrap or expect fails the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use prost::Message as _;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tonic::body::Body as TonicBody;

pub mod library;
pub mod tls;

// The workspace's paths and `proto/` schemas, shared with the transcoding crate's tests.
#[path = "../../crates/transcode/tests/common/mod.rs"]
mod common;
pub use common::{compile_proto, proto_source, workspace};

/// A tonic codec whose messages are protobuf bytes as they are (the raw test backends'):
/// nothing decoded or re-encoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesCodec;

impl tonic::codec::Codec for BytesCodec {
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

impl tonic::codec::Encoder for BytesCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put(dst, item);
        Ok(())
    }
}

impl tonic::codec::Decoder for BytesCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(bytes::Buf::copy_to_bytes(
            src,
            bytes::Buf::remaining(src),
        )))
    }
}

/// The generated v2 test service.
pub mod pb {
    tonic::include_proto!("protogate.test.svc");
}

use pb::test_service_server::{TestService, TestServiceServer};
use pb::{FailRequest, SlowRequest, Thing};

// === the backend ===

/// The v2 backend: a generated tonic service plus a raw-bytes RawEcho.
#[derive(Clone, Default)]
pub struct Backend;

#[tonic::async_trait]
impl TestService for Backend {
    async fn echo(
        &self,
        request: tonic::Request<Thing>,
    ) -> Result<tonic::Response<Thing>, tonic::Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }

    async fn raw_echo(
        &self,
        _: tonic::Request<Thing>,
    ) -> Result<tonic::Response<Thing>, tonic::Status> {
        Err(tonic::Status::internal(
            "RawEcho is served by the raw handler",
        ))
    }

    async fn fail(
        &self,
        request: tonic::Request<FailRequest>,
    ) -> Result<tonic::Response<Thing>, tonic::Status> {
        let req = request.into_inner();
        let code = tonic::Code::from_i32(req.code);
        let mut details = Vec::new();
        if !req.bad_field.is_empty() {
            details.push(any("google.rpc.BadRequest", bad_request(&req.bad_field)));
        }
        if req.unknown_detail {
            // A type the gateway's schema lacks: field 1 = "secret".
            details.push(any(
                "acme.internal.v9.Secret",
                vec![0x0a, 6, b's', b'e', b'c', b'r', b'e', b't'],
            ));
        }
        let mut status = if details.is_empty() {
            tonic::Status::new(code, req.message)
        } else {
            let body = rpc_status(req.code, &req.message, details);
            tonic::Status::with_details(code, req.message, body.into())
        };
        status
            .metadata_mut()
            .insert("x-failure-id", "f-17".parse().expect("ascii"));
        Err(status)
    }

    async fn slow(
        &self,
        request: tonic::Request<SlowRequest>,
    ) -> Result<tonic::Response<Thing>, tonic::Status> {
        let timeout = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let delay = request.into_inner().delay.unwrap_or_default();
        let delay = Duration::new(delay.seconds.max(0) as u64, delay.nanos.max(0) as u32);
        tokio::time::sleep(delay).await;
        Ok(tonic::Response::new(Thing {
            name: timeout,
            ..Default::default()
        }))
    }

    async fn metadata(
        &self,
        request: tonic::Request<Thing>,
    ) -> Result<tonic::Response<Thing>, tonic::Status> {
        let mut thing = Thing::default();
        let mut response_md = tonic::metadata::MetadataMap::new();
        for kv in request.metadata().iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv {
                thing
                    .counts
                    .insert(format!("{}={}", k.as_str(), v.to_str().unwrap_or("?")), 1);
            }
        }
        response_md.insert("x-served-by", "backend-v2".parse().expect("ascii"));
        let mut response = tonic::Response::new(thing);
        *response.metadata_mut() = response_md;
        Ok(response)
    }

    type WatchStream = Pin<
        Box<dyn tonic::codegen::tokio_stream::Stream<Item = Result<Thing, tonic::Status>> + Send>,
    >;

    async fn watch(
        &self,
        request: tonic::Request<Thing>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let t = request.into_inner();
        Ok(tonic::Response::new(Box::pin(
            tonic::codegen::tokio_stream::iter(vec![Ok(t.clone()), Ok(t)]),
        )))
    }
}

fn any(type_name: &str, value: Vec<u8>) -> prost_types::Any {
    prost_types::Any {
        type_url: format!("type.googleapis.com/{type_name}"),
        value,
    }
}

/// google.rpc.BadRequest with one field violation.
fn bad_request(field: &str) -> Vec<u8> {
    let mut violation = Vec::new();
    prost::encoding::string::encode(1, &field.to_owned(), &mut violation);
    prost::encoding::string::encode(2, &"is not acceptable".to_owned(), &mut violation);
    let mut out = Vec::new();
    prost::encoding::bytes::encode(1, &violation, &mut out);
    out
}

fn rpc_status(code: i32, message: &str, details: Vec<prost_types::Any>) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::int32::encode(1, &code, &mut out);
    prost::encoding::string::encode(2, &message.to_owned(), &mut out);
    for d in details {
        prost::encoding::message::encode(3, &d, &mut out);
    }
    out
}

/// Routes RawEcho to a handler that returns the request bytes untouched, everything else to
/// the generated service.
#[derive(Clone)]
struct Dispatch {
    generated: TestServiceServer<Backend>,
}

pub(crate) struct RawEcho;

impl tonic::server::UnaryService<Bytes> for RawEcho {
    type Response = Bytes;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(request.into_inner())))
    }
}

impl tower::Service<Request<TonicBody>> for Dispatch {
    type Response = Response<TonicBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<TonicBody>) -> Self::Future {
        if req.uri().path() == "/protogate.test.svc.TestService/RawEcho" {
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(BytesCodec);
                Ok(grpc.unary(RawEcho, req).await)
            });
        }
        let mut generated = self.generated.clone();
        Box::pin(async move { tower::Service::call(&mut generated, req).await })
    }
}

impl tonic::server::NamedService for Dispatch {
    const NAME: &'static str = "protogate.test.svc.TestService";
}

/// A running in-process server. Dropping it sends the stop signal (the server drains as on
/// shutdown); whatever is left of it goes with the test's runtime, which a test that ends or
/// fails drops, so a failed assertion leaks no server into the next test.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub fn new(
        addr: SocketAddr,
        stop: oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    ) -> Running {
        Running {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server and waits (at most 60 s) for it to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = within("the server to stop", Duration::from_secs(60), task).await;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts the v2 backend on 127.0.0.1:0.
pub async fn start_backend() -> Running {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind backend");
    start_backend_on(listener)
}

/// Starts the v2 backend on a given listener (to bring a backend up on a known port).
pub fn start_backend_on(listener: TcpListener) -> Running {
    serve_backend(listener, TestServiceServer::new(Backend))
}

/// Starts the v2 backend on 127.0.0.1:0 answering in gzip-compressed messages (`grpc-encoding:
/// gzip`), and taking compressed requests only when `accept_gzip`.
pub async fn start_gzip_backend(accept_gzip: bool) -> Running {
    use tonic::codec::CompressionEncoding::Gzip;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind backend");
    let mut service = TestServiceServer::new(Backend).send_compressed(Gzip);
    if accept_gzip {
        service = service.accept_compressed(Gzip);
    }
    serve_backend(listener, service)
}

/// The v2 backend's service, for a server the test builds itself.
fn dispatch() -> Dispatch {
    Dispatch {
        generated: TestServiceServer::new(Backend),
    }
}

fn serve_backend(listener: TcpListener, generated: TestServiceServer<Backend>) -> Running {
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let dispatch = Dispatch { generated };
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(dispatch, incoming, async {
                let _ = stopped.await;
            })
            .await;
    });
    Running {
        addr,
        stop: Some(stop),
        task: Some(task),
    }
}

// === the gateway ===

/// The gateway's schema: proto/test/svc/v1/testsvc.proto, compiled once per test process.
pub fn v1_schema() -> transcode::Schema {
    static SCHEMA: OnceLock<transcode::Schema> = OnceLock::new();
    SCHEMA
        .get_or_init(|| compile_proto("test/svc/v1", "testsvc.proto"))
        .clone()
}

/// Starts the real gateway in-process on 127.0.0.1:0 in front of `upstream`, with the v1
/// test schema.
pub async fn start_gateway(upstream: &str, config: edge::EdgeConfig) -> (Running, Arc<edge::Edge>) {
    start_gateway_with(v1_schema(), upstream, config).await
}

/// Starts the real gateway in-process on 127.0.0.1:0 with `schema` in front of `upstream`.
pub async fn start_gateway_with(
    schema: transcode::Schema,
    upstream: &str,
    config: edge::EdgeConfig,
) -> (Running, Arc<edge::Edge>) {
    let upstreams =
        edge::Upstreams::new(Some(upstream), &[], config.max_response_bytes).expect("upstream URI");
    start_gateway_upstreams(schema, upstreams, config).await
}

/// Starts the real gateway in-process on 127.0.0.1:0 with `schema` in front of `upstreams`.
pub async fn start_gateway_upstreams(
    schema: transcode::Schema,
    upstreams: edge::Upstreams,
    config: edge::EdgeConfig,
) -> (Running, Arc<edge::Edge>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind gateway");
    start_gateway_on(listener, schema, upstreams, config)
}

/// Starts the real gateway in-process on `listener` (whose socket options its connections
/// inherit) with `schema` in front of `upstreams`.
pub fn start_gateway_on(
    listener: TcpListener,
    schema: transcode::Schema,
    upstreams: edge::Upstreams,
    config: edge::EdgeConfig,
) -> (Running, Arc<edge::Edge>) {
    init_logs();
    let addr = listener.local_addr().expect("addr");
    let gateway = Arc::new(edge::Edge::new(schema, upstreams, config).expect("edge"));
    let (stop, stopped) = oneshot::channel::<()>();
    let g = gateway.clone();
    let task = tokio::spawn(async move {
        edge::serve(listener, g, async {
            let _ = stopped.await;
        })
        .await;
    });
    (Running::new(addr, stop, task), gateway)
}

// === the gateway from a configuration file ===

/// The v1 test schema's file under `proto/` (what [`v1_schema`] compiles).
pub const V1_PROTO: &str = "test/svc/v1/testsvc.proto";

/// The library schema's file under `proto/` (what [`library::schema`] compiles).
pub const LIBRARY_PROTO: &str = "test/rest/v1/library.proto";

/// A directory of the test's own under the system's temporary one, removed with what was
/// written in it when dropped: a configuration's files (certificates, keys) go there.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("protogate-tests-{}-{n}-{name}", std::process::id()));
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` in the directory, whole or not at all (a file written
    /// beside it, then renamed over it: a reader never sees half of it); returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        let partial = self.0.join(format!(".{name}.partial"));
        std::fs::write(&partial, contents)
            .and_then(|()| std::fs::rename(&partial, &path))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A configuration file's text read and resolved by the binary's own loader, as `protogate
/// serve --config DIR/FILE` does when no flag is given: `FileConfig::parse` (relative paths
/// under `dir`), then `resolve`. Nothing is opened or bound. Panics with the loader's message
/// when it refuses the text.
pub fn config_from_toml(toml: &str, dir: &Path) -> protogate::config::Resolved {
    try_config_from_toml(toml, dir)
        .unwrap_or_else(|e| panic!("the configuration is refused: {e}\n{toml}"))
}

/// [`config_from_toml`], the loader's refusal returned.
pub fn try_config_from_toml(
    toml: &str,
    dir: &Path,
) -> Result<protogate::config::Resolved, protogate::config::ConfigError> {
    let file = protogate::config::FileConfig::parse(toml, dir)?;
    // No flag: `serve --config FILE` alone (the flags' defaults, as `protogate::check_config`).
    let resolved = protogate::config::resolve(Default::default(), file)?;
    protogate::config::read_keys(&resolved, |path| std::fs::read_to_string(path))?;
    Ok(resolved)
}

/// A test gateway's configuration file: what every one says (`listen` on 127.0.0.1:0,
/// `upstream`, the schema's `.proto` file under `proto/` and its directory as the include),
/// then `toml`, the settings under test (top-level keys first, then tables).
pub fn gateway_toml(upstream: &str, proto: &str, toml: &str) -> String {
    let proto = workspace().join("proto").join(proto);
    let includes = proto.parent().expect("the proto's directory");
    format!(
        "listen = \"127.0.0.1:0\"\nupstream = {upstream:?}\nprotos = [{:?}]\nincludes = [{:?}]\n{toml}",
        proto.display().to_string(),
        includes.display().to_string(),
    )
}

/// Starts the real gateway in-process from a configuration file's text (see
/// [`gateway_toml`]: the test's `toml` names the settings under test), with the v1 test
/// schema, in front of `upstream`; relative paths are under the workspace's root.
pub async fn start_gateway_toml(toml: &str, upstream: &str) -> (Running, Arc<edge::Edge>) {
    start_gateway_toml_in(workspace(), toml, upstream).await
}

/// [`start_gateway_toml`] with relative paths (the TLS files, say) under `dir`.
pub async fn start_gateway_toml_in(
    dir: &Path,
    toml: &str,
    upstream: &str,
) -> (Running, Arc<edge::Edge>) {
    let resolved = config_from_toml(&gateway_toml(upstream, V1_PROTO, toml), dir);
    start_key_fetch(&resolved).await;
    start_resolved(v1_schema(), resolved)
}

/// As `serve` does, the token keys of an `[auth] jwks_url` fetched once (a failure is a
/// warning), then kept fresh by a task of their own.
async fn start_key_fetch(resolved: &protogate::config::Resolved) {
    protogate::jwks::start(resolved)
        .await
        .unwrap_or_else(|e| panic!("the jwks_url fetcher: {e}"));
}

/// [`start_gateway_toml`] with another schema: `schema`, compiled from `proto` (under
/// `proto/`, as [`V1_PROTO`]), which the configuration names.
pub async fn start_gateway_toml_with(
    schema: transcode::Schema,
    proto: &str,
    toml: &str,
    upstream: &str,
) -> (Running, Arc<edge::Edge>) {
    let resolved = config_from_toml(&gateway_toml(upstream, proto, toml), workspace());
    start_key_fetch(&resolved).await;
    start_resolved(schema, resolved)
}

/// The library backend with the real gateway in front of it, the gateway started from a
/// configuration file's text as [`start_gateway_toml`] does, with the library schema.
pub async fn start_library_toml(toml: &str) -> library::Stack {
    let (backend, stats) = library::start().await;
    let upstream = format!("http://{}", backend.addr);
    let (gw, edge) =
        start_gateway_toml_with(library::schema(), LIBRARY_PROTO, toml, &upstream).await;
    library::Stack {
        backend,
        gw,
        stats,
        edge,
    }
}

/// Starts the real gateway in-process from a resolved configuration, wired as `protogate
/// serve` wires it (crates/protogate/src/run.rs): the upstreams from
/// `protogate::build_upstreams` (each `https://` one's TLS from its files), the listener's TLS
/// loaded from its files (`[tls]`: certificate, key, client CA, client_auth) and watched for
/// changes, `listen` bound, all served by `edge::serve_all`. The schema is `schema`, the one
/// the configuration's files name, compiled once per test process. The admin listener,
/// reflection and OpenTelemetry are not started here: a configuration with them is refused.
pub fn start_resolved(
    schema: transcode::Schema,
    mut resolved: protogate::config::Resolved,
) -> (Running, Arc<edge::Edge>) {
    init_logs();
    assert!(
        resolved.admin_listen.is_none() && resolved.reflection.is_none() && resolved.otel.is_none(),
        "start_resolved starts no admin listener, reflection or OpenTelemetry export"
    );
    let upstreams =
        protogate::build_upstreams(&resolved).unwrap_or_else(|e| panic!("the upstreams: {e}"));
    // As `serve`: the certificate loaded now (a bad one is a configuration error), then
    // watched.
    let tls_watch = resolved.tls.as_ref().map(|files| {
        let loaded = files
            .load()
            .unwrap_or_else(|e| panic!("the listener's TLS: {e}"));
        resolved.edge.tls = Some(loaded.tls.clone());
        loaded.watch(files.clone())
    });
    let gateway = Arc::new(
        edge::Edge::new(schema, upstreams, resolved.edge.clone())
            .unwrap_or_else(|e| panic!("the gateway: {e}")),
    );
    let listeners = resolved.listen.bind().expect("bind gateway");
    assert_eq!(listeners.len(), 1, "listen is one address");
    let addr = listeners[0].local_addr().expect("addr");
    let live = edge::Live::new(gateway.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        edge::serve_all(listeners, live, async {
            let _ = stopped.await;
        })
        .await;
        if let Some(watch) = tls_watch {
            watch.abort();
        }
    });
    (Running::new(addr, stop, task), gateway)
}

// === the client ===

/// A gRPC call of `path` over HTTP/2 with `headers`, its one message empty, read whole
/// (`grpc-status` in the head of a trailers-only answer, else in the trailers).
pub async fn grpc_call(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    let headers: Vec<(&str, &str)> = [("te", "trailers")]
        .into_iter()
        .chain(headers.iter().copied())
        .collect();
    Http::h2()
        .post(
            addr,
            path,
            "application/grpc",
            &headers,
            vec![0u8, 0, 0, 0, 0],
        )
        .await
}

/// The hex SHA-256 of `key`, as `sha256sum` prints it (an `[[auth.api_keys]]` entry's).
pub fn sha256_hex(key: &str) -> String {
    ring::digest::digest(&ring::digest::SHA256, key.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The answer's trailers, if it had any (HTTP/2, or chunked HTTP/1.1 asked with
    /// `te: trailers`).
    pub trailers: Option<HeaderMap>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the client sends: a whole body or a stream (whose error breaks the request off, a
/// reset over HTTP/2), boxed.
type ClientBody = UnsyncBoxBody<Bytes, BoxError>;

/// The one HTTP client of the tests: HTTP/1.1 keep-alive, or HTTP/2 with prior knowledge. Every
/// wait is under a deadline (the answer's head 30 s, its body 60 s: a long stream on a loaded
/// machine), which only a failing test ever reaches.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, ClientBody>,
}

impl Http {
    pub fn h1() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub fn h2() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build_http(),
        }
    }

    /// HTTP/2 with the protocol's initial 64 KiB windows (hyper's client opens 2 MiB a stream
    /// and 5 MiB the connection), so the gateway soon feels a body the test does not read.
    pub fn h2_small_windows() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .http2_initial_stream_window_size(65_535)
                .http2_initial_connection_window_size(65_535)
                .build_http(),
        }
    }

    /// Sends `req` (any body, a stream too) and returns the answer's head; the body is left for
    /// the caller to read.
    pub async fn open<B>(&self, req: Request<B>) -> Response<Incoming>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let req = req.map(|b| b.map_err(Into::into).boxed_unsync());
        within(
            "the answer's head",
            Duration::from_secs(30),
            self.client.request(req),
        )
        .await
        .expect("request sent")
    }

    /// Sends `req` and reads the whole answer.
    pub async fn send<B>(&self, req: Request<B>) -> Answer
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = self.open(req).await.into_parts();
        let body = within("the body", Duration::from_secs(60), body.collect())
            .await
            .expect("body");
        Answer {
            status: parts.status,
            headers: parts.headers,
            trailers: body.trailers().cloned(),
            body: body.to_bytes(),
        }
    }

    /// `method` `path` at `authority` (`127.0.0.1:port`) with `headers` and `body`, read whole.
    pub async fn request(
        &self,
        method: &str,
        authority: impl std::fmt::Display,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{authority}{path}"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req.body(Full::new(body.into())).expect("request"))
            .await
    }

    /// POSTs `body` to `path` with the given Content-Type and extra headers.
    pub async fn post(
        &self,
        addr: SocketAddr,
        path: &str,
        content_type: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let headers: Vec<(&str, &str)> = [("content-type", content_type)]
            .into_iter()
            .chain(headers.iter().copied())
            .collect();
        self.request("POST", addr, path, &headers, body).await
    }

    pub async fn get(&self, addr: SocketAddr, path: &str) -> Answer {
        self.request("GET", addr, path, &[], Bytes::new()).await
    }

    /// The gateway's metrics, as text.
    pub async fn metrics(&self, addr: SocketAddr) -> String {
        String::from_utf8_lossy(&self.get(addr, "/metrics").await.body).into_owned()
    }
}

// === formats ===

/// Converts between formats with the gateway's (v1) schema.
pub fn convert(
    message: &str,
    from: transcode::Format,
    to: transcode::Format,
    input: &[u8],
) -> Vec<u8> {
    convert_with(&v1_schema(), message, from, to, input)
}

/// Converts between formats with `schema`.
pub fn convert_with(
    schema: &transcode::Schema,
    message: &str,
    from: transcode::Format,
    to: transcode::Format,
    input: &[u8],
) -> Vec<u8> {
    let desc = schema
        .message(message)
        .unwrap_or_else(|| panic!("no message {message}"));
    let mut out = Vec::new();
    schema
        .convert(
            &desc,
            from,
            to,
            input,
            &mut out,
            &transcode::Options::default(),
        )
        .unwrap_or_else(|e| panic!("converting {message}: {e}"));
    out
}

/// Encodes a v2 message.
pub fn encode<M: prost::Message>(m: &M) -> Vec<u8> {
    m.encode_to_vec()
}

/// Decodes a v2 Thing.
pub fn decode_thing(bytes: &[u8]) -> Thing {
    Thing::decode(bytes).expect("a Thing")
}

// === logs ===

/// Everything logged by the gateway in this test process.
static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the log capture (the gateway helpers do it themselves).
fn init_logs() {
    let buf = LOGS
        .get_or_init(|| Arc::new(Mutex::new(Vec::new())))
        .clone();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "protogate=debug,edge=debug,info",
        ))
        .with_ansi(false)
        .with_writer(move || LogWriter(buf.clone()))
        .try_init();
}

/// The log lines captured so far that contain `needle`.
pub fn log_lines(needle: &str) -> Vec<String> {
    let Some(buf) = LOGS.get() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&buf.lock().expect("logs").clone()).into_owned();
    text.lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// A port on 127.0.0.1 held for the whole test with nothing listening on it: a socket bound
/// to it but not listening, so a connection to it is refused, and no other socket (another
/// test's server, an outgoing connection's local port) can take it until this is dropped or
/// starts listening. Binding a port, closing it and using its number later races with both.
pub struct ReservedPort {
    socket: TcpSocket,
    pub addr: SocketAddr,
}

impl ReservedPort {
    pub fn new() -> ReservedPort {
        let socket = TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let addr = socket.local_addr().expect("addr");
        ReservedPort { socket, addr }
    }

    /// Starts listening on the port (to bring a server up on it).
    pub fn listen(self) -> TcpListener {
        self.socket.listen(1024).expect("listen")
    }
}

impl Default for ReservedPort {
    fn default() -> ReservedPort {
        ReservedPort::new()
    }
}

/// The value of a metric sample line `name{labels} value` in the /metrics text, 0 if absent.
pub fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name_and_labels)
                .and_then(|rest| rest.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// Polls `check` until it returns `Some`, every 10 ms, for at most `limit`; panics naming `what`
/// when the deadline passes. Tests wait on observed state with this, never on a fixed sleep.
pub async fn eventually<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    eventually_async(what, limit, || std::future::ready(check())).await
}

/// [`eventually`] with a check that awaits (an HTTP call, say).
pub async fn eventually_async<T, F: Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads a raw connection until the gateway closes it (end of stream or reset), for at most
/// `limit`; what it sent first.
pub async fn read_to_close(stream: &mut tokio::net::TcpStream, limit: Duration) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    within("the gateway to close the connection", limit, async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
}

/// Awaits `f` for at most `limit`; panics naming `what` if it takes longer, so a test that
/// would hang fails instead.
pub async fn within<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

// === replicas: backends that can die ===

/// A v2 backend replica on a runtime and thread of its own, so that it can die as a process
/// does: [`Replica::kill`] drops its runtime with every connection in it, without a GOAWAY.
/// It counts the calls that reached it and serves `grpc.health.v1.Health` for
/// `protogate.test.svc.TestService`, SERVING until told otherwise.
pub struct Replica {
    pub addr: SocketAddr,
    /// Calls of the test service that reached this replica.
    pub calls: Arc<std::sync::atomic::AtomicUsize>,
    health: tonic_health::server::HealthReporter,
    kill: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replica {
    /// A replica on `addr` (port 0 for any; a dead replica's address to bring it back).
    pub fn start(addr: SocketAddr) -> Replica {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (kill, killed) = oneshot::channel::<()>();
        let (ready, started) = std::sync::mpsc::channel();
        let counted = calls.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a replica's runtime");
            runtime.block_on(async move {
                let listener = TcpListener::bind(addr).await.expect("bind replica");
                let (health, health_service) = tonic_health::server::health_reporter();
                health.set_serving::<TestServiceServer<Backend>>().await;
                let service = TestServiceServer::with_interceptor(Backend, move |r| {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(r)
                });
                let _ = ready.send((listener.local_addr().expect("addr"), health));
                let incoming = tonic::transport::server::TcpIncoming::from(listener);
                let server = tonic::transport::Server::builder()
                    .add_service(health_service)
                    .add_service(service)
                    .serve_with_incoming(incoming);
                tokio::select! {
                    _ = server => {}
                    _ = killed => {}
                }
            });
            // The runtime goes with every task in it: connections close without a goodbye.
            drop(runtime);
        });
        let (addr, health) = started
            .recv_timeout(Duration::from_secs(30))
            .expect("the replica to start");
        Replica {
            addr,
            calls,
            health,
            kill: Some(kill),
            thread: Some(thread),
        }
    }

    /// Kills the replica: its listener and connections close at once.
    pub fn kill(mut self) -> SocketAddr {
        self.stop();
        self.addr
    }

    fn stop(&mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Answers its health checks with SERVING (`true`) or NOT_SERVING.
    pub async fn set_serving(&self, serving: bool) {
        if serving {
            self.health
                .set_serving::<TestServiceServer<Backend>>()
                .await;
        } else {
            self.health
                .set_not_serving::<TestServiceServer<Backend>>()
                .await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop();
    }
}
