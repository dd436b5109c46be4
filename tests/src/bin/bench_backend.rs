//! bench-backend: a gRPC server (h2c) for `bench.v1.BenchService` (proto/bench/bench.proto), the
//! upstream of `make bench-e2e`.
//!
//! ```text
//! bench-backend [--listen 127.0.0.1:PORT] [--mode raw|typed]
//! ```
//!
//! Prints `listening on ADDR` on stdout once the port accepts connections (`:0` picks a port).
//! One thread (a current-thread runtime): it runs pinned to one core.
//!
//! - `raw` (default), the cheap fixture for load tests: Echo* answer the request's protobuf bytes
//!   unchanged (no decode, no encode); ListRecords decodes its request, builds the records as
//!   bench.proto's comment defines, encodes them once per `count` and serves the cached bytes.
//! - `typed`: the generated service; every call decodes and re-encodes its messages, and
//!   ListRecords builds its records on every call.
//!
//! Both modes give the same answers on the wire for well-formed requests (the behaviour of the
//! `raw` backend of ../shared/peers).

// The benchmark's backend, not the gateway: a failed unwrap or expect stops the benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use prost::Message as _;
use tonic::body::Body as TonicBody;

/// The generated `bench.v1` service and messages.
pub mod pb {
    tonic::include_proto!("bench.v1");
}

use pb::bench_service_server::{BenchService, BenchServiceServer};
use pb::{ListRecordsRequest, LogBatch, Order, Record, RecordList};

const SERVICE: &str = "bench.v1.BenchService";
const RECORD_TS: &str = "2026-08-31T10:20:30.123456+08:00";
const CATS: [&str; 3] = ["a", "b", "c"];
/// The largest `count` ListRecords accepts.
const MAX_COUNT: i32 = 1_000_000;
/// How many distinct counts the raw mode keeps encoded.
const MAX_CACHED: usize = 64;
/// Message size limit both ways (tonic's default of 4 MiB would refuse the large workloads).
const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// `round(x, 2)` as Python computes it: correctly rounded from the exact binary value, exact
/// ties to even. Rust's fixed-precision formatting rounds the exact value the same way.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().expect("a formatted float parses")
}

/// The `count` records bench.proto's ListRecords comment defines.
fn build_records(count: i32) -> RecordList {
    RecordList {
        records: (0..count)
            .map(|i| Record {
                id: i64::from(i),
                name: format!("record-{i}"),
                price: round2(0.1 + f64::from(i) * 0.05),
                cat: CATS[(i % 3) as usize].to_owned(),
                flag: i % 2 == 1,
                ts: RECORD_TS.to_owned(),
            })
            .collect(),
    }
}

fn check_count(count: i32) -> Result<(), tonic::Status> {
    if (0..=MAX_COUNT).contains(&count) {
        Ok(())
    } else {
        Err(tonic::Status::invalid_argument(format!(
            "count out of range: {count}"
        )))
    }
}

// === typed mode: the generated service ===

#[derive(Clone, Copy, Default)]
struct Typed;

#[tonic::async_trait]
impl BenchService for Typed {
    async fn echo_order(
        &self,
        request: tonic::Request<Order>,
    ) -> Result<tonic::Response<Order>, tonic::Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }

    async fn echo_records(
        &self,
        request: tonic::Request<RecordList>,
    ) -> Result<tonic::Response<RecordList>, tonic::Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }

    async fn list_records(
        &self,
        request: tonic::Request<ListRecordsRequest>,
    ) -> Result<tonic::Response<RecordList>, tonic::Status> {
        let count = request.into_inner().count;
        check_count(count)?;
        Ok(tonic::Response::new(build_records(count)))
    }

    async fn echo_logs(
        &self,
        request: tonic::Request<LogBatch>,
    ) -> Result<tonic::Response<LogBatch>, tonic::Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }
}

fn typed_server() -> BenchServiceServer<Typed> {
    BenchServiceServer::new(Typed)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

// === raw mode: byte echo and cached ListRecords answers ===

/// Answers the request's bytes.
struct RawEcho;

impl tonic::server::UnaryService<Bytes> for RawEcho {
    type Response = Bytes;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(request.into_inner())))
    }
}

/// Encoded RecordLists by count.
type Cache = Arc<Mutex<HashMap<i32, Bytes>>>;

/// Decodes a ListRecordsRequest and answers the encoded records, built once per count.
struct RawList(Cache);

impl RawList {
    fn answer(&self, request: &[u8]) -> Result<Bytes, tonic::Status> {
        let count = ListRecordsRequest::decode(request)
            .map_err(|e| tonic::Status::invalid_argument(format!("ListRecordsRequest: {e}")))?
            .count;
        check_count(count)?;
        if let Some(bytes) = self.0.lock().expect("cache lock").get(&count) {
            return Ok(bytes.clone());
        }
        let bytes = Bytes::from(build_records(count).encode_to_vec());
        let mut cache = self.0.lock().expect("cache lock");
        if cache.len() < MAX_CACHED {
            cache.insert(count, bytes.clone());
        }
        Ok(bytes)
    }
}

impl tonic::server::UnaryService<Bytes> for RawList {
    type Response = Bytes;
    type Future = std::future::Ready<Result<tonic::Response<Bytes>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        std::future::ready(self.answer(request.get_ref()).map(tonic::Response::new))
    }
}

fn raw_grpc() -> tonic::server::Grpc<protogate_tests::BytesCodec> {
    tonic::server::Grpc::new(protogate_tests::BytesCodec)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Routes each method to its raw handler (raw mode) or to the generated service (typed mode,
/// and any path the raw handlers do not serve).
#[derive(Clone)]
struct Dispatch {
    raw: bool,
    cache: Cache,
    typed: BenchServiceServer<Typed>,
}

impl tower::Service<Request<TonicBody>> for Dispatch {
    type Response = Response<TonicBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<TonicBody>) -> Self::Future {
        if self.raw {
            let method = req
                .uri()
                .path()
                .strip_prefix("/bench.v1.BenchService/")
                .unwrap_or("");
            match method {
                "EchoOrder" | "EchoRecords" | "EchoLogs" => {
                    return Box::pin(async move { Ok(raw_grpc().unary(RawEcho, req).await) });
                }
                "ListRecords" => {
                    let list = RawList(self.cache.clone());
                    return Box::pin(async move { Ok(raw_grpc().unary(list, req).await) });
                }
                _ => {}
            }
        }
        let mut typed = self.typed.clone();
        Box::pin(async move { tower::Service::call(&mut typed, req).await })
    }
}

impl tonic::server::NamedService for Dispatch {
    const NAME: &'static str = SERVICE;
}

// === command line ===

struct Args {
    listen: SocketAddr,
    raw: bool,
}

const USAGE: &str = "usage: bench-backend [--listen 127.0.0.1:PORT] [--mode raw|typed]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
        raw: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                args.listen = v.parse().map_err(|e| format!("--listen {v}: {e}"))?;
            }
            "--mode" => {
                args.raw = match value()?.as_str() {
                    "raw" => true,
                    "typed" => false,
                    other => return Err(format!("--mode {other}: expected raw or typed")),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("bench-backend: {e}\n{USAGE}");
        std::process::exit(64);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("starting the runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .unwrap_or_else(|e| {
                eprintln!("bench-backend: binding {}: {e}", args.listen);
                std::process::exit(1);
            });
        let addr = listener.local_addr().expect("local address");
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let dispatch = Dispatch {
            raw: args.raw,
            cache: Cache::default(),
            typed: typed_server(),
        };
        let mode = if args.raw { "raw" } else { "typed" };
        {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on {addr}");
            let _ = out.flush();
        }
        eprintln!("bench-backend: mode {mode}, one thread");
        if let Err(e) = tonic::transport::Server::builder()
            .serve_with_incoming(dispatch, incoming)
            .await
        {
            eprintln!("bench-backend: {e}");
            std::process::exit(1);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_round_like_python() {
        // Python: round(0.125, 2) == 0.12, round(0.375, 2) == 0.38, round(2.675, 2) == 2.67
        assert_eq!(round2(0.125), 0.12);
        assert_eq!(round2(0.375), 0.38);
        assert_eq!(round2(2.675), 2.67);
        let r = build_records(3);
        assert_eq!(r.records[1].name, "record-1");
        assert_eq!(r.records[1].price, 0.15);
        assert!(r.records[1].flag && !r.records[2].flag);
        assert_eq!(r.records[2].cat, "c");
    }

    #[test]
    fn raw_list_caches_by_count() {
        let list = RawList(Cache::default());
        let req = ListRecordsRequest { count: 5 }.encode_to_vec();
        let a = list.answer(&req).expect("answer");
        let b = list.answer(&req).expect("answer");
        assert_eq!(a, b);
        assert_eq!(RecordList::decode(a).expect("decodes").records.len(), 5);
        let bad = ListRecordsRequest { count: -1 }.encode_to_vec();
        assert!(list.answer(&bad).is_err());
    }
}
