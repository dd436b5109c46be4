//! `record`: every request of the API's, success or error, unary or streamed, and every
//! refusal of the gateway's own endpoints, is counted and timed once, when its answer is over
//! (a streamed answer: when its body ends, sent or abandoned).

use super::*;

impl Edge {
    /// Metrics and the per-request debug line: runs for every outcome.
    pub(super) fn record(&self, o: &Outcome) {
        let label = MethodName(
            o.method
                .clone()
                .unwrap_or_else(|| self.unknown_method.clone()),
        );
        self.metrics.count_request(&RequestLabels {
            method: label.clone(),
            request_format: o.request_format,
            response_format: o.response_format,
            code: o.status.as_u16(),
            grpc_code: o.grpc_code.name(),
            protocol: o.protocol.label(),
        });
        let elapsed = o.start.elapsed();
        self.metrics
            .observe_request_duration(&label, elapsed.as_secs_f64());
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
        if let Some(a) = &o.access {
            tracing::info!(
                target: "protogate::access",
                http_method = a.http_method.as_str(),
                path = &*a.path,
                route = o.method.as_deref().unwrap_or("-"),
                protocol = o.protocol.label(),
                request_format = o.request_format,
                response_format = o.response_format,
                status = o.status.as_u16(),
                grpc_code = o.grpc_code.name(),
                bytes_in = a.bytes_in,
                bytes_out = a.bytes_out,
                duration_us = elapsed.as_micros() as u64,
                upstream_us = a.upstream.map(|d| d.as_micros() as u64),
                request_id = a.request_id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or("-"),
                user_agent = &*o.user_agent,
                client_id = a.client_id.as_deref().unwrap_or("-"),
                client_verified = a.client_verified,
                downgrade = %account::Names(o.downgrades),
                "access"
            );
        }
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
    pub(super) protocol: Protocol,
    pub(super) request_format: &'static str,
    pub(super) response_format: &'static str,
    pub(super) status: StatusCode,
    pub(super) grpc_code: Code,
    /// A streamed answer's end, which decides `grpc_code` when its body ends.
    pub(super) stream_end: Option<Arc<StreamEnd>>,
    pub(super) start: Instant,
    pub(super) user_agent: Arc<str>,
    /// The request's downgrades (`account.rs`).
    pub(super) downgrades: DowngradeSet,
    /// What the access log adds, when it is on.
    pub(super) access: Option<Box<Access>>,
    /// The request's span and its upstream call's (a stream's, still open), when tracing.
    pub(super) spans: Option<Box<Spans>>,
}

pub(super) type Spans = (
    Option<Box<dyn crate::trace::Span>>,
    Option<Box<dyn crate::trace::Span>>,
);

/// An access log line's fields beyond the outcome's.
pub(super) struct Access {
    pub(super) http_method: http::Method,
    pub(super) path: Box<str>,
    pub(super) request_id: Option<HeaderValue>,
    pub(super) client_id: Option<Arc<str>>,
    /// Whether a certificate, a token or an API key verified `client_id`.
    pub(super) client_verified: bool,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    pub(super) upstream: Option<Duration>,
}

impl Outcome {
    pub(super) fn of(ctx: &RequestCtx<'_>, status: StatusCode, grpc_code: Code) -> Outcome {
        let (request_format, response_format) = ctx.plan.map_or(("unknown", "unknown"), |f| {
            (f.request.as_str(), f.response.as_str())
        });
        let access = ctx.access_log.then(|| {
            Box::new(Access {
                http_method: ctx.head.method.clone(),
                path: ctx.head.uri.path().into(),
                request_id: ctx
                    .made_request_id
                    .clone()
                    .or_else(|| ctx.head.headers.get(X_REQUEST_ID).cloned()),
                client_id: ctx.caller.client.client_id.clone(),
                client_verified: ctx.caller.id.is_verified(),
                bytes_in: ctx.ticket.as_ref().map_or(0, |t| t.request_bytes() as u64),
                bytes_out: 0,
                upstream: ctx.upstream_latency,
            })
        });
        Outcome {
            access,
            downgrades: account::request_downgrades(ctx),
            method: ctx.method.map(|m| m.full_name.clone()),
            protocol: ctx.protocol,
            request_format,
            response_format,
            status,
            // An answer that ended with its head (a relayed trailers-only answer) carries
            // its code there.
            grpc_code: ctx
                .stream_end
                .as_ref()
                .and_then(|end| end.get())
                .unwrap_or(grpc_code),
            stream_end: ctx.stream_end.clone(),
            start: ctx.start,
            user_agent: ctx.caller.client.user_agent.clone(),
            spans: None,
        }
    }

    /// Ends the spans with the outcome: the upstream call's (a stream's) first.
    fn end_spans(&mut self) {
        let Some(spans) = self.spans.take() else {
            return;
        };
        let (request, call) = *spans;
        let end = crate::trace::End {
            method: self.method.as_deref(),
            http_status: None,
            grpc_code: self.grpc_code,
        };
        if let Some(call) = call {
            call.end(&end);
        }
        if let Some(request) = request {
            request.end(&crate::trace::End {
                http_status: Some(self.status.as_u16()),
                ..end
            });
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        // Recorded before it leaves the gauge: in-flight 0 means counted.
        if let Some(mut outcome) = self.outcome.take() {
            self.edge.record(&outcome);
            outcome.end_spans();
        }
        self.edge.metrics.in_flight.dec();
    }
}

impl BodyEnd for Finish {
    /// A streamed answer whose client left before its end is counted as 499 (the client
    /// closed the request), whatever status its headers carried; one that ended is counted
    /// under the gRPC code it ended with (a failure after the 200 headers is no success).
    fn body_end(mut self: Box<Self>, complete: bool, sent: u64) {
        let Some(outcome) = &mut self.outcome else {
            return;
        };
        if let Some(access) = &mut outcome.access {
            access.bytes_out = sent;
        }
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
