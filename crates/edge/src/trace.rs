//! Distributed tracing: a span per request and a child span per upstream call, made by a
//! [`Tracer`] the binary supplies (its OpenTelemetry exporter, the cargo feature `otel`). The
//! edge knows no exporter and no tracing library: with no tracer set, nothing here runs.

use http::HeaderMap;

use crate::error::Code;

/// Makes the spans of requests.
pub trait Tracer: Send + Sync + std::fmt::Debug + 'static {
    /// A request's server span: a child of the trace context the client's headers carry
    /// (`traceparent`), else the root of a new trace.
    fn request(&self, head: &http::request::Parts) -> Box<dyn Span>;
}

/// A span in progress.
pub trait Span: Send + Sync {
    /// The span of this request's call to `upstream` (`host:port`) for `method`
    /// (`pkg.Service/Method`), a child of this one; its trace context replaces the client's in
    /// `metadata`, which goes upstream.
    fn upstream_call(
        &self,
        method: &str,
        upstream: &str,
        metadata: &mut HeaderMap,
    ) -> Box<dyn Span>;

    /// Ends the span with what became of it.
    fn end(self: Box<Self>, end: &End<'_>);
}

/// How a request or call ended.
#[derive(Debug, Clone, Copy)]
pub struct End<'a> {
    /// The gRPC method (`pkg.Service/Method`), once routed.
    pub method: Option<&'a str>,
    /// The HTTP status answered (a request's span; none for an upstream call).
    pub http_status: Option<u16>,
    pub grpc_code: Code,
}
