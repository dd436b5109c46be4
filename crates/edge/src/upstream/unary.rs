//! Unary gRPC calls on an upstream's pool, each call one stream (exchange.rs) polled by the
//! request's own task. A call the upstream provably did not process (its endpoint could not be
//! dialed, the stream was refused, or it was above the last stream a GOAWAY let through) is
//! sent once more, on another endpoint when there is one, so a backend that restarts or
//! drains does not fail the calls that had not reached it.

use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, Request, header};
use tonic::Status;

use super::Answer;
use super::endpoint::{Endpoint, Frame, InFlight};
use super::exchange::{
    APPLICATION_GRPC, Failure, GRPC_ENCODING, GRPC_TIMEOUT, TRAILERS, USER_AGENT, call_uri,
    grpc_timeout, send,
};
use super::pool::Pool;

const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
const GZIP: HeaderValue = HeaderValue::from_static("gzip");
/// The largest DATA payload h2 accepts in one call (its flow-control window limit).
const MAX_FRAME: usize = (1 << 31) - 1;

/// Calls `path` on `pool` with one message; the answer's single message and its metadata.
/// The caller enforces `timeout` (what is left of it is sent as `grpc-timeout`); dropping the
/// future resets the stream (the upstream sees the call cancelled).
pub(super) async fn call(
    pool: &Pool,
    path: &str,
    message: Bytes,
    metadata: HeaderMap,
    timeout: Duration,
) -> Result<Answer, Status> {
    let start = Instant::now();
    let path = super::method_path(path)?;
    if message.len() > MAX_FRAME - 5 {
        return Err(Status::resource_exhausted(
            "a request message over 2 GiB cannot be sent in one HTTP/2 call",
        ));
    }
    let compress = pool.options.compress_requests;
    // `upstream_compression = "gzip"`: the message goes compressed, flagged so.
    let message = if compress { gzip(&message)? } else { message };
    let mut prefix = [u8::from(compress), 0, 0, 0, 0];
    prefix[1..].copy_from_slice(&(message.len() as u32).to_be_bytes());

    // One retry, and only of a call the upstream did not process. A send consumes the
    // request head, so each attempt builds its own from the client's metadata (usually
    // empty; otherwise a few reference-counted clones).
    let mut failed: Option<(Arc<Endpoint>, Failure)> = None;
    loop {
        let retry = failed.is_some();
        let call = pool.attempt_on(failed).await?;
        // What is left of the deadline (the first attempt has all of it).
        let left = if retry {
            timeout.saturating_sub(start.elapsed())
        } else {
            timeout
        };
        let endpoint = call.endpoint().clone();
        let mut request = Request::new(());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = call_uri(&endpoint, &path)?;
        let headers = request.headers_mut();
        *headers = call_headers(compress);
        headers.reserve(metadata.len() + 1);
        headers.insert(GRPC_TIMEOUT, grpc_timeout(left));
        for (name, value) in &metadata {
            // No metadata name is one of the call's own (`is_reserved_metadata` leaves them out).
            headers.append(name.clone(), value.clone());
        }
        let frame = Cursor::new(prefix).chain(message.clone());
        pool.calls.inc();
        match attempt(call, request, frame, pool.max_response_bytes).await {
            Ok(answer) => {
                endpoint.succeeded();
                return Ok(answer);
            }
            Err(failure @ (Failure::NotSent(_) | Failure::Unreachable(_))) if !retry => {
                tracing::debug!(upstream = %endpoint.authority, addr = %endpoint.addr, status = %failure_status(&failure), "call retried");
                failed = Some((endpoint, failure));
            }
            Err(failure) => return Err(failure.into_status()),
        }
    }
}

/// The headers every unary call sends (`compress`: its message gzipped), built once and
/// cloned: a clone copies the entries of a map already laid out, where inserting them one by
/// one hashed and placed each (`make bench-ir`, BENCHMARKS.md, history of 2026-12-02).
fn call_headers(compress: bool) -> HeaderMap {
    fn build(compress: bool) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(16);
        headers.insert(header::CONTENT_TYPE, APPLICATION_GRPC);
        headers.insert(header::TE, TRAILERS);
        headers.insert(header::USER_AGENT, USER_AGENT);
        headers.insert(GRPC_ACCEPT_ENCODING, GZIP);
        if compress {
            headers.insert(GRPC_ENCODING, GZIP);
        }
        headers
    }
    static PLAIN: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(|| build(false));
    static GZIPPED: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(|| build(true));
    if compress { &*GZIPPED } else { &*PLAIN }.clone()
}

fn failure_status(failure: &Failure) -> &Status {
    match failure {
        Failure::Unreachable(s) | Failure::NotSent(s) | Failure::Final(s) => s,
    }
}

/// One attempt of a call on the endpoint `call` holds.
async fn attempt(
    mut call: InFlight,
    request: Request<()>,
    frame: Frame,
    max_response_bytes: usize,
) -> Result<Answer, Failure> {
    let endpoint = call.endpoint().clone();
    let conn = endpoint
        .connection(&mut call)
        .await
        .map_err(Failure::Unreachable)?;
    send(&endpoint, conn, request, frame, max_response_bytes).await
}

/// A request message compressed for `grpc-encoding: gzip`.
fn gzip(message: &[u8]) -> Result<Bytes, Status> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(message.len() / 2 + 64),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut encoder, message)
        .and_then(|()| encoder.finish())
        .map(Bytes::from)
        .map_err(|e| Status::internal(format!("compressing the request failed: {e}")))
}
