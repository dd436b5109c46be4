//! The schema from the upstreams' gRPC server reflection, through the binary: a
//! backend serving tonic-reflection (v1, or only v1alpha) and no file given to the gateway;
//! JSON, MessagePack, protobuf and a REST rule served from what reflection gave; the backend
//! restarted with a v2 schema (a new field, a new method, a new service) under sequential
//! calls, every answer checked, picked up with no restart — by a request for the new method,
//! or by `schema_refresh` — and requests for unknown paths asking the backend at most once
//! per interval; a refresh that fails keeps the schema; two upstreams giving one file with
//! different contents stop the start naming them; an upstream whose reflection does not
//! answer at start is waited for (/healthz 200, /readyz and requests 503 saying why) and
//! its schema served once it answers; `protogate check --reflect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use support::{PROTO_DIR, Proc, Scratch, eventually, exchange, metric, run, stderr};
use tonic::body::Body;

const ECHO: &str = "/protogate.test.reflect.Evolving/Echo";
const ECHO_AGAIN: &str = "/protogate.test.reflect.Evolving/EchoAgain";
const JSON: (&str, &str) = ("content-type", "application/json");

/// proto/test/reflect/{version}, compiled: the backend's schema, as its reflection serves it.
fn schema(version: &str) -> transcode::Schema {
    let dirs = [
        format!("{PROTO_DIR}/test/reflect/{version}"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../transcode/proto").to_owned(),
    ];
    transcode::Schema::compile(&["evolving.proto".to_owned()], move |name| {
        dirs.iter()
            .find_map(|dir| std::fs::read_to_string(format!("{dir}/{name}")).ok())
    })
    .unwrap()
}

/// A backend serving the methods of proto/test/reflect/{version} (each answers its request
/// as it came, bytes unchanged; any other method is UNIMPLEMENTED) and server reflection of
/// that schema: v1, or only v1alpha. Runs on a runtime of its own.
struct Backend {
    addr: SocketAddr,
    /// Reflection streams opened (one per question the gateway asks).
    questions: Arc<AtomicUsize>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    rt: tokio::runtime::Runtime,
}

#[derive(Clone, Copy, PartialEq)]
enum Reflection {
    V1,
    V1Alpha,
}

impl Backend {
    fn start(version: &str, reflection: Reflection) -> Backend {
        Backend::on(
            std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
            version,
            reflection,
        )
    }

    fn on(listener: std::net::TcpListener, version: &str, reflection: Reflection) -> Backend {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let schema = schema(version);
        // The reflection service keeps its own copy of the files.
        let set: &'static [u8] = Box::leak(schema.to_descriptor_set().into_boxed_slice());
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(set);
        let questions = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = {
            let _entered = rt.enter();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            let shutdown = async {
                let _ = stopped.await;
            };
            match reflection {
                Reflection::V1 => rt.spawn(serve(
                    Dispatch {
                        reflection: builder.build_v1().unwrap(),
                        prefix: "/grpc.reflection.v1.",
                        schema: Arc::new(schema),
                        questions: questions.clone(),
                    },
                    incoming,
                    shutdown,
                )),
                Reflection::V1Alpha => rt.spawn(serve(
                    Dispatch {
                        reflection: builder.build_v1alpha().unwrap(),
                        prefix: "/grpc.reflection.v1alpha.",
                        schema: Arc::new(schema),
                        questions: questions.clone(),
                    },
                    incoming,
                    shutdown,
                )),
            }
        };
        Backend {
            addr,
            questions,
            stop: Some(stop),
            task: Some(task),
            rt,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn questions(&self) -> usize {
        self.questions.load(Ordering::SeqCst)
    }

    /// Stops accepting, lets the connections it has finish (a GOAWAY to each), and waits
    /// until they have.
    fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let task = self.task.take().unwrap();
        self.rt
            .block_on(async { tokio::time::timeout(support::DEADLINE, task).await })
            .expect("the backend stops")
            .unwrap();
    }
}

async fn serve<R>(
    dispatch: Dispatch<R>,
    incoming: tonic::transport::server::TcpIncoming,
    shutdown: impl Future<Output = ()>,
) where
    R: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    R::Future: Send + 'static,
{
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(dispatch, incoming, shutdown)
        .await
        .unwrap();
}

#[derive(Clone)]
struct Dispatch<R> {
    reflection: R,
    prefix: &'static str,
    schema: Arc<transcode::Schema>,
    questions: Arc<AtomicUsize>,
}

impl<R> tonic::server::NamedService for Dispatch<R> {
    const NAME: &'static str = "protogate.test.reflect.Evolving";
}

impl<R> tower::Service<http::Request<Body>> for Dispatch<R>
where
    R: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    R::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let path = req.uri().path().to_owned();
        if path.starts_with(self.prefix) {
            self.questions.fetch_add(1, Ordering::SeqCst);
            let mut reflection = self.reflection.clone();
            return Box::pin(async move { reflection.call(req).await });
        }
        if self.schema.method(&path).is_some() {
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(Raw)
                    .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
                Ok(grpc.unary(Echo, req).await)
            });
        }
        Box::pin(async move { Ok(tonic::Status::unimplemented(path).into_http()) })
    }
}

/// Answers a request with its own bytes.
struct Echo;

impl tonic::server::UnaryService<Bytes> for Echo {
    type Response = Bytes;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(request.into_inner())))
    }
}

/// Messages as their bytes.
#[derive(Clone, Copy, Default)]
struct Raw;

impl tonic::codec::Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Raw {
        Raw
    }

    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl tonic::codec::Encoder for Raw {
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

impl tonic::codec::Decoder for Raw {
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

/// `Item { id = 1, note = 3 }` in protobuf.
fn item(id: &str, note: &str) -> Vec<u8> {
    let mut out = vec![0x0a, id.len() as u8];
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&[0x1a, note.len() as u8]);
    out.extend_from_slice(note.as_bytes());
    out
}

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(body)))
}

fn gateway(scratch: &Scratch, config: &str) -> Proc {
    let config = scratch.file("gw.toml", config);
    Proc::spawn(&["serve", "--config", &config])
}

/// Waits until the gateway renders v2's new field, brought by a `schema_refresh` (no request
/// named a method the schema lacked).
fn v2_by_the_refresh_timer(gw: &mut Proc) {
    let addr = gw.addr();
    let rendered = eventually("the v2 schema", || {
        let (status, _, body) = exchange(
            addr,
            "POST",
            ECHO,
            &[
                ("content-type", "application/x-protobuf"),
                ("accept", "application/json"),
            ],
            &item("c", "new"),
        );
        (status == 200 && json(&body).get("note").is_some()).then(|| json(&body))
    });
    assert_eq!(
        rendered,
        Some(serde_json::json!({"id": "c", "note": "new"}))
    );
    let line = gw.wait_for_line("configuration reloaded");
    assert!(line.contains("schema_refresh"), "{line}");
}

#[test]
fn a_schema_from_reflection_serves_every_format_and_follows_the_backend_to_v2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let v1 = Backend::on(port.try_clone().unwrap(), "v1", Reflection::V1);
    let scratch = Scratch::new("reflect-v1");
    // A long interval: only a request for an unknown method makes the gateway ask again.
    // Calls go compressed; the reflection's questions (tonic-reflection takes no gzip) not.
    let mut gw = gateway(
        &scratch,
        &format!(
            "listen = \"127.0.0.1:0\"\nupstream = \"{}\"\nschema_source = \"reflection\"\nschema_refresh = \"1h\"\nupstream_compression = \"gzip\"\n",
            v1.url()
        ),
    );
    let addr = gw.addr();

    // JSON (the Timestamp from google/protobuf, an import reflection handed out by name).
    let (status, _, body) = exchange(
        addr,
        "POST",
        ECHO,
        &[JSON],
        br#"{"id": "a", "at": "2026-12-01T10:00:00Z"}"#,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        json(&body),
        serde_json::json!({"id": "a", "at": "2026-12-01T10:00:00Z"})
    );
    // MessagePack both ways: {"id": "a"}.
    let msgpack = [0x81, 0xa2, b'i', b'd', 0xa1, b'a'];
    let (status, head, body) = exchange(
        addr,
        "POST",
        ECHO,
        &[("content-type", "application/msgpack")],
        &msgpack,
    );
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: application/msgpack"), "{head}");
    assert_eq!(body, msgpack);
    // Protobuf byte for byte, the field v1 lacks included.
    let bytes = item("a", "kept");
    let (status, _, body) = exchange(
        addr,
        "POST",
        ECHO,
        &[("content-type", "application/x-protobuf")],
        &bytes,
    );
    assert_eq!((status, body), (200, bytes));
    // The REST rule came along in the file's options.
    let (status, _, body) = exchange(addr, "GET", "/v1/items/abc", &[], b"");
    assert_eq!(
        (status, json(&body)),
        (200, serde_json::json!({"id": "abc"}))
    );
    let info = metric(addr, "protogate_schema_info{").unwrap();
    assert!(info.contains("source=\"reflection\""), "{info}");
    assert!(v1.questions() >= 3, "list, a service, an import");

    // Sequential calls across the backend's restart: every one answers 200 with its id, first
    // without the field v1 does not know, then with it, never going back.
    let stop = Arc::new(AtomicBool::new(false));
    let seen_note = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, seen_note) = (stop.clone(), seen_note.clone());
        std::thread::spawn(move || {
            let mut calls = 0;
            while !stop.load(Ordering::SeqCst) {
                let id = format!("k{calls}");
                let (status, head, body) = exchange(
                    addr,
                    "POST",
                    ECHO,
                    &[
                        ("content-type", "application/x-protobuf"),
                        ("accept", "application/json"),
                    ],
                    &item(&id, "new"),
                );
                calls += 1;
                assert_eq!(status, 200, "call {calls}: {head}");
                let answer = json(&body);
                assert_eq!(answer["id"], id.as_str(), "call {calls}: {answer}");
                match answer.get("note") {
                    Some(note) => {
                        assert_eq!(note, "new", "call {calls}");
                        seen_note.store(true, Ordering::SeqCst);
                    }
                    None => assert!(
                        !seen_note.load(Ordering::SeqCst),
                        "call {calls}: the new field went away again"
                    ),
                }
            }
            calls
        })
    };
    // The restart: v2 takes the port's connections, v1 finishes its own and goes.
    let v2 = Backend::on(port, "v2", Reflection::V1);
    v1.stop();

    // The new method: unknown (404) until the request for it has made the gateway ask.
    let answered = eventually("the new method to be served", || {
        let (status, _, body) = exchange(addr, "POST", ECHO_AGAIN, &[JSON], br#"{"id": "b"}"#);
        match status {
            200 => Some(json(&body)),
            404 => None,
            other => panic!("{other}: {}", String::from_utf8_lossy(&body)),
        }
    });
    assert_eq!(answered, Some(serde_json::json!({"id": "b"})));
    let (status, _, _) = exchange(
        addr,
        "POST",
        "/protogate.test.reflect.Sidecar/Echo",
        &[JSON],
        b"{}",
    );
    assert_eq!(status, 200);
    assert!(
        eventually("the new field to be rendered", || seen_note
            .load(Ordering::SeqCst)
            .then_some(()))
        .is_some()
    );
    stop.store(true, Ordering::SeqCst);
    let calls = load.join().expect("every call answered right");
    assert!(calls > 0);
    let line = gw.wait_for_line("configuration reloaded");
    assert!(line.contains("a request named an unknown method"), "{line}");
    assert!(
        line.contains("EchoAgain") && line.contains("Sidecar"),
        "the methods added are listed: {line}"
    );

    // Requests for unknown paths do not make the gateway ask again within the interval: 30
    // of them, then a SIGHUP (which asks once); the backend was asked exactly twice as much
    // as for the one refresh so far.
    let once = v2.questions();
    for _ in 0..30 {
        let (status, _, _) = exchange(addr, "POST", "/nope.Service/Nothing", &[JSON], b"{}");
        assert_eq!(status, 404);
    }
    gw.signal("-HUP");
    eventually("the SIGHUP's reload", || {
        (gw.log()
            .iter()
            .filter(|l| l.contains("configuration reloaded"))
            .count()
            == 2)
            .then_some(())
    })
    .expect("a second reload");
    assert_eq!(v2.questions(), 2 * once);
    v2.stop();
}

#[test]
fn v1alpha_is_asked_when_v1_is_missing_and_a_failed_refresh_keeps_the_schema() {
    let v1 = Backend::start("v1", Reflection::V1Alpha);
    let addr_v1 = v1.addr;
    let scratch = Scratch::new("reflect-alpha");
    let mut gw = gateway(
        &scratch,
        &format!(
            "listen = \"127.0.0.1:0\"\nupstream = \"{}\"\nschema_source = \"reflection\"\nschema_refresh = \"200ms\"\n",
            v1.url()
        ),
    );
    let addr = gw.addr();
    let (status, _, body) = exchange(addr, "POST", ECHO, &[JSON], br#"{"id": "a"}"#);
    assert_eq!((status, json(&body)), (200, serde_json::json!({"id": "a"})));
    let digest = metric(addr, "protogate_schema_info{").unwrap();

    // The backend goes: the refreshes fail, are counted, and the schema stays.
    v1.stop();
    // (The series is there at 0 from the start.)
    eventually("a failed refresh", || {
        metric(addr, "protogate_schema_reloads_total{result=\"failed\"}")
            .filter(|line| !line.ends_with(" 0"))
    })
    .expect("a failed refresh is counted");
    assert_eq!(metric(addr, "protogate_schema_info{").unwrap(), digest);
    let (_, _, body) = exchange(addr, "GET", "/admin/schema", &[], b"");
    assert!(
        String::from_utf8_lossy(&body).contains("Evolving"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let line = gw.wait_for_line("reload failed");
    assert!(
        line.contains(&addr_v1.to_string()),
        "names the upstream: {line}"
    );

    // v2 comes up on the same address: the next refresh serves it, no request needed.
    let v2 = Backend::on(
        std::net::TcpListener::bind(addr_v1).unwrap(),
        "v2",
        Reflection::V1Alpha,
    );
    v2_by_the_refresh_timer(&mut gw);
    v2.stop();
}

/// A config file that breaks is reported once, when it is read; the refreshes after it ask
/// the reflection with the configuration in force (before, each read the broken file again,
/// failed and logged the same error every `schema_refresh`, and no new schema came).
#[test]
fn a_broken_config_file_is_reported_once_and_the_schema_still_refreshes() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let v1 = Backend::on(port.try_clone().unwrap(), "v1", Reflection::V1);
    let scratch = Scratch::new("reflect-broken");
    let text = format!(
        "listen = \"127.0.0.1:0\"\nupstream = \"{}\"\nschema_source = \"reflection\"\nschema_refresh = \"200ms\"\n",
        v1.url()
    );
    let mut gw = gateway(&scratch, &text);
    let addr = gw.addr();
    let (status, _, body) = exchange(addr, "POST", ECHO, &[JSON], br#"{"id": "a"}"#);
    assert_eq!((status, json(&body)), (200, serde_json::json!({"id": "a"})));

    scratch.file("gw.toml", &format!("{text}schema_refresh = \"twice\"\n"));
    let line = gw.wait_for_line("reload failed");
    assert!(line.contains("a watched file changed"), "{line}");
    assert!(line.contains("duplicate key"), "{line}");

    // v2 takes the port: a refresh (the timer's: no request names a method v1 lacked)
    // brings its schema while the file stays broken, and the file's error is not reported
    // again.
    let v2 = Backend::on(port, "v2", Reflection::V1);
    v1.stop();
    v2_by_the_refresh_timer(&mut gw);
    let reported = gw
        .log()
        .iter()
        .filter(|l| l.contains("duplicate key"))
        .count();
    assert_eq!(reported, 1, "{:#?}", gw.log());
    v2.stop();
}

#[test]
fn conflicting_upstreams_stop_the_start() {
    let v1 = Backend::start("v1", Reflection::V1);
    let v2 = Backend::start("v2", Reflection::V1);
    let scratch = Scratch::new("reflect-conflict");
    // Evolving from v1, Sidecar from v2: evolving.proto differs between them.
    let config = scratch.file(
        "gw.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nupstream = \"{}\"\nschema_source = \"reflection\"\n[services.\"protogate.test.reflect.Sidecar\"]\nupstream = \"{}\"\n",
            v1.url(),
            v2.url()
        ),
    );
    let out = run(&["serve", "--config", &config], b"");
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(
        text.contains(&v1.url()) && text.contains(&v2.url()) && text.contains("evolving.proto"),
        "{text}"
    );

    // One service's schema from its own upstream's reflection, no file given.
    let config = scratch.file(
        "one.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\n[services.\"protogate.test.reflect.Sidecar\"]\nupstream = \"{}\"\nreflect = true\n",
            v2.url()
        ),
    );
    let mut gw = Proc::spawn(&["serve", "--config", &config]);
    let addr = gw.addr();
    let (status, _, body) = exchange(
        addr,
        "POST",
        "/protogate.test.reflect.Sidecar/Echo",
        &[JSON],
        br#"{"id": "s", "note": "v2"}"#,
    );
    assert_eq!(
        (status, json(&body)),
        (200, serde_json::json!({"id": "s", "note": "v2"}))
    );
    // Evolving comes along in Sidecar's file, but no upstream serves it: 503 naming it.
    let (status, _, body) = exchange(addr, "POST", ECHO, &[JSON], b"{}");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("protogate.test.reflect.Evolving"), "{body}");
    drop(gw);
    v1.stop();
    v2.stop();
}

#[test]
fn an_upstream_whose_reflection_does_not_answer_at_start_is_waited_for() {
    // A port where nothing listens yet: the backend comes later on the same address.
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = reserved.local_addr().unwrap();
    drop(reserved);
    let url = format!("http://{backend_addr}");
    let mut gw = Proc::spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &url,
        "--reflect",
    ]);
    let waiting = gw.wait_for_line("no schema yet");
    assert!(waiting.contains(&url), "{waiting}");
    let addr = gw.addr();
    let (status, _, _) = exchange(addr, "GET", "/healthz", &[], b"");
    assert_eq!(status, 200, "alive while it waits");
    let (status, _, body) = exchange(addr, "GET", "/readyz", &[], b"");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with("not ready: no schema yet") && body.contains(&url),
        "{body}"
    );
    let (status, _, body) = exchange(addr, "POST", ECHO, &[JSON], br#"{"id": "w"}"#);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("no schema") && body.contains(ECHO), "{body}");
    // Asked again with backoff, without a failed reload counted for each try.
    gw.wait_for_line("asked again");
    let (_, _, metrics) = exchange(addr, "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics
            .lines()
            .any(|l| l == r#"protogate_schema_reloads_total{result="failed"} 0"#),
        "{metrics}"
    );

    // The backend starts: within the backoff the schema is had and served.
    let backend = Backend::on(
        std::net::TcpListener::bind(backend_addr).unwrap(),
        "v1",
        Reflection::V1,
    );
    let served = eventually("the schema once the reflection answers", || {
        let (status, _, body) = exchange(addr, "POST", ECHO, &[JSON], br#"{"id": "w"}"#);
        (status == 200).then(|| json(&body))
    });
    assert_eq!(served, Some(serde_json::json!({"id": "w"})));
    let (status, _, body) = exchange(addr, "GET", "/readyz", &[], b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let line = gw.wait_for_line("configuration reloaded");
    assert!(line.contains("schema_refresh"), "{line}");
    drop(gw);
    backend.stop();
}

#[test]
fn check_reflect_prints_the_routes_the_upstream_gives() {
    let v1 = Backend::start("v1", Reflection::V1);
    let out = run(&["check", "--upstream", &v1.url(), "--reflect"], b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.starts_with("ok: 1 methods, 1 REST routes (schema from reflection)"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "GET",
                    "/v1/items/{id}",
                    "protogate.test.reflect.Evolving/Echo",
                    "-",
                    "-",
                    "http"
                ]),
        "{text}"
    );
    let url = v1.url();
    v1.stop();
    let out = run(&["check", "--upstream", &url, "--reflect"], b"");
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{text}");
    assert!(text.contains(&url) && text.contains("reflection"), "{text}");
}
