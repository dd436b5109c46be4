//! soak: the fault and soak test of `make soak`. Not part of `make test`.
//!
//! ```text
//! soak                          the driver (settings from the environment, below)
//! soak backend --listen ADDR    the upstream it starts, kills and restarts (not run by hand)
//! ```
//!
//! The driver starts the release gateway (`target/release/protogate serve`, or `$PROTOGATE_BIN`)
//! with the library test schema (proto/test/rest/v1/library.proto: unary Echo, server-streaming
//! WatchBooks, client-streaming ImportBooks, bidirectional Chat) in front of an upstream process
//! of its own (this binary with `backend`, the tests' tonic library service served by hyper
//! directly), all on 127.0.0.1: the gateway on port 0, the upstream on a port outside the
//! ephemeral range (no outgoing connection can take it while the upstream is down). Then, for
//! `SOAK_SECS`:
//!
//! - `SOAK_CLIENTS` clients (half HTTP/1.1, half HTTP/2) call in a loop: every call shape, request
//!   and response formats JSON, MessagePack and protobuf (every stream framing), one call in ten
//!   marked to hang (metadata `x-soak-hang`: the upstream never answers it; the gateway's
//!   `upstream_timeout` of 2 s, or the client's `grpc-timeout` of a stream, makes it a 504);
//! - the upstream is sent GOAWAY on every connection (a graceful drain, as a restarting server
//!   does; it keeps listening) a quarter into every period (`SOAK_KILL_EVERY` s) and SIGKILLed
//!   and restarted on the same port three quarters into it.
//!
//! Every answer is checked: a 200 against what its request must produce (decoded and compared
//! with the messages sent, protobuf passed through byte for byte); any other answer must be a 503
//! (code 14) or 504 (code 4) with a google.rpc.Status body in the negotiated format and a
//! matching `grpc-status`; a stream that had begun may end in a status record of code 14 or 4
//! (and the same `grpc-status` trailer). Anything else is printed with its request, its times
//! and the faults during it, and counted. Every request asks for trailers (`TE: trailers`); a
//! stream answered over HTTP/1.1 without them is judged by its body alone (a delimited protobuf
//! status record told from a message by its content) and counted under a check of its own.
//!
//! The gateway's RSS (VmRSS) and open file descriptors are measured quiescent (the clients gone,
//! `protogate_requests_in_flight` 0, the fd count steady) after the warm-up (`SOAK_WARMUP` s,
//! the load paused for it) and after the load. The run fails on a wrong answer, a failure other
//! than those above, RSS at the end above 110 % of the warm-up's, more fds at the end than after
//! the warm-up plus [`FD_ALLOWANCE`], an HTTP/1.1 stream without its trailers, a 503 (or a
//! stream's 14) with no upstream kill or GOAWAY near it ([`FAULT_WINDOW`]: a call the upstream
//! never answered wants 504), a gateway that dies, logs a panic or does not stop cleanly on
//! SIGTERM. The summary (Markdown) is printed and written to `target/soak/summary.md`, beside
//! the gateway's log, the upstream's log and every failure (`failures.log`).
//!
//! Environment: `SOAK_SECS` (1200), `SOAK_WARMUP` and `SOAK_KILL_EVERY` (60 each, a quarter of
//! `SOAK_SECS` when that is shorter), `SOAK_CLIENTS` (16), `SOAK_SEED` (the clock),
//! `PROTOGATE_BIN`. Every process it starts dies with it: the gateway by `setpriv --pdeathsig`
//! where available and by a kill when the driver ends (also on Ctrl-C or SIGTERM), the upstream
//! when its stdin (a pipe from the driver) closes.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use protogate_tests::library::Library;
use protogate_tests::library::pb::library::v1::library_server::LibraryServer;
use protogate_tests::library::pb::library::v1::{
    Book, Filter, ListBooksRequest, ListBooksResponse, Range, WatchRequest,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tonic::body::Body as TonicBody;
use transcode::stream::{Framing, InFraming, Splitter};
use transcode::{Format, Schema};

/// Metadata that makes the upstream never answer a call (`grpc-metadata-x-soak-hang` at the
/// gateway, which forwards it as `x-soak-hang`).
const HANG: &str = "x-soak-hang";
/// The gateway's `upstream_timeout` in the soak's configuration; streams send it as their own
/// `grpc-timeout` (only the client's deadline applies to a stream).
const UPSTREAM_TIMEOUT_SECS: u64 = 2;
/// How long a client waits for a whole answer before it counts as a failure (the gateway
/// answers every call within its deadline, so only a gateway that hangs reaches it).
const CLIENT_DEADLINE: Duration = Duration::from_secs(30);
/// File descriptors the gateway may hold at the end beyond those after the warm-up: its two
/// upstream connections (the unary calls' h2 connection and tonic's streaming channel), which
/// a kill may have closed just before one measurement and not the other.
const FD_ALLOWANCE: usize = 2;
/// RSS at the end may be at most this much above RSS after the warm-up.
const RSS_GROWTH: f64 = 0.10;
/// A 503 (or a stream's code 14) must come with an upstream fault: a kill or GOAWAY during the
/// call or at most this long before it (a drained connection lives until its hung calls time
/// out, 2 s). Otherwise it is counted as unexplained: a call the upstream never answered wants
/// 504, one it answered 200.
const FAULT_WINDOW: Duration = Duration::from_secs(3);
/// How many failures are printed as they happen (all go to failures.log).
const PRINTED_FAILURES: usize = 30;

/// Set when the driver is stopped by a signal: the clients stop, and what they see while the
/// processes are taken down is not counted.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("backend") => backend::main(&args[1..]),
        None => driver_main(),
        Some(other) => {
            eprintln!("soak: unknown argument {other}\nusage: soak | soak backend --listen ADDR");
            ExitCode::from(64)
        }
    }
}

// === the upstream ===

mod backend {
    use super::*;

    /// Serves the library service on `--listen` until its stdin closes. A line `goaway` on
    /// stdin starts a graceful shutdown (GOAWAY, then the drain) of every open connection; new
    /// connections are still accepted. Prints `listening on ADDR` when it accepts connections
    /// and `goaway sent to N connections` after each `goaway`.
    pub fn main(args: &[String]) -> ExitCode {
        let listen = match args {
            [flag, addr] if flag == "--listen" => match addr.parse::<SocketAddr>() {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("soak backend: --listen {addr}: {e}");
                    return ExitCode::from(64);
                }
            },
            _ => {
                eprintln!("usage: soak backend --listen ADDR");
                return ExitCode::from(64);
            }
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("soak backend: runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        runtime.block_on(serve(listen))
    }

    async fn serve(listen: SocketAddr) -> ExitCode {
        // The port was the killed process's a moment ago: bound again as soon as it is free.
        let mut last_error = String::new();
        let bound = poll_until(Duration::from_secs(15), || {
            let bound = TcpSocket::new_v4().and_then(|s| {
                s.set_reuseaddr(true)?;
                s.bind(listen)?;
                s.listen(1024)
            });
            let got = bound.map_err(|e| last_error = e.to_string()).ok();
            async move { Ok(got) }
        })
        .await;
        let Ok(Some(listener)) = bound else {
            eprintln!("soak backend: binding {listen}: {last_error}");
            return ExitCode::FAILURE;
        };
        say(&format!("listening on {listen}"));
        let (goaway_tx, goaway_rx) = watch::channel(0u64);
        let live = Arc::new(AtomicUsize::new(0));
        let counted = live.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(tokio::io::stdin()).lines();
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) if line.trim() == "goaway" => {
                        let n = counted.load(Ordering::SeqCst);
                        goaway_tx.send_modify(|g| *g += 1);
                        say(&format!("goaway sent to {n} connections"));
                    }
                    Ok(Some(_)) => {}
                    // The driver is gone: so is its upstream.
                    Ok(None) | Err(_) => std::process::exit(0),
                }
            }
        });
        let library = LibraryServer::new(Library::default());
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let mut goaway = goaway_rx.clone();
            goaway.borrow_and_update();
            tokio::spawn(connection(stream, library.clone(), goaway, live.clone()));
        }
    }

    fn say(line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    /// One HTTP/2 connection, shut down gracefully (GOAWAY, in-flight calls finish) when a
    /// `goaway` comes.
    async fn connection(
        stream: TcpStream,
        library: LibraryServer<Library>,
        mut goaway: watch::Receiver<u64>,
        live: Arc<AtomicUsize>,
    ) {
        let _ = stream.set_nodelay(true);
        live.fetch_add(1, Ordering::SeqCst);
        let service = hyper::service::service_fn(move |req| answer(library.clone(), req));
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(stream), service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => {}
            Ok(()) = goaway.changed() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
        live.fetch_sub(1, Ordering::SeqCst);
    }

    /// A call: never answered when it carries [`HANG`] (dropped when the gateway resets it),
    /// Echo answered with its request bytes, the rest by the tests' library service.
    async fn answer(
        mut library: LibraryServer<Library>,
        req: Request<Incoming>,
    ) -> Result<Response<TonicBody>, Infallible> {
        if req.headers().contains_key(HANG) {
            std::future::pending::<()>().await;
        }
        if req.uri().path() == "/library.v1.Library/Echo" {
            let mut grpc = tonic::server::Grpc::new(protogate_tests::BytesCodec);
            return Ok(grpc.unary(RawEcho, req).await);
        }
        tower::Service::call(&mut library, req).await
    }

    struct RawEcho;

    impl tonic::server::UnaryService<Bytes> for RawEcho {
        type Response = Bytes;
        type Future = std::future::Ready<Result<tonic::Response<Bytes>, tonic::Status>>;

        fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
            std::future::ready(Ok(tonic::Response::new(request.into_inner())))
        }
    }
}

// === settings ===

struct Settings {
    secs: u64,
    warmup: u64,
    period: u64,
    clients: usize,
    seed: u64,
    gateway_bin: PathBuf,
    out: PathBuf,
}

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().map_err(|e| format!("{name}={v:?}: {e}")),
        _ => Ok(default),
    }
}

fn settings() -> Result<Settings, String> {
    let secs = env_u64("SOAK_SECS", 1200)?;
    if secs < 20 {
        return Err(format!("SOAK_SECS={secs}: at least 20"));
    }
    let quarter = (secs / 4).min(60);
    let warmup = env_u64("SOAK_WARMUP", quarter)?;
    let period = env_u64("SOAK_KILL_EVERY", quarter)?;
    if warmup == 0 || warmup >= secs || period < 4 {
        return Err("SOAK_WARMUP must be within SOAK_SECS, SOAK_KILL_EVERY at least 4".into());
    }
    let clients = env_u64("SOAK_CLIENTS", 16)?.clamp(1, 256) as usize;
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs());
    let seed = env_u64("SOAK_SEED", clock)?;
    let root = protogate_tests::workspace();
    let gateway_bin = std::env::var_os("PROTOGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/protogate"));
    Ok(Settings {
        secs,
        warmup,
        period,
        clients,
        seed,
        gateway_bin,
        out: root.join("target/soak"),
    })
}

// === a small random generator (splitmix64) ===

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    /// Text of `len` characters, some of them outside ASCII.
    fn text(&mut self, len: usize) -> String {
        const CHARS: [char; 16] = [
            'a', 'b', 'c', 'x', 'y', 'z', '0', '7', ' ', '-', 'é', 'ß', 'Ж', '✓', '雪', '🦀',
        ];
        (0..len).map(|_| CHARS[self.below(16) as usize]).collect()
    }

    /// Mostly short lengths, one in ten large (to `big`).
    fn size(&mut self, small: u64, big: u64) -> usize {
        if self.one_in(10) {
            (big / 4 + self.below(big)) as usize
        } else {
            self.below(small) as usize
        }
    }
}

// === calls ===

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Unary,
    ServerStream,
    ClientStream,
    Bidi,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Unary => "unary (Echo)",
            Kind::ServerStream => "server stream (WatchBooks)",
            Kind::ClientStream => "client stream (ImportBooks)",
            Kind::Bidi => "bidi stream (Chat)",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Fmt {
    Json,
    Msgpack,
    Protobuf,
}

impl Fmt {
    fn pick(rng: &mut Rng) -> Fmt {
        [Fmt::Json, Fmt::Msgpack, Fmt::Protobuf][rng.below(3) as usize]
    }

    fn format(self) -> Format {
        match self {
            Fmt::Json => Format::Json,
            Fmt::Msgpack => Format::Msgpack,
            Fmt::Protobuf => Format::Protobuf,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Fmt::Json => "json",
            Fmt::Msgpack => "msgpack",
            Fmt::Protobuf => "protobuf",
        }
    }

    fn media(self) -> &'static str {
        match self {
            Fmt::Json => transcode::media::JSON[0],
            Fmt::Msgpack => transcode::media::MSGPACK[0],
            Fmt::Protobuf => transcode::media::PROTOBUF[0],
        }
    }

    /// A response stream framing of this format.
    fn out_framing(self, rng: &mut Rng) -> Framing {
        match self {
            Fmt::Json => [Framing::Ndjson, Framing::JsonArray, Framing::Sse][rng.below(3) as usize],
            Fmt::Msgpack => Framing::Msgpack,
            Fmt::Protobuf => Framing::Delimited,
        }
    }

    /// A request stream framing of this format.
    fn in_framing(self, rng: &mut Rng) -> InFraming {
        match self {
            Fmt::Json if rng.one_in(2) => InFraming::Ndjson,
            Fmt::Json => InFraming::JsonArray,
            Fmt::Msgpack => InFraming::Msgpack,
            Fmt::Protobuf => InFraming::Delimited,
        }
    }
}

fn in_framing_type(f: InFraming) -> &'static str {
    match f {
        InFraming::Ndjson => transcode::media::NDJSON[0],
        InFraming::JsonArray => transcode::media::JSON[0],
        InFraming::Msgpack => transcode::media::MSGPACK[0],
        InFraming::Delimited => transcode::media::PROTOBUF[0],
        InFraming::ConnectJson => transcode::media::CONNECT_JSON[0],
        InFraming::ConnectProto => transcode::media::CONNECT_PROTO[0],
    }
}

fn in_framing_name(f: InFraming) -> &'static str {
    match f {
        InFraming::Ndjson => "ndjson",
        InFraming::JsonArray => "json array",
        InFraming::Msgpack => "msgpack",
        InFraming::Delimited => "delimited protobuf",
        InFraming::ConnectJson => "connect+json",
        InFraming::ConnectProto => "connect+proto",
    }
}

/// What a call's 200 answer must hold.
enum Expect {
    /// Echo: the message sent (and, protobuf both ways, the very bytes).
    Echo {
        message: Box<ListBooksRequest>,
        sent: Bytes,
    },
    /// A response stream: these books, in order.
    Books(Vec<Book>),
    /// ImportBooks: the books sent and their count.
    Imported(ListBooksResponse),
}

struct Call {
    tag: String,
    kind: Kind,
    h2: bool,
    req: Fmt,
    resp: Fmt,
    in_framing: Option<InFraming>,
    out_framing: Option<Framing>,
    hang: bool,
    path: &'static str,
    content_type: &'static str,
    accept: &'static str,
    /// The body, in the pieces it is sent in.
    body: Vec<Bytes>,
    expect: Expect,
}

impl Call {
    fn describe(&self) -> String {
        let mut d = format!(
            "{} {} over {} {}",
            self.tag,
            self.kind.name(),
            if self.h2 { "HTTP/2" } else { "HTTP/1.1" },
            self.path
        );
        match self.in_framing {
            Some(f) => d.push_str(&format!(" request {}", in_framing_name(f))),
            None => d.push_str(&format!(" request {}", self.req.name())),
        }
        match self.out_framing {
            Some(f) => d.push_str(&format!(" response {}", f.as_str())),
            None => d.push_str(&format!(" response {}", self.resp.name())),
        }
        let size: usize = self.body.iter().map(Bytes::len).sum();
        d.push_str(&format!(" ({size} bytes in {} pieces)", self.body.len()));
        if self.hang {
            d.push_str(" [hang]");
        }
        d
    }

    fn protocol(&self) -> &'static str {
        if self.h2 { "HTTP/2" } else { "HTTP/1.1" }
    }

    fn formats(&self) -> String {
        format!("{} → {}", self.req.name(), self.resp.name())
    }
}

fn convert(
    schema: &Schema,
    message: &str,
    from: Format,
    to: Format,
    input: &[u8],
) -> Result<Vec<u8>, String> {
    if from == to {
        return Ok(input.to_vec());
    }
    let desc = schema
        .message(message)
        .ok_or_else(|| format!("no message {message} in the schema"))?;
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
        .map_err(|e| format!("{message} as {from:?} does not convert to {to:?}: {e}"))?;
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Request messages (each already in the framing's format) framed as one body.
fn frame_requests(framing: InFraming, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    match framing {
        InFraming::Ndjson => {
            for m in messages {
                out.extend_from_slice(m);
                out.push(b'\n');
            }
        }
        InFraming::JsonArray => {
            out.push(b'[');
            for (i, m) in messages.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(m);
            }
            out.push(b']');
        }
        InFraming::Msgpack => messages.iter().for_each(|m| out.extend_from_slice(m)),
        InFraming::Delimited => {
            for m in messages {
                put_varint(&mut out, m.len() as u64);
                out.extend_from_slice(m);
            }
        }
        InFraming::ConnectJson | InFraming::ConnectProto => {
            for m in messages {
                transcode::stream::envelope(0, m, &mut out);
            }
        }
    }
    out
}

/// `body` cut at up to two random places (a request stream arrives in pieces).
fn pieces(rng: &mut Rng, body: Vec<u8>) -> Vec<Bytes> {
    let body = Bytes::from(body);
    if body.len() < 2 {
        return vec![body];
    }
    let mut cuts: Vec<usize> = (0..rng.below(3))
        .map(|_| 1 + rng.below(body.len() as u64 - 1) as usize)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts {
        out.push(body.slice(at..c));
        at = c;
    }
    out.push(body.slice(at..));
    out
}

fn timestamp(rng: &mut Rng) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: rng.below(253_402_300_799) as i64,
        nanos: rng.below(1_000_000_000) as i32,
    }
}

/// An Echo request using most of ListBooksRequest's field kinds, unique to `tag`.
fn echo_message(rng: &mut Rng, tag: &str) -> ListBooksRequest {
    let token = rng.size(48, 32 << 10);
    ListBooksRequest {
        parent: format!("shelves/{tag}"),
        page_size: rng.below(1000) as i32,
        page_token: rng.text(token),
        genres: (0..rng.below(4)).map(|_| rng.below(3) as i32).collect(),
        published_after: rng.one_in(2).then(|| timestamp(rng)),
        max_age: rng.one_in(2).then(|| prost_types::Duration {
            seconds: rng.below(1_000_000) as i64,
            nanos: rng.below(1_000_000_000) as i32,
        }),
        min_pages: rng.one_in(2).then(|| rng.next() as i64),
        include_drafts: rng.one_in(2),
        ids: (0..rng.below(6))
            .map(|i| match i {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => rng.next() as i64,
            })
            .collect(),
        filter: rng.one_in(2).then(|| Filter {
            author: rng.text(8),
            pages: Some(Range {
                min: rng.below(100) as i64,
                max: 100 + rng.below(1000) as i64,
            }),
        }),
        cursor: (0..rng.below(40)).map(|_| rng.next() as u8).collect(),
        min_rating: rng.below(1_000_000) as f64 / 7.0,
        read_mask: rng.one_in(2).then(|| prost_types::FieldMask {
            paths: vec!["title".into(), "page_size".into(), "filter.author".into()],
        }),
        labels: (0..rng.below(4))
            .map(|i| (format!("k{i}-{}", rng.text(3)), rng.text(6)))
            .collect::<HashMap<_, _>>(),
        big: if rng.one_in(3) { u64::MAX } else { rng.next() },
        note: rng.one_in(2).then(|| rng.text(5)),
    }
}

fn random_book(rng: &mut Rng, tag: &str, i: usize) -> Book {
    let title = rng.size(40, 8 << 10);
    Book {
        name: format!("shelves/{tag}/books/{i}"),
        title: format!("t{i} {}", rng.text(title)),
        author: {
            let n = rng.below(12) as usize;
            rng.text(n)
        },
        pages: rng.next() as i64,
        genre: rng.below(3) as i32,
        tags: (0..rng.below(4)).map(|_| rng.text(5)).collect(),
        published: rng.one_in(2).then(|| timestamp(rng)),
        labels: (0..rng.below(3))
            .map(|i| (format!("l{i}"), rng.text(4)))
            .collect::<HashMap<_, _>>(),
    }
}

fn encode_as(schema: &Schema, message: &str, fmt: Fmt, pb: &[u8]) -> Result<Vec<u8>, String> {
    convert(schema, message, Format::Protobuf, fmt.format(), pb)
}

/// The next call of a client: its shape, formats, body and expected answer.
fn pick(rng: &mut Rng, schema: &Schema, tag: String, h2: bool) -> Result<Call, String> {
    let kind = match (rng.below(10), h2) {
        (0..=3, _) => Kind::Unary,
        (4..=5, _) | (6, false) => Kind::ServerStream,
        (6..=7, _) | (8..=9, false) => Kind::ClientStream,
        _ => Kind::Bidi,
    };
    let shape = Shape {
        kind,
        h2,
        req: Fmt::pick(rng),
        resp: Fmt::pick(rng),
        hang: rng.one_in(10),
    };
    build(rng, schema, tag, shape)
}

/// What [`build`] makes a call of.
#[derive(Clone, Copy)]
struct Shape {
    kind: Kind,
    h2: bool,
    req: Fmt,
    resp: Fmt,
    hang: bool,
}

/// A call of `shape` with random content (and framings of its formats).
fn build(rng: &mut Rng, schema: &Schema, tag: String, shape: Shape) -> Result<Call, String> {
    let Shape {
        kind,
        h2,
        req,
        resp,
        hang,
    } = shape;
    let mut call = Call {
        tag: tag.clone(),
        kind,
        h2,
        req,
        resp,
        in_framing: None,
        out_framing: None,
        hang,
        path: "",
        content_type: req.media(),
        accept: resp.media(),
        body: Vec::new(),
        expect: Expect::Books(Vec::new()),
    };
    match kind {
        Kind::Unary => {
            let message = echo_message(rng, &tag);
            let sent = Bytes::from(message.encode_to_vec());
            let body = encode_as(schema, "library.v1.ListBooksRequest", req, &sent)?;
            // One in four by its REST route (body "*"), the rest by the gRPC path.
            call.path = if rng.one_in(4) {
                "/v1/echo"
            } else {
                "/library.v1.Library/Echo"
            };
            call.body = vec![Bytes::from(body)];
            call.expect = Expect::Echo {
                message: Box::new(message),
                sent,
            };
        }
        Kind::ServerStream => {
            let parent = format!("shelves/{tag}");
            let count = 1 + rng.below(12) as i32;
            let title_bytes = rng.size(100, 12 << 10) as i32;
            let watch = WatchRequest {
                parent: parent.clone(),
                count,
                interval: rng.one_in(2).then(|| prost_types::Duration {
                    seconds: 0,
                    nanos: (1 + rng.below(30) as i32) * 1_000_000,
                }),
                fail_after: 0,
                title_bytes,
            };
            let body = encode_as(
                schema,
                "library.v1.WatchRequest",
                req,
                &watch.encode_to_vec(),
            )?;
            let books = (0..count)
                .map(|i| Book {
                    name: format!("{parent}/books/{i}"),
                    title: "x".repeat(title_bytes as usize),
                    pages: i64::from(i),
                    ..Book::default()
                })
                .collect();
            let framing = resp.out_framing(rng);
            call.path = "/library.v1.Library/WatchBooks";
            call.out_framing = Some(framing);
            call.accept = framing.content_type();
            call.body = vec![Bytes::from(body)];
            call.expect = Expect::Books(books);
        }
        Kind::ClientStream | Kind::Bidi => {
            let books: Vec<Book> = (0..1 + rng.below(8) as usize)
                .map(|i| random_book(rng, &tag, i))
                .collect();
            let messages = books
                .iter()
                .map(|b| encode_as(schema, "library.v1.Book", req, &b.encode_to_vec()))
                .collect::<Result<Vec<_>, _>>()?;
            let framing = req.in_framing(rng);
            call.in_framing = Some(framing);
            call.content_type = in_framing_type(framing);
            call.body = pieces(rng, frame_requests(framing, &messages));
            if kind == Kind::ClientStream {
                call.path = "/library.v1.Library/ImportBooks";
                call.expect = Expect::Imported(ListBooksResponse {
                    next_page_token: books.len().to_string(),
                    books,
                });
            } else {
                let framing = resp.out_framing(rng);
                call.path = "/library.v1.Library/Chat";
                call.out_framing = Some(framing);
                call.accept = framing.content_type();
                call.expect = Expect::Books(
                    books
                        .into_iter()
                        .map(|b| Book {
                            title: b.title.to_uppercase(),
                            ..b
                        })
                        .collect(),
                );
            }
        }
    }
    Ok(call)
}

// === answers ===

#[derive(Debug)]
enum Outcome {
    /// 200, and the body is what the request must produce.
    Ok,
    /// 503 with a Status of code 14 (its message).
    Unavailable(String),
    /// 504 with a Status of code 4.
    Deadline,
    /// 200, the messages so far right, then a status record of code 14 (its message).
    StreamUnavailable(String),
    /// 200, the messages so far right, then a status record of code 4.
    StreamDeadline,
    /// A 200 whose body is not what the request must produce.
    Wrong(String),
    /// Anything else: another status, a Status body that does not read, no answer.
    Failed(String),
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if body.len() > 300 {
        format!("{text:?}… ({} bytes)", body.len())
    } else {
        format!("{text:?}")
    }
}

fn short<T: std::fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    if s.len() > 400 {
        let mut end = 400;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// A google.rpc.Status in `format`: its code and message.
fn read_status(schema: &Schema, format: Format, bytes: &[u8]) -> Result<(i64, String), String> {
    let json = convert(schema, "google.rpc.Status", format, Format::Json, bytes)
        .map_err(|e| format!("status record does not read: {e}; {}", snippet(bytes)))?;
    let v: serde_json::Value = serde_json::from_slice(&json)
        .map_err(|e| format!("status record is not JSON: {e}; {}", snippet(bytes)))?;
    let code = v
        .get("code")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    let message = v
        .get("message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_owned();
    Ok((code, message))
}

/// A 503 or 504: a Status of `want` in the call's response format, and `grpc-status` the same.
fn check_error(
    schema: &Schema,
    call: &Call,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    want: i64,
) -> Result<String, String> {
    let ct = header(headers, "content-type");
    if !ct.starts_with(call.resp.media()) {
        return Err(format!(
            "{status} with Content-Type {ct:?}, not {}: {}",
            call.resp.media(),
            snippet(body)
        ));
    }
    let (code, message) =
        read_status(schema, call.resp.format(), body).map_err(|e| format!("{status}: {e}"))?;
    if code != want || message.is_empty() {
        return Err(format!(
            "{status} with a Status of code {code} ({message:?}); want code {want}"
        ));
    }
    if header(headers, "grpc-status") != want.to_string() {
        return Err(format!(
            "{status} with grpc-status {:?}; want {want}",
            header(headers, "grpc-status")
        ));
    }
    Ok(message)
}

/// A unary-shaped answer (Echo, ImportBooks) decoded as `message` from the response format.
fn unary_answer<M: prost::Message + Default>(
    schema: &Schema,
    call: &Call,
    message: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<M, Outcome> {
    let ct = header(headers, "content-type");
    if !ct.starts_with(call.resp.media()) {
        return Err(Outcome::Wrong(format!(
            "200 with Content-Type {ct:?}, not {}",
            call.resp.media()
        )));
    }
    let pb = convert(schema, message, call.resp.format(), Format::Protobuf, body).map_err(|e| {
        Outcome::Wrong(format!(
            "200 whose body does not read: {e}; {}",
            snippet(body)
        ))
    })?;
    M::decode(pb.as_slice())
        .map_err(|e| Outcome::Wrong(format!("200 whose body is not a {message}: {e}")))
}

/// A response stream's body split into its messages and its final status record, if any.
/// A stream's messages and its final status record (each as framed, in the framing's format).
type Split = (Vec<Vec<u8>>, Option<Vec<u8>>);

fn split_stream(framing: Framing, body: &[u8], failed: bool) -> Result<Split, String> {
    if framing == Framing::Sse {
        let text = std::str::from_utf8(body).map_err(|e| format!("SSE body is not UTF-8: {e}"))?;
        let mut messages = Vec::new();
        let mut record = None;
        if !text.is_empty() && !text.ends_with("\n\n") {
            return Err(format!("SSE body ends inside an event: {}", snippet(body)));
        }
        for event in text.split("\n\n").filter(|e| !e.is_empty()) {
            if record.is_some() {
                return Err("an SSE event after the error event".into());
            }
            let mut error = false;
            let mut data = None;
            for line in event.lines() {
                if line == "event: error" {
                    error = true;
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(d.as_bytes().to_vec());
                } else {
                    return Err(format!("unexpected SSE line {line:?}"));
                }
            }
            let data = data.ok_or("an SSE event without data")?;
            if error {
                record = Some(data);
            } else {
                messages.push(data);
            }
        }
        return Ok((messages, record));
    }
    let in_framing = match framing {
        Framing::Ndjson => InFraming::Ndjson,
        Framing::JsonArray => InFraming::JsonArray,
        Framing::Msgpack => InFraming::Msgpack,
        _ => InFraming::Delimited,
    };
    let mut splitter = Splitter::new(in_framing, 64 << 20);
    splitter.push(body);
    splitter.end();
    let mut messages = Vec::new();
    while let Some(m) = splitter
        .next_message()
        .map_err(|e| format!("body does not split: {e}"))?
    {
        messages.push(m);
    }
    splitter
        .finish()
        .map_err(|e| format!("body does not end cleanly: {e}"))?;
    let is_record = |m: &[u8]| -> Option<Vec<u8>> {
        match framing {
            Framing::Msgpack => m.strip_prefix(b"\x81\xa6@error").map(<[u8]>::to_vec),
            Framing::Delimited => None,
            _ => {
                let v: serde_json::Value = serde_json::from_slice(m).ok()?;
                let obj = v.as_object()?;
                (obj.len() == 1)
                    .then(|| obj.get("@error"))
                    .flatten()
                    .and_then(|s| serde_json::to_vec(s).ok())
            }
        }
    };
    let mut record = None;
    if framing == Framing::Delimited {
        if failed {
            record = Some(
                messages
                    .pop()
                    .ok_or("grpc-status says failed, but no status record")?,
            );
        }
    } else if let Some(last) = messages.last()
        && let Some(r) = is_record(last)
    {
        record = Some(r);
        messages.pop();
    }
    if messages.iter().any(|m| is_record(m).is_some()) {
        return Err("a status record before the last message".into());
    }
    Ok((messages, record))
}

fn check_stream(
    shared: &Shared,
    call: &Call,
    headers: &HeaderMap,
    body: &[u8],
    trailers: Option<&HeaderMap>,
    expected: &[Book],
) -> Outcome {
    let schema = &shared.schema;
    let Some(framing) = call.out_framing else {
        return Outcome::Failed("a stream call without a framing".into());
    };
    let ct = header(headers, "content-type");
    if !ct.starts_with(framing.content_type()) {
        return Outcome::Wrong(format!(
            "200 with Content-Type {ct:?}, not {}",
            framing.content_type()
        ));
    }
    // The status from the trailers. HTTP/1.1 answers come without them (counted, and a check
    // of their own): the body is judged alone, as a client without trailers must.
    let grpc_status: Option<i64> = match trailers {
        Some(t) => match header(t, "grpc-status").parse() {
            Ok(s) => Some(s),
            Err(_) => return Outcome::Failed(format!("trailers without a grpc-status: {t:?}")),
        },
        None if call.h2 => {
            return Outcome::Failed(format!(
                "an HTTP/2 stream without trailers: {}",
                snippet(body)
            ));
        }
        None => {
            shared.h1_no_trailers.fetch_add(1, Ordering::SeqCst);
            None
        }
    };
    let (mut messages, mut record) =
        match split_stream(framing, body, grpc_status.is_some_and(|s| s != 0)) {
            Ok(r) => r,
            Err(e) => return Outcome::Wrong(format!("{e}; body {}", snippet(body))),
        };
    let book = |m: &[u8]| {
        convert(
            schema,
            "library.v1.Book",
            framing.format(),
            Format::Protobuf,
            m,
        )
        .and_then(|pb| Book::decode(pb.as_slice()).map_err(|e| e.to_string()))
    };
    // Delimited protobuf without the trailer: a last message that is not the book expected
    // there but reads as a google.rpc.Status is the status record (a Book's field 1 is a
    // string, a Status's a varint: one never reads as the other).
    if framing == Framing::Delimited
        && grpc_status.is_none()
        && let Some(last) = messages.last()
    {
        let i = messages.len() - 1;
        let is_expected = expected
            .get(i)
            .is_some_and(|want| book(last).is_ok_and(|b| b == *want));
        if !is_expected
            && read_status(schema, Format::Protobuf, last).is_ok_and(|(code, _)| code != 0)
        {
            record = messages.pop();
        }
    }
    if messages.len() > expected.len() {
        return Outcome::Wrong(format!(
            "{} messages, {} expected",
            messages.len(),
            expected.len()
        ));
    }
    for (i, (m, want)) in messages.iter().zip(expected).enumerate() {
        match book(m) {
            Ok(b) if b == *want => {}
            Ok(b) => {
                return Outcome::Wrong(format!(
                    "message {i} is {}, want {}",
                    short(&b),
                    short(want)
                ));
            }
            Err(e) => {
                return Outcome::Wrong(format!("message {i} does not read: {e}; {}", snippet(m)));
            }
        }
    }
    let n = messages.len();
    let Some(record) = record else {
        if let Some(s) = grpc_status.filter(|s| *s != 0) {
            return Outcome::Failed(format!("grpc-status {s} without a status record"));
        }
        if n != expected.len() {
            return Outcome::Wrong(format!(
                "a clean end after {n} of {} messages",
                expected.len()
            ));
        }
        return Outcome::Ok;
    };
    let (code, message) = match read_status(schema, framing.format(), &record) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(e),
    };
    if let Some(s) = grpc_status
        && code != s
    {
        return Outcome::Failed(format!(
            "status record code {code}, grpc-status trailer {s}"
        ));
    }
    match code {
        14 => Outcome::StreamUnavailable(message),
        4 => Outcome::StreamDeadline,
        _ => Outcome::Failed(format!(
            "stream ended after {n} messages with code {code}: {message:?}"
        )),
    }
}

/// What an answer means for `call`.
fn judge(
    shared: &Shared,
    call: &Call,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    trailers: Option<&HeaderMap>,
) -> Outcome {
    let schema = &shared.schema;
    match status.as_u16() {
        200 if call.hang => Outcome::Wrong(format!(
            "200 for a call the upstream never answered: {}",
            snippet(body)
        )),
        200 => match &call.expect {
            Expect::Echo { message, sent } => {
                if call.req == Fmt::Protobuf && call.resp == Fmt::Protobuf && body != sent.as_ref()
                {
                    return Outcome::Wrong(format!(
                        "protobuf passed through changed: {} bytes sent, {} back",
                        sent.len(),
                        body.len()
                    ));
                }
                if call.resp == Fmt::Json {
                    let parent = serde_json::from_slice::<serde_json::Value>(body)
                        .ok()
                        .and_then(|v| v.get("parent").and_then(|p| p.as_str().map(str::to_owned)));
                    if parent.as_deref() != Some(message.parent.as_str()) {
                        return Outcome::Wrong(format!(
                            "JSON answer's parent is {parent:?}, want {:?}",
                            message.parent
                        ));
                    }
                }
                match unary_answer::<ListBooksRequest>(
                    schema,
                    call,
                    "library.v1.ListBooksRequest",
                    headers,
                    body,
                ) {
                    Ok(got) if got == **message => Outcome::Ok,
                    Ok(got) => {
                        Outcome::Wrong(format!("answer {}, want {}", short(&got), short(message)))
                    }
                    Err(o) => o,
                }
            }
            Expect::Imported(want) => match unary_answer::<ListBooksResponse>(
                schema,
                call,
                "library.v1.ListBooksResponse",
                headers,
                body,
            ) {
                Ok(got) if got == *want => Outcome::Ok,
                Ok(got) => Outcome::Wrong(format!("answer {}, want {}", short(&got), short(want))),
                Err(o) => o,
            },
            Expect::Books(books) => check_stream(shared, call, headers, body, trailers, books),
        },
        503 => match check_error(schema, call, status, headers, body, 14) {
            Ok(message) => Outcome::Unavailable(message),
            Err(e) => Outcome::Failed(e),
        },
        504 => match check_error(schema, call, status, headers, body, 4) {
            Ok(_) => Outcome::Deadline,
            Err(e) => Outcome::Failed(e),
        },
        _ => Outcome::Failed(format!(
            "HTTP {status} grpc-status {:?}: {}",
            header(headers, "grpc-status"),
            snippet(body)
        )),
    }
}

// === the client ===

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ClientBody = UnsyncBoxBody<Bytes, BoxError>;
type HttpClient = Client<HttpConnector, ClientBody>;

fn client(h2: bool) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build(connector)
}

/// Sends `call` and reads its whole answer.
async fn send(
    http: &HttpClient,
    gateway: SocketAddr,
    call: &Call,
) -> Result<(StatusCode, HeaderMap, Bytes, Option<HeaderMap>), String> {
    let body: ClientBody = if call.body.len() == 1 {
        Full::new(call.body[0].clone())
            .map_err(|e| match e {})
            .boxed_unsync()
    } else {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = call
            .body
            .iter()
            .map(|b| Ok(Frame::data(b.clone())))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync()
    };
    let mut req = Request::builder()
        .method("POST")
        .uri(format!("http://{gateway}{}", call.path))
        .header("content-type", call.content_type)
        .header("accept", call.accept)
        .header("te", "trailers")
        .header("user-agent", "protogate-soak");
    if call.kind != Kind::Unary {
        req = req.header("grpc-timeout", format!("{UPSTREAM_TIMEOUT_SECS}S"));
    }
    if call.hang {
        req = req.header(format!("grpc-metadata-{HANG}"), "1");
    }
    let req = req
        .body(body)
        .map_err(|e| format!("building the request: {e}"))?;
    let answer = http
        .request(req)
        .await
        .map_err(|e| format!("no answer: {e:?}"))?;
    let (parts, body) = answer.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("{} answer's body broke off: {e:?}", parts.status))?;
    let trailers = body.trailers().cloned();
    Ok((parts.status, parts.headers, body.to_bytes(), trailers))
}

// === the tally ===

#[derive(Clone, Copy, Default)]
struct Tally {
    calls: u64,
    ok: u64,
    unavailable: u64,
    deadline: u64,
    stream_unavailable: u64,
    stream_deadline: u64,
    wrong: u64,
    failed: u64,
}

impl Tally {
    fn add(&mut self, o: &Outcome) {
        self.calls += 1;
        match o {
            Outcome::Ok => self.ok += 1,
            Outcome::Unavailable(_) => self.unavailable += 1,
            Outcome::Deadline => self.deadline += 1,
            Outcome::StreamUnavailable(_) => self.stream_unavailable += 1,
            Outcome::StreamDeadline => self.stream_deadline += 1,
            Outcome::Wrong(_) => self.wrong += 1,
            Outcome::Failed(_) => self.failed += 1,
        }
    }

    fn row(&self) -> String {
        format!(
            "{} | {} | {} | {} | {} | {} | {} | {}",
            self.calls,
            self.ok,
            self.unavailable,
            self.deadline,
            self.stream_unavailable,
            self.stream_deadline,
            self.wrong,
            self.failed
        )
    }
}

const TALLY_HEAD: &str = "calls | 200 verified | 503 | 504 | 200, then stream error 14 | 200, then stream error 4 | wrong answers | other failures";

#[derive(Default)]
struct Stats {
    total: Tally,
    by_kind: BTreeMap<(Kind, &'static str), Tally>,
    by_format: BTreeMap<String, Tally>,
    hung: Tally,
    answered: Tally,
    /// 503s (and streams' 14s) with no upstream fault near them, of calls the upstream hung
    /// and of calls it answered.
    unexplained_hung: u64,
    unexplained_answered: u64,
    /// Failures of the driver or the set-up (not of a call).
    errors: Vec<String>,
}

struct Shared {
    gateway: SocketAddr,
    schema: Schema,
    stats: Mutex<Stats>,
    failures: Mutex<std::fs::File>,
    printed: AtomicUsize,
    abort: AtomicBool,
    kills: AtomicU64,
    goaways: AtomicU64,
    goaway_connections: Arc<AtomicU64>,
    restart_max_ms: AtomicU64,
    /// HTTP/1.1 stream answers that came without the `grpc-status` trailer they asked for.
    h1_no_trailers: AtomicU64,
    /// Every fault, when it happened (failures name those during their call).
    events: Mutex<Vec<(Instant, String)>>,
    /// Time zero of the run's clock.
    t0: Instant,
}

impl Shared {
    fn new(
        gateway: SocketAddr,
        schema: Schema,
        failures: std::fs::File,
        goaway_connections: Arc<AtomicU64>,
    ) -> Shared {
        Shared {
            gateway,
            schema,
            stats: Mutex::new(Stats::default()),
            failures: Mutex::new(failures),
            printed: AtomicUsize::new(0),
            abort: AtomicBool::new(false),
            kills: AtomicU64::new(0),
            goaways: AtomicU64::new(0),
            goaway_connections,
            restart_max_ms: AtomicU64::new(0),
            h1_no_trailers: AtomicU64::new(0),
            events: Mutex::new(Vec::new()),
            t0: Instant::now(),
        }
    }

    fn event(&self, what: String) {
        if let Ok(mut e) = self.events.lock() {
            e.push((Instant::now(), what));
        }
    }

    fn at(&self, t: Instant) -> String {
        format!("t={:.3} s", t.duration_since(self.t0).as_secs_f64())
    }

    /// The faults between `began` (less a little) and now, for a failure's line.
    fn faults_during(&self, began: Instant) -> String {
        let Ok(events) = self.events.lock() else {
            return String::new();
        };
        let from = began
            .checked_sub(Duration::from_millis(50))
            .unwrap_or(began);
        let during: Vec<String> = events
            .iter()
            .filter(|(t, _)| *t >= from)
            .map(|(t, what)| format!("{what} at {}", self.at(*t)))
            .collect();
        let last = events.last().map_or("none yet".to_owned(), |(t, what)| {
            format!("{what} at {}", self.at(*t))
        });
        if during.is_empty() {
            format!("no fault during it (last: {last})")
        } else {
            format!("during it: {}", during.join(", "))
        }
    }

    /// Whether a fault happened during the call that began at `began`, or just before it.
    fn fault_near(&self, began: Instant) -> bool {
        let from = began.checked_sub(FAULT_WINDOW).unwrap_or(began);
        self.events
            .lock()
            .is_ok_and(|e| e.iter().any(|(t, _)| *t >= from))
    }

    fn record(&self, call: &Call, outcome: &Outcome, began: Instant) {
        if STOPPING.load(Ordering::SeqCst) {
            return;
        }
        let unexplained = matches!(
            outcome,
            Outcome::Unavailable(_) | Outcome::StreamUnavailable(_)
        ) && !self.fault_near(began);
        let note = match outcome {
            Outcome::Wrong(why) => Some(("WRONG ANSWER", why.clone())),
            Outcome::Failed(why) => Some(("FAILURE", why.clone())),
            Outcome::Unavailable(m) | Outcome::StreamUnavailable(m) if unexplained => Some((
                "UNEXPLAINED 503",
                format!(
                    "code 14 ({m:?}) with no upstream kill or GOAWAY during the call or {} s before it",
                    FAULT_WINDOW.as_secs()
                ),
            )),
            _ => None,
        };
        if let Some((what, why)) = note {
            let line = format!(
                "{what}: {}: {why} [call {}–{}; {}]",
                call.describe(),
                self.at(began),
                self.at(Instant::now()),
                self.faults_during(began)
            );
            if self.printed.fetch_add(1, Ordering::SeqCst) < PRINTED_FAILURES {
                eprintln!("soak: {line}");
            }
            if let Ok(mut f) = self.failures.lock() {
                let _ = writeln!(f, "{line}");
            }
        }
        let Ok(mut s) = self.stats.lock() else {
            return;
        };
        s.total.add(outcome);
        if unexplained {
            if call.hang {
                s.unexplained_hung += 1;
            } else {
                s.unexplained_answered += 1;
            }
        }
        s.by_kind
            .entry((call.kind, call.protocol()))
            .or_default()
            .add(outcome);
        s.by_format.entry(call.formats()).or_default().add(outcome);
        if call.hang {
            s.hung.add(outcome);
        } else {
            s.answered.add(outcome);
        }
    }

    fn error(&self, e: String) {
        eprintln!("soak: ERROR: {e}");
        if let Ok(mut f) = self.failures.lock() {
            let _ = writeln!(f, "ERROR: {e}");
        }
        if let Ok(mut s) = self.stats.lock() {
            s.errors.push(e);
        }
    }

    fn total(&self) -> Tally {
        self.stats.lock().map(|s| s.total).unwrap_or_default()
    }
}

// === load ===

async fn worker(
    shared: Arc<Shared>,
    id: usize,
    h2: bool,
    phase: u32,
    until: Instant,
    mut rng: Rng,
) {
    let http = client(h2);
    let mut seq = 0u64;
    while Instant::now() < until
        && !shared.abort.load(Ordering::SeqCst)
        && !STOPPING.load(Ordering::SeqCst)
    {
        seq += 1;
        let tag = format!("p{phase}c{id}n{seq}");
        let call = match pick(&mut rng, &shared.schema, tag, h2) {
            Ok(c) => c,
            Err(e) => {
                shared.error(format!("building a call: {e}"));
                shared.abort.store(true, Ordering::SeqCst);
                return;
            }
        };
        let began = Instant::now();
        let outcome =
            match tokio::time::timeout(CLIENT_DEADLINE, send(&http, shared.gateway, &call)).await {
                Err(_) => Outcome::Failed(format!("no whole answer within {CLIENT_DEADLINE:?}")),
                Ok(Err(e)) => Outcome::Failed(e),
                Ok(Ok((status, headers, body, trailers))) => {
                    judge(&shared, &call, status, &headers, &body, trailers.as_ref())
                }
            };
        shared.record(&call, &outcome, began);
    }
}

/// Runs the clients until `until`; returns when every call has its answer (the clients and
/// their connections are gone).
async fn run_load(shared: &Arc<Shared>, s: &Settings, phase: u32, until: Instant) {
    let workers: Vec<_> = (0..s.clients)
        .map(|i| {
            let seed = s.seed ^ (u64::from(phase) << 40) ^ ((i as u64) << 20);
            tokio::spawn(worker(
                shared.clone(),
                i,
                i % 2 == 1,
                phase,
                until,
                Rng::new(seed),
            ))
        })
        .collect();
    for w in workers {
        if let Err(e) = w.await {
            shared.error(format!("a client task failed: {e}"));
        }
    }
}

// === processes ===

/// The processes the driver started, stopped when it ends however it ends.
#[derive(Default)]
struct Procs {
    gateway: Option<Child>,
    faults: Option<tokio::task::JoinHandle<Backend>>,
    stop_faults: Option<oneshot::Sender<()>>,
}

impl Procs {
    async fn cleanup(&mut self) {
        if let Some(stop) = self.stop_faults.take() {
            let _ = stop.send(());
        }
        if let Some(faults) = self.faults.take() {
            // Aborted or stuck: its Backend (kill_on_drop) goes with the task.
            if let Ok(Ok(mut backend)) = tokio::time::timeout(Duration::from_secs(20), faults).await
            {
                backend.stop().await;
            }
        }
        if let Some(mut gw) = self.gateway.take() {
            let _ = gw.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(10), gw.wait()).await;
        }
    }
}

/// The upstream process, on one port for its whole life.
struct Backend {
    exe: PathBuf,
    addr: SocketAddr,
    log: PathBuf,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    goaway_connections: Arc<AtomicU64>,
}

impl Backend {
    async fn start(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let mut child = Command::new(&self.exe)
            .arg("backend")
            .arg("--listen")
            .arg(self.addr.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting the upstream {}: {e}", self.exe.display()))?;
        let stdout = child.stdout.take().ok_or("the upstream's stdout")?;
        self.stdin = child.stdin.take();
        self.child = Some(child);
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await;
        match first {
            Ok(Ok(Some(line))) if line.starts_with("listening on") => {}
            other => {
                return Err(format!(
                    "the upstream did not start listening on {}: {other:?}",
                    self.addr
                ));
            }
        }
        let counted = self.goaway_connections.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(n) = line
                    .strip_prefix("goaway sent to ")
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    counted.fetch_add(n, Ordering::SeqCst);
                }
            }
        });
        Ok(())
    }

    async fn kill(&mut self) -> Result<(), String> {
        self.stdin = None;
        if let Some(mut child) = self.child.take() {
            child
                .start_kill()
                .map_err(|e| format!("killing the upstream: {e}"))?;
            tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .map_err(|_| "the killed upstream did not exit".to_owned())?
                .map_err(|e| format!("waiting for the upstream: {e}"))?;
        }
        Ok(())
    }

    async fn goaway(&mut self) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the upstream is not running")?;
        stdin
            .write_all(b"goaway\n")
            .await
            .map_err(|e| format!("telling the upstream: {e}"))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("telling the upstream: {e}"))
    }

    /// Closes its stdin (it exits by itself), or kills it.
    async fn stop(&mut self) {
        self.stdin = None;
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(Duration::from_secs(10), child.wait())
                .await
                .is_err()
        {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }
}

/// GOAWAY a quarter into each period, SIGKILL and restart three quarters into it, until `end`
/// or the stop signal. Returns the upstream (running).
async fn faults(
    mut backend: Backend,
    shared: Arc<Shared>,
    start: Instant,
    period: Duration,
    end: Instant,
    mut stop: oneshot::Receiver<()>,
) -> Backend {
    for k in 0u32.. {
        let base = start + period * k;
        for (at, kill) in [(base + period / 4, false), (base + period * 3 / 4, true)] {
            if at >= end {
                return backend;
            }
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                _ = &mut stop => return backend,
            }
            let done = if kill {
                let t = Instant::now();
                shared.event(format!("kill {}", shared.kills.load(Ordering::SeqCst) + 1));
                let r = match backend.kill().await {
                    Ok(()) => backend.start().await,
                    Err(e) => Err(e),
                };
                shared.kills.fetch_add(1, Ordering::SeqCst);
                shared
                    .restart_max_ms
                    .fetch_max(t.elapsed().as_millis() as u64, Ordering::SeqCst);
                r
            } else {
                let n = shared.goaways.fetch_add(1, Ordering::SeqCst) + 1;
                shared.event(format!("GOAWAY {n}"));
                backend.goaway().await
            };
            if let Err(e) = done {
                shared.error(format!("fault injection: {e}"));
                shared.abort.store(true, Ordering::SeqCst);
                return backend;
            }
        }
    }
    backend
}

/// A port on 127.0.0.1 below the ephemeral range, free now.
fn upstream_port(seed: u64) -> Result<SocketAddr, String> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| {
            r.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u16>().ok())
        })
        .unwrap_or(32768);
    let floor = 10_000u16;
    if low <= floor + 100 {
        return Err(format!(
            "the ephemeral port range starts at {low}: no room below it"
        ));
    }
    let mut rng = Rng::new(seed);
    for _ in 0..200 {
        let port = floor + rng.below(u64::from(low - floor)) as u16;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if std::net::TcpListener::bind(addr).is_ok() {
            return Ok(addr);
        }
    }
    Err("no free port below the ephemeral range".into())
}

fn in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Starts the gateway with the soak's configuration; returns it and its address.
async fn start_gateway(s: &Settings, upstream: SocketAddr) -> Result<(Child, SocketAddr), String> {
    let root = protogate_tests::workspace();
    let config = s.out.join("gateway.toml");
    let text = format!(
        "# written by the soak driver (tests/src/bin/soak.rs)\n\
         listen = \"127.0.0.1:0\"\n\
         upstream = \"http://{upstream}\"\n\
         protos = [{:?}]\n\
         upstream_timeout = \"{UPSTREAM_TIMEOUT_SECS}s\"\n",
        root.join("proto/test/rest/v1/library.proto")
            .display()
            .to_string()
    );
    std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
    let log_path = s.out.join("gateway.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    if !s.gateway_bin.is_file() {
        return Err(format!(
            "no gateway at {} (make soak builds it)",
            s.gateway_bin.display()
        ));
    }
    // Dies with the driver even when the driver is killed outright.
    let mut cmd = match in_path("setpriv") {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--"]).arg(&s.gateway_bin);
            c
        }
        None => Command::new(&s.gateway_bin),
    };
    let mut child = cmd
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", s.gateway_bin.display()))?;
    let listening = poll_until(Duration::from_secs(60), || {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let addr = text
            .split("listening on http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse::<SocketAddr>().ok());
        let exited = match (addr, child.try_wait()) {
            (None, Ok(Some(status))) => Err(format!(
                "the gateway exited ({status}) before listening:\n{text}"
            )),
            _ => Ok(addr),
        };
        async move { exited }
    })
    .await?;
    match listening {
        Some(addr) => Ok((child, addr)),
        None => Err(format!(
            "the gateway did not listen within 60 s:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        )),
    }
}

/// Polls `check` (every 20 ms) until it gives a value or an error, for at most `limit`:
/// `Ok(None)` when the limit passes first. Every wait of the soak for a condition is this.
async fn poll_until<T, Fut>(
    limit: Duration,
    mut check: impl FnMut() -> Fut,
) -> Result<Option<T>, String>
where
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    let deadline = Instant::now() + limit;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tick.tick().await;
        if let Some(value) = check().await? {
            return Ok(Some(value));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
    }
}

/// `GET path` on a connection of its own, closed after the answer: (status, body).
async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let io = async {
        let mut s = TcpStream::connect(addr).await?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .map_err(|_| format!("GET {path}: no answer in 10 s"))?
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("GET {path}: not HTTP: {}", snippet(&raw)))?;
    // Bodies are chunked or not; callers only look for lines in them.
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}

fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)
            .filter(|rest| rest.starts_with(' '))
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The gateway's answers by HTTP status, from its `protogate_requests_total`.
fn answers_by_code(metrics: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("protogate_requests_total{"))
    {
        let code = line
            .split("code=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?")
            .to_owned();
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(code).or_default() += value;
    }
    out
}

// === measurements ===

fn rss_kib(pid: u32) -> Option<u64> {
    proc_status(pid, "VmRSS:")
}

fn proc_status(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn fd_count(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(Iterator::count)
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|t| {
            !t.lines()
                .any(|l| l.starts_with("State:") && (l.contains('Z') || l.contains('X')))
        })
        .unwrap_or(false)
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    rss_kib: u64,
    fds: usize,
    /// How long quiescence took to reach.
    waited: Duration,
}

/// Waits (at most 60 s) until the gateway has nothing in flight and its fd count has held
/// still for a second, then measures it.
async fn quiesce(gateway: SocketAddr, pid: u32) -> Result<Sample, String> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let mut last = None;
    let mut steady = 0;
    // Sampled every 100 ms: settled when ten samples in a row agree.
    let mut every = tokio::time::interval(Duration::from_millis(100));
    every.tick().await;
    loop {
        every.tick().await;
        // Counted before the scrape: the previous scrape's connection is long closed.
        let fds = fd_count(pid).ok_or("the gateway is gone")?;
        let (_, metrics) = get(gateway, "/metrics").await?;
        let in_flight = metric_value(&metrics, "protogate_requests_in_flight")
            .ok_or("no protogate_requests_in_flight in /metrics")?;
        if in_flight == 0.0 && last == Some(fds) {
            steady += 1;
        } else {
            steady = 0;
        }
        last = Some(fds);
        if steady >= 10 {
            let rss_kib = rss_kib(pid).ok_or("the gateway is gone")?;
            return Ok(Sample {
                rss_kib,
                fds,
                waited: start.elapsed(),
            });
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the gateway did not settle within 60 s: {in_flight} in flight, {fds} fds"
            ));
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Peaks {
    rss_kib: u64,
    fds: usize,
}

/// Samples the gateway every second (peaks; a gateway that dies aborts the run) and prints
/// progress every minute.
async fn monitor(
    shared: Arc<Shared>,
    pid: u32,
    start: Instant,
    mut stop: oneshot::Receiver<()>,
) -> Peaks {
    let mut peaks = Peaks::default();
    let mut next_report = start + Duration::from_secs(60);
    // A sample a second.
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.tick().await;
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = &mut stop => return peaks,
        }
        if !alive(pid) {
            shared.error("the gateway died".into());
            shared.abort.store(true, Ordering::SeqCst);
            return peaks;
        }
        let rss = rss_kib(pid).unwrap_or(0);
        let fds = fd_count(pid).unwrap_or(0);
        peaks.rss_kib = peaks.rss_kib.max(rss);
        peaks.fds = peaks.fds.max(fds);
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(60);
            let t = shared.total();
            println!(
                "soak: {:>5} s  calls {}  ok {}  503 {}  504 {}  stream errors {}  wrong {}  failed {}  kills {}  goaways {}  RSS {} KiB  fds {}",
                start.elapsed().as_secs(),
                t.calls,
                t.ok,
                t.unavailable,
                t.deadline,
                t.stream_unavailable + t.stream_deadline,
                t.wrong,
                t.failed,
                shared.kills.load(Ordering::SeqCst),
                shared.goaways.load(Ordering::SeqCst),
                rss,
                fds
            );
        }
    }
}

// === the run ===

struct Report {
    elapsed: Duration,
    warm: Sample,
    end: Sample,
    peaks: Peaks,
    hwm_kib: u64,
    exit: String,
    clean_exit: bool,
    panics: usize,
    error_lines: usize,
    answers_by_code: BTreeMap<String, f64>,
    upstream: SocketAddr,
}

async fn soak(s: &Settings, procs: &mut Procs) -> Result<(Arc<Shared>, Report), String> {
    std::fs::create_dir_all(&s.out).map_err(|e| format!("{}: {e}", s.out.display()))?;
    let failures_path = s.out.join("failures.log");
    let failures = std::fs::File::create(&failures_path)
        .map_err(|e| format!("{}: {e}", failures_path.display()))?;
    let backend_log = s.out.join("upstream.log");
    let _ = std::fs::remove_file(&backend_log);
    let upstream = upstream_port(s.seed)?;
    let goaway_connections = Arc::new(AtomicU64::new(0));
    let mut backend = Backend {
        exe: std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?,
        addr: upstream,
        log: backend_log,
        child: None,
        stdin: None,
        goaway_connections: goaway_connections.clone(),
    };
    backend.start().await?;
    let (gateway, addr) = match start_gateway(s, upstream).await {
        Ok(g) => g,
        Err(e) => {
            backend.stop().await;
            return Err(e);
        }
    };
    let pid = gateway.id().ok_or("the gateway's pid")?;
    procs.gateway = Some(gateway);
    let schema = protogate_tests::library::schema();
    let shared = Arc::new(Shared::new(addr, schema, failures, goaway_connections));
    // Ready: the gateway reaches the upstream.
    let ready = poll_until(Duration::from_secs(30), || async move {
        Ok((get(addr, "/readyz").await.map(|(c, _)| c) == Ok(200)).then_some(()))
    })
    .await;
    if !matches!(ready, Ok(Some(()))) {
        backend.stop().await;
        return Err("the gateway was not ready within 30 s".into());
    }
    println!(
        "soak: gateway pid {pid} on {addr} (RSS {} KiB, {} fds), upstream on {upstream}; {} s of load, warm-up {} s, GOAWAY and kill every {} s, {} clients, seed {}",
        rss_kib(pid).unwrap_or(0),
        fd_count(pid).unwrap_or(0),
        s.secs,
        s.warmup,
        s.period,
        s.clients,
        s.seed
    );

    let start = Instant::now();
    let end = start + Duration::from_secs(s.secs);
    let (stop_faults, stopped) = oneshot::channel();
    procs.stop_faults = Some(stop_faults);
    procs.faults = Some(tokio::spawn(faults(
        backend,
        shared.clone(),
        start,
        Duration::from_secs(s.period),
        end,
        stopped,
    )));
    let (stop_monitor, monitor_stopped) = oneshot::channel();
    let monitor = tokio::spawn(monitor(shared.clone(), pid, start, monitor_stopped));

    run_load(&shared, s, 0, start + Duration::from_secs(s.warmup)).await;
    let warm = quiesce(addr, pid).await?;
    println!(
        "soak: after the warm-up ({} s): RSS {} KiB, {} fds (settled in {:.1} s)",
        start.elapsed().as_secs(),
        warm.rss_kib,
        warm.fds,
        warm.waited.as_secs_f64()
    );
    run_load(&shared, s, 1, end).await;
    let elapsed = start.elapsed();
    if let Some(stop) = procs.stop_faults.take() {
        let _ = stop.send(());
    }
    let mut backend = match procs.faults.take() {
        Some(f) => f.await.map_err(|e| format!("the fault task failed: {e}"))?,
        None => return Err("no fault task".into()),
    };
    let end_sample = quiesce(addr, pid).await;
    let (_, metrics) = get(addr, "/metrics").await?;
    let _ = std::fs::write(s.out.join("metrics-end.txt"), &metrics);
    let hwm_kib = proc_status(pid, "VmHWM:").unwrap_or(0);
    let _ = stop_monitor.send(());
    let peaks = monitor.await.unwrap_or_default();
    let end_sample = end_sample?;
    println!(
        "soak: after the load ({} s): RSS {} KiB, {} fds (settled in {:.1} s)",
        start.elapsed().as_secs(),
        end_sample.rss_kib,
        end_sample.fds,
        end_sample.waited.as_secs_f64()
    );

    // A clean stop: SIGTERM, and the gateway exits by itself.
    let mut gateway = procs.gateway.take().ok_or("the gateway is gone")?;
    let (exit, clean_exit) = match in_path("kill") {
        Some(kill) => {
            let _ = std::process::Command::new(kill)
                .args(["-TERM", &pid.to_string()])
                .status();
            match tokio::time::timeout(Duration::from_secs(30), gateway.wait()).await {
                Ok(Ok(status)) => (format!("{status} on SIGTERM"), status.success()),
                Ok(Err(e)) => (format!("wait failed: {e}"), false),
                Err(_) => {
                    let _ = gateway.start_kill();
                    let _ = gateway.wait().await;
                    (
                        "still running 30 s after SIGTERM (killed)".to_owned(),
                        false,
                    )
                }
            }
        }
        None => {
            let _ = gateway.start_kill();
            let _ = gateway.wait().await;
            ("killed (no kill(1) to send SIGTERM)".to_owned(), true)
        }
    };
    backend.stop().await;
    let log = std::fs::read_to_string(s.out.join("gateway.log")).unwrap_or_default();
    let panics = log.lines().filter(|l| l.contains("panicked")).count();
    let error_lines = log.lines().filter(|l| l.contains(" ERROR ")).count();
    Ok((
        shared,
        Report {
            elapsed,
            warm,
            end: end_sample,
            peaks,
            hwm_kib,
            exit,
            clean_exit,
            panics,
            error_lines,
            answers_by_code: answers_by_code(&metrics),
            upstream,
        },
    ))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The summary as Markdown, and whether every check passed.
fn summary(s: &Settings, shared: &Shared, r: &Report) -> (String, bool) {
    let stats = shared
        .stats
        .lock()
        .map(|mut g| std::mem::take(&mut *g))
        .unwrap_or_default();
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let t = stats.total;
    line(format!(
        "Soak: {:.0} s of load ({} s asked), {} clients (half HTTP/1.1, half HTTP/2), seed {}; gateway on 127.0.0.1 (upstream {}), `upstream_timeout` {UPSTREAM_TIMEOUT_SECS} s.",
        r.elapsed.as_secs_f64(),
        s.secs,
        s.clients,
        s.seed,
        r.upstream
    ));
    line(String::new());
    line(format!("| call | protocol | {TALLY_HEAD} |"));
    line("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|".into());
    for ((kind, proto), tally) in &stats.by_kind {
        line(format!("| {} | {proto} | {} |", kind.name(), tally.row()));
    }
    line(format!("| **all** | | {} |", t.row()));
    line(String::new());
    line(format!("| request → response format | {TALLY_HEAD} |"));
    line("|---|--:|--:|--:|--:|--:|--:|--:|--:|".into());
    for (formats, tally) in &stats.by_format {
        line(format!("| {formats} | {} |", tally.row()));
    }
    line(String::new());
    line(format!("| upstream | {TALLY_HEAD} |"));
    line("|---|--:|--:|--:|--:|--:|--:|--:|--:|".into());
    line(format!(
        "| answered by the upstream | {} |",
        stats.answered.row()
    ));
    line(format!(
        "| hung by the upstream (one in ten) | {} |",
        stats.hung.row()
    ));
    line(String::new());
    let kills = shared.kills.load(Ordering::SeqCst);
    let goaways = shared.goaways.load(Ordering::SeqCst);
    let no_trailers = shared.h1_no_trailers.load(Ordering::SeqCst);
    line(format!(
        "Faults: {kills} SIGKILLs of the upstream, each restarted on its port (longest kill-to-listening {} ms); {goaways} GOAWAYs (to {} upstream connections in all); {} calls hung.",
        shared.restart_max_ms.load(Ordering::SeqCst),
        shared.goaway_connections.load(Ordering::SeqCst),
        stats.hung.calls
    ));
    let codes: Vec<String> = r
        .answers_by_code
        .iter()
        .map(|(c, n)| format!("{c}: {n:.0}"))
        .collect();
    line(format!(
        "The gateway's own count (`protogate_requests_total` by status): {}.",
        codes.join(", ")
    ));
    line(String::new());
    let rss_limit = (r.warm.rss_kib as f64 * (1.0 + RSS_GROWTH)) as u64;
    line("| gateway | after the warm-up | at the end | peak |".into());
    line("|---|--:|--:|--:|".into());
    line(format!(
        "| RSS (VmRSS, quiescent) | {} | {} | {} (VmHWM {}) |",
        mib(r.warm.rss_kib),
        mib(r.end.rss_kib),
        mib(r.peaks.rss_kib),
        mib(r.hwm_kib)
    ));
    line(format!(
        "| open file descriptors (quiescent) | {} | {} | {} |",
        r.warm.fds, r.end.fds, r.peaks.fds
    ));
    line(String::new());
    let checks = [
        (
            t.wrong == 0,
            format!("no wrong answer: {} of {} calls", t.wrong, t.calls),
        ),
        (
            t.failed == 0,
            format!(
                "every failure a 503/504 (or a stream's code 14/4 record) with a Status: {} other failures",
                t.failed
            ),
        ),
        (
            r.end.rss_kib <= rss_limit,
            format!(
                "RSS at the end within {:.0} % of RSS after the warm-up: {} KiB vs {} KiB ({:+.1} %)",
                RSS_GROWTH * 100.0,
                r.end.rss_kib,
                r.warm.rss_kib,
                (r.end.rss_kib as f64 / r.warm.rss_kib.max(1) as f64 - 1.0) * 100.0
            ),
        ),
        (
            r.end.fds <= r.warm.fds + FD_ALLOWANCE,
            format!(
                "no fd leaked: {} at the end, {} after the warm-up (+{FD_ALLOWANCE} allowed: the two upstream connections)",
                r.end.fds, r.warm.fds
            ),
        ),
        (
            r.panics == 0 && r.clean_exit,
            format!(
                "the gateway did not panic ({} panic lines, {} ERROR lines in its log) and stopped cleanly: {}",
                r.panics, r.error_lines, r.exit
            ),
        ),
        (
            kills > 0 && goaways > 0 && stats.hung.deadline > 0 && t.ok > 0,
            format!(
                "the faults happened: {kills} kills, {goaways} GOAWAYs, {} hung calls answered 504, {} calls verified",
                stats.hung.deadline, t.ok
            ),
        ),
        (
            stats.unexplained_hung + stats.unexplained_answered == 0,
            format!(
                "every 503 (or stream code 14) came with an upstream kill or GOAWAY during the call or {} s before: {} without ({} of calls the upstream hung, which want 504)",
                FAULT_WINDOW.as_secs(),
                stats.unexplained_hung + stats.unexplained_answered,
                stats.unexplained_hung
            ),
        ),
        (
            no_trailers == 0,
            format!(
                "HTTP/1.1 stream answers carry the grpc-status trailer they asked for (TE: trailers, as README.md says): {no_trailers} without"
            ),
        ),
        (
            stats.errors.is_empty(),
            format!("no driver or set-up error: {}", stats.errors.join("; ")),
        ),
    ];
    line("Checks:".into());
    line(String::new());
    let mut passed = true;
    for (ok, what) in &checks {
        passed &= *ok;
        line(format!("- {} {what}", if *ok { "PASS" } else { "FAIL" }));
    }
    (out, passed)
}

fn driver_main() -> ExitCode {
    let s = match settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(64);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("soak: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let mut procs = Procs::default();
        let interrupted = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => "SIGTERM",
            }
        };
        let result = tokio::select! {
            r = soak(&s, &mut procs) => Ok(r),
            signal = interrupted => {
                STOPPING.store(true, Ordering::SeqCst);
                Err(signal)
            }
        };
        procs.cleanup().await;
        match result {
            Err(signal) => {
                eprintln!("soak: stopped by {signal}; its processes are stopped");
                ExitCode::from(130)
            }
            Ok(Err(e)) => {
                eprintln!("soak: FAILED to run: {e}");
                ExitCode::from(2)
            }
            Ok(Ok((shared, report))) => {
                let (text, passed) = summary(&s, &shared, &report);
                println!("\n{text}");
                let path = s.out.join("summary.md");
                let _ = std::fs::write(&path, &text);
                println!(
                    "soak: {} (summary in {}, logs and failures beside it)",
                    if passed { "PASSED" } else { "FAILED" },
                    path.display()
                );
                if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    //! The judge itself: right answers pass, wrong ones and other failures are caught.

    use super::*;

    const FORMATS: [Fmt; 3] = [Fmt::Json, Fmt::Msgpack, Fmt::Protobuf];

    fn shared() -> Shared {
        let sink = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null");
        let s = Shared::new(
            SocketAddr::from(([127, 0, 0, 1], 9)),
            protogate_tests::library::schema(),
            sink,
            Arc::default(),
        );
        s.printed.store(PRINTED_FAILURES, Ordering::SeqCst);
        s
    }

    fn call(s: &Shared, kind: Kind, h2: bool, req: Fmt, resp: Fmt) -> Call {
        let shape = Shape {
            kind,
            h2,
            req,
            resp,
            hang: false,
        };
        build(&mut Rng::new(7), &s.schema, "t1".into(), shape).expect("a call")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("a header value"));
        }
        h
    }

    fn status(s: &Shared, fmt: Format, code: i32, message: &str) -> Vec<u8> {
        let json = serde_json::json!({"code": code, "message": message}).to_string();
        convert(
            &s.schema,
            "google.rpc.Status",
            Format::Json,
            fmt,
            json.as_bytes(),
        )
        .expect("a status")
    }

    #[test]
    fn an_echo_answer_is_checked_by_its_content() {
        let s = shared();
        for req in FORMATS {
            for resp in FORMATS {
                let c = call(&s, Kind::Unary, true, req, resp);
                let Expect::Echo { message, sent } = &c.expect else {
                    panic!("not an Echo");
                };
                let ct = headers(&[("content-type", resp.media())]);
                let body = encode_as(&s.schema, "library.v1.ListBooksRequest", resp, sent)
                    .expect("renders");
                let o = judge(&s, &c, StatusCode::OK, &ct, &body, None);
                assert!(matches!(o, Outcome::Ok), "{req:?} → {resp:?}: {o:?}");
                let mut other = message.clone();
                other.page_size += 1;
                let body = encode_as(
                    &s.schema,
                    "library.v1.ListBooksRequest",
                    resp,
                    &other.encode_to_vec(),
                )
                .expect("renders");
                let o = judge(&s, &c, StatusCode::OK, &ct, &body, None);
                assert!(matches!(o, Outcome::Wrong(_)), "{req:?} → {resp:?}: {o:?}");
                let o = judge(&s, &c, StatusCode::OK, &ct, b"", None);
                assert!(matches!(o, Outcome::Wrong(_)), "{req:?} → {resp:?}: {o:?}");
            }
        }
    }

    #[test]
    fn a_failure_must_be_503_or_504_with_its_status() {
        let s = shared();
        for resp in FORMATS {
            let c = call(&s, Kind::Unary, false, Fmt::Json, resp);
            let f = resp.format();
            let h = |code: &str| headers(&[("content-type", resp.media()), ("grpc-status", code)]);
            let o = judge(
                &s,
                &c,
                StatusCode::SERVICE_UNAVAILABLE,
                &h("14"),
                &status(&s, f, 14, "down"),
                None,
            );
            assert!(matches!(o, Outcome::Unavailable(_)), "{o:?}");
            let o = judge(
                &s,
                &c,
                StatusCode::GATEWAY_TIMEOUT,
                &h("4"),
                &status(&s, f, 4, "late"),
                None,
            );
            assert!(matches!(o, Outcome::Deadline), "{o:?}");
            for (http, code) in [(503, 2), (504, 14), (500, 2), (499, 1), (404, 5)] {
                let http = StatusCode::from_u16(http).expect("a status");
                let o = judge(
                    &s,
                    &c,
                    http,
                    &h(&code.to_string()),
                    &status(&s, f, code, "x"),
                    None,
                );
                assert!(matches!(o, Outcome::Failed(_)), "{http} {code}: {o:?}");
            }
            // No Status body, or a grpc-status that disagrees.
            let o = judge(
                &s,
                &c,
                StatusCode::SERVICE_UNAVAILABLE,
                &h("14"),
                b"oops",
                None,
            );
            assert!(matches!(o, Outcome::Failed(_)), "{o:?}");
            let o = judge(
                &s,
                &c,
                StatusCode::SERVICE_UNAVAILABLE,
                &h("2"),
                &status(&s, f, 14, "down"),
                None,
            );
            assert!(matches!(o, Outcome::Failed(_)), "{o:?}");
        }
        // A call the upstream never answers cannot succeed.
        let mut c = call(&s, Kind::Unary, false, Fmt::Json, Fmt::Json);
        c.hang = true;
        let o = judge(
            &s,
            &c,
            StatusCode::OK,
            &headers(&[("content-type", "application/json")]),
            b"{}",
            None,
        );
        assert!(matches!(o, Outcome::Wrong(_)), "{o:?}");
    }

    #[test]
    fn a_503_wants_a_fault_near_it() {
        let s = shared();
        let c = call(&s, Kind::Unary, true, Fmt::Json, Fmt::Json);
        let began = Instant::now();
        s.record(&c, &Outcome::Unavailable("lost".into()), began);
        s.event("kill 1".into());
        s.record(&c, &Outcome::Unavailable("lost".into()), began);
        s.record(&c, &Outcome::StreamUnavailable("lost".into()), began);
        let stats = s.stats.lock().expect("stats");
        assert_eq!(stats.unexplained_answered, 1);
        assert_eq!(stats.total.unavailable, 2);
    }

    #[test]
    fn a_stream_is_checked_message_by_message_and_by_its_end() {
        let s = shared();
        for framing in [
            Framing::Ndjson,
            Framing::JsonArray,
            Framing::Sse,
            Framing::Msgpack,
            Framing::Delimited,
        ] {
            for h2 in [true, false] {
                let mut c = call(&s, Kind::ServerStream, h2, Fmt::Json, Fmt::Json);
                c.out_framing = Some(framing);
                let Expect::Books(books) = &c.expect else {
                    panic!("not a stream");
                };
                let books = books.clone();
                assert!(books.len() >= 2, "{}", books.len());
                let f = framing.format();
                let rendered: Vec<Vec<u8>> = books
                    .iter()
                    .map(|b| {
                        convert(
                            &s.schema,
                            "library.v1.Book",
                            Format::Protobuf,
                            f,
                            &b.encode_to_vec(),
                        )
                        .expect("renders")
                    })
                    .collect();
                let body = |n: usize, error: Option<i32>| {
                    let mut out = Vec::new();
                    framing.begin(&mut out);
                    for (i, m) in rendered[..n].iter().enumerate() {
                        framing.record(i, m, &mut out);
                    }
                    match error {
                        Some(code) => framing.error(n, &status(&s, f, code, "lost"), &mut out),
                        None => framing.end(&mut out),
                    }
                    out
                };
                let ct = headers(&[("content-type", framing.content_type())]);
                let trailers =
                    |code: i32| h2.then(|| headers(&[("grpc-status", &code.to_string())]));
                let judge = |body: &[u8], code: i32| {
                    judge(&s, &c, StatusCode::OK, &ct, body, trailers(code).as_ref())
                };
                let all = books.len();
                let what = format!("{framing:?} h2 {h2}");
                assert!(matches!(judge(&body(all, None), 0), Outcome::Ok), "{what}");
                assert!(
                    matches!(judge(&body(1, Some(14)), 14), Outcome::StreamUnavailable(_)),
                    "{what}"
                );
                assert!(
                    matches!(judge(&body(0, Some(4)), 4), Outcome::StreamDeadline),
                    "{what}"
                );
                assert!(
                    matches!(judge(&body(1, Some(2)), 2), Outcome::Failed(_)),
                    "{what}"
                );
                // Fewer messages than sent, and a clean end.
                assert!(
                    matches!(judge(&body(1, None), 0), Outcome::Wrong(_)),
                    "{what}"
                );
                // A message that is not the one expected there.
                let mut swapped = rendered.clone();
                swapped.swap(0, 1);
                let mut out = Vec::new();
                framing.begin(&mut out);
                for (i, m) in swapped.iter().enumerate() {
                    framing.record(i, m, &mut out);
                }
                framing.end(&mut out);
                assert!(matches!(judge(&out, 0), Outcome::Wrong(_)), "{what}");
            }
        }
        // HTTP/1.1 answers without trailers were judged by their bodies, and counted.
        assert_eq!(s.h1_no_trailers.load(Ordering::SeqCst), 5 * 6);
    }
}
