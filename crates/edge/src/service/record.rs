//! `record`: every request, success or error, unary or streamed, is counted and timed once,
//! when its answer is over (a streamed answer: when its body ends, sent or abandoned).

use super::*;

impl Edge {
    /// Metrics and the per-request debug line: runs for every outcome.
    pub(super) fn record(&self, o: &Outcome) {
        let label = MethodName(
            o.method
                .clone()
                .unwrap_or_else(|| self.unknown_method.clone()),
        );
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                method: label.clone(),
                request_format: o.request_format,
                response_format: o.response_format,
                code: o.status.as_u16(),
                grpc_code: o.grpc_code.name(),
            })
            .inc();
        let elapsed = o.start.elapsed();
        self.metrics
            .request_duration
            .get_or_create(&MethodLabels { method: label })
            .observe(elapsed.as_secs_f64());
        tracing::debug!(
            method = o.method.as_deref().unwrap_or("unknown"),
            request_format = o.request_format,
            response_format = o.response_format,
            status = o.status.as_u16(),
            grpc_code = o.grpc_code.name(),
            elapsed_us = elapsed.as_micros() as u64,
            // Quoted and escaped: a client's words cannot pass for fields of the line.
            user_agent = &*o.user_agent,
            "request"
        );
    }
}

/// A request counted in flight from its head until this is dropped; dropped with an outcome,
/// the request is recorded (count by status, duration). A streamed answer holds it in its
/// body, so a stream counts until its last frame is sent or its client leaves (499); a
/// request whose client leaves before the answer is given a 499 outcome by its context's
/// drop.
pub(super) struct Finish {
    pub(super) edge: Arc<Edge>,
    pub(super) outcome: Option<Outcome>,
}

pub(super) struct Outcome {
    pub(super) method: Option<Arc<str>>,
    pub(super) request_format: &'static str,
    pub(super) response_format: &'static str,
    pub(super) status: StatusCode,
    pub(super) grpc_code: Code,
    /// A streamed answer's end, which decides `grpc_code` when its body ends.
    pub(super) stream_end: Option<Arc<StreamEnd>>,
    pub(super) start: Instant,
    pub(super) user_agent: Arc<str>,
}

impl Outcome {
    pub(super) fn of(ctx: &RequestCtx<'_>, status: StatusCode, grpc_code: Code) -> Outcome {
        let (request_format, response_format) = ctx.plan.map_or(("unknown", "unknown"), |f| {
            (f.request.as_str(), f.response.as_str())
        });
        Outcome {
            method: ctx.method.map(|m| m.full_name.clone()),
            request_format,
            response_format,
            status,
            grpc_code,
            stream_end: ctx.stream_end.clone(),
            start: ctx.start,
            user_agent: ctx.client.user_agent.clone(),
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        // Recorded before it leaves the gauge: in-flight 0 means counted.
        if let Some(outcome) = self.outcome.take() {
            self.edge.record(&outcome);
        }
        self.edge.metrics.in_flight.dec();
    }
}

impl BodyEnd for Finish {
    /// A streamed answer whose client left before its end is counted as 499 (the client
    /// closed the request), whatever status its headers carried; one that ended is counted
    /// under the gRPC code it ended with (a failure after the 200 headers is no success).
    fn body_end(mut self: Box<Self>, complete: bool) {
        let Some(outcome) = &mut self.outcome else {
            return;
        };
        if !complete {
            outcome.status = Code::Cancelled.http_status();
            outcome.grpc_code = Code::Cancelled;
        } else if let Some(code) = outcome.stream_end.as_ref().and_then(|e| e.get()) {
            outcome.grpc_code = code;
        }
    }
}

/// How a streamed answer ended, written by the stream and read when its body ends (the
/// answer's 200 and headers left long before): a gRPC code, or `NOT_ENDED`.
pub(crate) struct StreamEnd(std::sync::atomic::AtomicU8);

impl StreamEnd {
    const NOT_ENDED: u8 = u8::MAX;

    pub(super) fn new() -> StreamEnd {
        StreamEnd(std::sync::atomic::AtomicU8::new(Self::NOT_ENDED))
    }

    pub(super) fn set(&self, code: Code) {
        self.0
            .store(code as u8, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> Option<Code> {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            Self::NOT_ENDED => None,
            code => Some(Code::from_i32(code.into())),
        }
    }
}
