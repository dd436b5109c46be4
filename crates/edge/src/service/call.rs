//! `call_upstream`: the one wrapper around every upstream call, whatever its shape. It owns
//! the deadline, the upstream-latency observation (from sending the request to the
//! upstream's first answer — a unary answer, a stream's headers — or its error) and the
//! mapping of a failure to the client's error (`upstream_failure` before the answer,
//! `mid_stream_failure` after a stream's first message).

use super::*;

/// One upstream call in progress: what its failures are mapped with.
pub(super) struct UpstreamCall<'a> {
    method: &'a Method,
    started: Instant,
    /// The deadline the call runs under (a stream without the client's: none).
    timeout: Option<Duration>,
    /// A pass-through request body, kept (a reference count) to diagnose a failure.
    sent: Option<Bytes>,
}

impl Edge {
    /// call_upstream: runs `call` under `timeout`, records its latency, and maps its failure.
    /// The returned [`UpstreamCall`] maps the failures of what follows (a stream's messages);
    /// the latency comes back whatever the outcome (the access log's).
    pub(super) async fn call_upstream<'m, T>(
        &self,
        method: &'m Method,
        timeout: Option<Duration>,
        sent: Option<Bytes>,
        call: impl Future<Output = Result<T, tonic::Status>>,
    ) -> (Result<(T, UpstreamCall<'m>), EdgeError>, Duration) {
        let this = UpstreamCall {
            method,
            started: Instant::now(),
            timeout,
            sent,
        };
        let answer = match timeout {
            Some(t) => tokio::time::timeout(t, call).await.ok(),
            None => Some(call.await),
        };
        let latency = this.started.elapsed();
        self.metrics.observe_upstream_duration(
            &MethodName(method.full_name.clone()),
            latency.as_secs_f64(),
        );
        let outcome = match answer {
            None => Err(EdgeError::DeadlineExceeded),
            Some(Ok(answer)) => Ok((answer, this)),
            Some(Err(status)) => Err(self.upstream_failure(&this, &status)),
        };
        (outcome, latency)
    }

    /// The client's error for a failure of `call` (its answer, or a message of its stream).
    pub(super) fn upstream_failure(
        &self,
        call: &UpstreamCall<'_>,
        status: &tonic::Status,
    ) -> EdgeError {
        // tonic's code, in the edge's one vocabulary from here on.
        let code = Code::from_i32(status.code() as i32);
        // The upstream enforces the grpc-timeout we sent and may answer CANCELLED (tonic) or
        // DEADLINE_EXCEEDED a little before our own timer on the call fires (the value sent is
        // rounded to its unit, and upstreams may keep a margin): within the last tenth of the
        // deadline, that is our deadline passing.
        if let Some(timeout) = call.timeout
            && matches!(code, Code::Cancelled | Code::DeadlineExceeded)
            && call.started.elapsed() >= timeout.mul_f64(0.9)
        {
            return EdgeError::DeadlineExceeded;
        }
        // An upstream that cannot decode a pass-through body answers INTERNAL (tonic,
        // grpc-go) or INVALID_ARGUMENT: if the body is malformed, that is the client's error,
        // and it is named as such.
        if let Some(sent) = &call.sent
            && matches!(code, Code::Internal | Code::InvalidArgument | Code::Unknown)
            && let Err(e) = self
                .schema
                .validate_protobuf(&call.method.input, sent, &self.transcode)
        {
            return EdgeError::BadBody(e);
        }
        upstream_error(code, status)
    }
}

/// A failure in the middle of a response stream: no timer of ours runs there and the request
/// was taken, so it is the upstream's status as it sent it (or the gateway's own loss of the
/// connection, in its words), never reinterpreted.
pub(super) fn mid_stream_failure(status: &tonic::Status) -> EdgeError {
    upstream_error(Code::from_i32(status.code() as i32), status)
}

/// A failed call's status as the client's error: the upstream's own status exactly as it sent
/// it (code, message, details, metadata), whatever the code; the gateway's own failure to get
/// an answer in the gateway's words.
fn upstream_error(code: Code, status: &tonic::Status) -> EdgeError {
    if code == Code::Unavailable && crate::upstream::made_by_gateway(status) {
        // Its message names the upstream and what went wrong.
        return EdgeError::Unavailable(status.message().to_owned());
    }
    let details = (!status.details().is_empty()).then(|| Bytes::copy_from_slice(status.details()));
    EdgeError::Upstream(Box::new(crate::error::UpstreamError {
        code,
        message: status.message().to_owned(),
        details,
        metadata: status.metadata().clone().into_headers(),
    }))
}
