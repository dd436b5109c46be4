//! OpenTelemetry export (cargo feature `otel`): the edge's request and upstream-call spans
//! ([`edge::trace`]) become OpenTelemetry spans, batched and sent over OTLP/gRPC to `[otel]
//! endpoint`. The client's W3C trace context (`traceparent`, `tracestate`) is the parent of
//! a request's span; the upstream is sent the trace context of the call's span instead.
//! Attribute names follow the OpenTelemetry semantic conventions for HTTP servers and RPC
//! clients (`http.request.method`, `url.path`, `http.response.status_code`, `rpc.system`,
//! `rpc.service`, `rpc.method`, `rpc.grpc.status_code`, `server.address`, `server.port`).

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

use crate::config::{ConfigError, OtelConfig};

/// The running exporter; [`Exporter::shutdown`] sends what is still batched.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Starts the exporter (inside the runtime: the batch runs on its own thread) and the
    /// tracer the edge calls.
    pub fn start(
        config: &OtelConfig,
    ) -> Result<(Exporter, Arc<dyn edge::trace::Tracer>), ConfigError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&config.endpoint)
            .build()
            .map_err(|e| ConfigError(format!("otel.endpoint {:?}: {e}", config.endpoint)))?;
        let batch = opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::TokioCurrentThread,
        )
        .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(batch)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                config.sample_ratio,
            ))))
            .with_resource(
                Resource::builder()
                    .with_service_name(config.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = Arc::new(OtelTracer {
            tracer: opentelemetry::trace::TracerProvider::tracer(&provider, "protogate"),
        });
        Ok((Exporter { provider }, tracer))
    }

    /// Sends the spans still batched (at most a few seconds) and stops.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "the OpenTelemetry exporter did not shut down cleanly");
        }
    }
}

#[derive(Debug)]
struct OtelTracer {
    tracer: SdkTracer,
}

impl edge::trace::Tracer for OtelTracer {
    fn request(&self, head: &http::request::Parts) -> Box<dyn edge::trace::Span> {
        let parent = TraceContextPropagator::new().extract(&Headers(&head.headers));
        let mut attributes = vec![
            KeyValue::new("http.request.method", head.method.as_str().to_owned()),
            KeyValue::new("url.path", head.uri.path().to_owned()),
            KeyValue::new("url.scheme", "http"),
            KeyValue::new(
                "network.protocol.version",
                match head.version {
                    http::Version::HTTP_2 => "2",
                    http::Version::HTTP_10 => "1.0",
                    _ => "1.1",
                },
            ),
        ];
        if let Some(agent) = head.headers.get(http::header::USER_AGENT)
            && let Ok(agent) = agent.to_str()
        {
            attributes.push(KeyValue::new("user_agent.original", agent.to_owned()));
        }
        let span = self
            .tracer
            .span_builder(head.method.as_str().to_owned())
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        Box::new(OtelSpan {
            cx: parent.with_span(span),
            tracer: self.tracer.clone(),
            http_method: Some(head.method.clone()),
        })
    }
}

/// A span in its context (a child is started from the context).
struct OtelSpan {
    cx: Context,
    tracer: SdkTracer,
    /// A request's HTTP method (none for an upstream call), for the final span name.
    http_method: Option<http::Method>,
}

impl edge::trace::Span for OtelSpan {
    fn upstream_call(
        &self,
        method: &str,
        upstream: &str,
        metadata: &mut HeaderMap,
    ) -> Box<dyn edge::trace::Span> {
        let (service, name) = method.split_once('/').unwrap_or((method, ""));
        let (host, port) = upstream.rsplit_once(':').unwrap_or((upstream, "80"));
        let mut attributes = vec![
            KeyValue::new("rpc.system", "grpc"),
            KeyValue::new("rpc.service", service.to_owned()),
            KeyValue::new("rpc.method", name.to_owned()),
            KeyValue::new("server.address", host.trim_matches(['[', ']']).to_owned()),
        ];
        if let Ok(port) = port.parse::<i64>() {
            attributes.push(KeyValue::new("server.port", port));
        }
        let span = self
            .tracer
            .span_builder(method.to_owned())
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        // The upstream's parent is this call, not the client's span.
        metadata.remove("traceparent");
        metadata.remove("tracestate");
        TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(metadata));
        Box::new(OtelSpan {
            cx,
            tracer: self.tracer.clone(),
            http_method: None,
        })
    }

    fn end(self: Box<Self>, end: &edge::trace::End<'_>) {
        let span = self.cx.span();
        let code = end.grpc_code as i64;
        span.set_attribute(KeyValue::new("rpc.grpc.status_code", code));
        match (&self.http_method, end.http_status) {
            // A request: named by its route once it has one; an error when the gateway
            // answered 5xx (a 4xx is the client's, not the server span's, error).
            (Some(http_method), status) => {
                if let Some(method) = end.method {
                    span.update_name(format!("{http_method} {method}"));
                    if let Some((service, name)) = method.split_once('/') {
                        span.set_attribute(KeyValue::new("rpc.system", "grpc"));
                        span.set_attribute(KeyValue::new("rpc.service", service.to_owned()));
                        span.set_attribute(KeyValue::new("rpc.method", name.to_owned()));
                    }
                }
                if let Some(status) = status {
                    span.set_attribute(KeyValue::new(
                        "http.response.status_code",
                        i64::from(status),
                    ));
                    if status >= 500 {
                        span.set_status(Status::error(format!("HTTP {status}")));
                    }
                }
            }
            // An upstream call: any code but OK is an error of the client span.
            (None, _) if code != 0 => {
                span.set_status(Status::error(end.grpc_code.name()));
            }
            (None, _) => {}
        }
        span.end();
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}
