//! Unary gRPC calls on an upstream's pool, each call one stream (exchange.rs) polled by the
//! request's own task. A call the upstream provably did not process (its endpoint could not be
//! dialed, the stream was refused, or it was above the last stream a GOAWAY let through) is
//! sent once more, on another endpoint when there is one, so a backend that restarts or
//! drains does not fail the calls that had not reached it. A method's retry policy
//! (retry.rs) sends it again on the statuses it names. Each answer counts for its
//! endpoint's outlier detection.

use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Request, header};
use tonic::Status;

use super::Answer;
use super::endpoint::{Endpoint, Frame, InFlight};
use super::exchange::{
    APPLICATION_GRPC, Failure, GRPC_ENCODING, GRPC_TIMEOUT, TRAILERS, USER_AGENT, call_uri,
    grpc_timeout, send,
};
use super::pool::Pool;
use super::retry::{self, Attempts, PREVIOUS_ATTEMPTS, RetryPolicy};

const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
const GZIP: HeaderValue = HeaderValue::from_static("gzip");
/// The largest DATA payload h2 accepts in one call (its flow-control window limit).
const MAX_FRAME: usize = (1 << 31) - 1;

/// Calls `path` on `pool` with one message; the answer's single message and its metadata.
/// The caller enforces `timeout` (what is left of it is sent as `grpc-timeout`); dropping the
/// future resets the stream (the upstream sees the call cancelled). With a `policy`, an
/// attempt answered with one of its codes goes again (retry.rs).
pub(super) async fn call(
    pool: &Pool,
    path: &str,
    message: Bytes,
    metadata: HeaderMap,
    timeout: Duration,
    policy: Option<&RetryPolicy>,
) -> Result<Answer, Status> {
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
    let call = Call {
        pool,
        path,
        prefix,
        message,
        metadata,
        compress,
    };
    match policy {
        None => call.deliver(timeout, None).await.map_err(|(_, s)| s),
        // Boxed: the attempts' state (a per-try timer, the backoff's) would otherwise grow
        // every call's future, which the request's future holds and moves (`make bench-ir`
        // counted the copies: ≈ 270 instructions per call).
        Some(policy) => Box::pin(call.attempts(policy, timeout)).await,
    }
}

/// A retry policy's attempt after the first: its `grpc-previous-rpc-attempts`, and the
/// endpoint that answered the attempt before, if one did.
struct Retry {
    previous: HeaderValue,
    avoid: Option<Arc<Endpoint>>,
}

/// One unary call's request, sent as often as its attempts need.
struct Call<'a> {
    pool: &'a Pool,
    path: PathAndQuery,
    prefix: [u8; 5],
    message: Bytes,
    metadata: HeaderMap,
    compress: bool,
}

impl Call<'_> {
    /// The call under `policy`: attempts until one answers, or the policy, its budget or the
    /// deadline (`timeout`) stops them.
    async fn attempts(&self, policy: &RetryPolicy, timeout: Duration) -> Result<Answer, Status> {
        let mut attempts = Attempts::new(policy, &self.pool.budget, timeout);
        let mut avoid = None;
        loop {
            let (previous, limit) = attempts.begin();
            let retry = previous.map(|previous| Retry {
                previous,
                avoid: avoid.take(),
            });
            let attempt = self.deliver(limit, retry.as_ref());
            let outcome = match policy.per_try_timeout {
                Some(_) => tokio::time::timeout(limit, attempt)
                    .await
                    .unwrap_or_else(|_| Err((None, retry::per_try_expired(limit)))),
                None => attempt.await,
            };
            match outcome {
                Ok(answer) => return Ok(answer),
                Err((endpoint, status)) => {
                    if !attempts.again(&status).await {
                        return Err(status);
                    }
                    tracing::debug!(upstream = %self.pool.name, status = %status, "call retried by its retry policy");
                    avoid = endpoint;
                }
            }
        }
    }

    /// One attempt, within `limit`; a `retry` carries its `grpc-previous-rpc-attempts` and
    /// goes to another endpoint than the one before when there is one. A call the upstream
    /// did not process is sent once more (not an attempt of a retry policy: gRFC A6's
    /// transparent retry). Its failure, with the endpoint that answered it when one did.
    async fn deliver(
        &self,
        limit: Duration,
        retry: Option<&Retry>,
    ) -> Result<Answer, (Option<Arc<Endpoint>>, Status)> {
        let start = Instant::now();
        // A send consumes the request head, so each attempt builds its own from the client's
        // metadata (usually empty; otherwise a few reference-counted clones).
        let mut failed: Option<(Arc<Endpoint>, Failure)> = None;
        loop {
            let resend = failed.is_some();
            let avoid = retry.and_then(|r| r.avoid.as_ref());
            let call = match avoid.filter(|_| !resend) {
                Some(avoid) => self.pool.attempt_after(avoid).await,
                None => self.pool.attempt_on(failed).await,
            }
            .map_err(|s| (None, s))?;
            // What is left of the attempt's time (the first send has all of it).
            let left = if resend {
                limit.saturating_sub(start.elapsed())
            } else {
                limit
            };
            let endpoint = call.endpoint().clone();
            let request = self
                .head(&endpoint, left, retry.map(|r| &r.previous))
                .map_err(|s| (None, s))?;
            let frame = Cursor::new(self.prefix).chain(self.message.clone());
            self.pool.calls.inc();
            match attempt(call, request, frame, self.pool.max_response_bytes).await {
                Ok(answer) => {
                    endpoint.succeeded();
                    return Ok(answer);
                }
                Err(failure @ (Failure::NotSent(_) | Failure::Unreachable(_))) if !resend => {
                    tracing::debug!(upstream = %endpoint.authority, addr = %endpoint.addr, status = %failure_status(&failure), "call sent again");
                    failed = Some((endpoint, failure));
                }
                Err(failure) => {
                    let status = failure.into_status();
                    endpoint.answered_status(&status);
                    return Err((Some(endpoint), status));
                }
            }
        }
    }

    /// The request head of an attempt on `endpoint`.
    // Inlined: built in place, as the call loop built it before it had a function of its own
    // (returning it by value copied the head: `make bench-ir`).
    #[inline(always)]
    fn head(
        &self,
        endpoint: &Endpoint,
        left: Duration,
        previous: Option<&HeaderValue>,
    ) -> Result<Request<()>, Status> {
        let mut request = Request::new(());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = call_uri(endpoint, &self.path)?;
        let headers = request.headers_mut();
        *headers = call_headers(self.compress);
        headers.reserve(self.metadata.len() + 2);
        headers.insert(GRPC_TIMEOUT, grpc_timeout(left));
        if let Some(previous) = previous {
            headers.insert(PREVIOUS_ATTEMPTS, previous.clone());
        }
        for (name, value) in &self.metadata {
            // No metadata name is one of the call's own (`is_reserved_metadata` leaves them out).
            headers.append(name.clone(), value.clone());
        }
        Ok(request)
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
