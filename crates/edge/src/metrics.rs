//! Prometheus metrics, named exactly as the contract spells them. Label values are bounded:
//! methods come from the schema (unknown paths count as `unknown`), formats and reasons are
//! fixed words, codes are HTTP status codes.

use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A method name label: shared, so building a label set per request allocates nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct MethodName(pub Arc<str>);

impl EncodeLabelValue for MethodName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&&*self.0, encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: MethodName,
    pub request_format: &'static str,
    pub response_format: &'static str,
    /// The HTTP status code of the answer.
    pub code: u16,
    /// The gRPC status the answer ended with (`OK`, `Unavailable`, …: 17 values): a stream
    /// that fails after its 200 headers counts under its error here.
    pub grpc_code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: MethodName,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DowngradeLabels {
    pub method: MethodName,
    pub reason: &'static str,
}

/// `protogate_json_refused_total`: by method and `sunset` / `brownout`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub method: MethodName,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShedLabels {
    /// `concurrency`, `upstream_concurrency`, `memory` or `connections`.
    pub reason: &'static str,
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

/// Every metric the edge keeps. Built before serving; shared read-only (the metrics use
/// atomics inside).
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_duration: HistogramFamily,
    pub upstream_duration: HistogramFamily,
    pub downgrades: Family<DowngradeLabels, Counter>,
    pub in_flight: Gauge,
    pub shed: Family<ShedLabels, Counter>,
    /// Request bytes held by requests in flight (`max_inflight_bytes` bounds it).
    pub request_bytes_held: Gauge,
    /// Client connections open.
    pub connections: Gauge,
    /// Requests refused by a JSON sunset rule.
    pub json_refused: Family<RefusedLabels, Counter>,
    /// 1 for the schema in force, by its digest and where it came from.
    pub schema_info: Family<SchemaLabels, Gauge>,
    /// Reloads of the configuration and schema, by result (`ok`, `failed`).
    pub schema_reloads: Family<ResultLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SchemaLabels {
    pub digest: String,
    /// `files` (descriptor sets or `.proto` files), `reflection` (the upstreams' server
    /// reflection) or `files+reflection`.
    pub source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~26 s in 19 doublings: covers a cached small message up to a slow upstream.
    Histogram::new(exponential_buckets(0.0001, 2.0, 19))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let request_duration: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let upstream_duration: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let downgrades = Family::<DowngradeLabels, Counter>::default();
        let in_flight = Gauge::default();
        registry.register(
            "protogate_requests",
            "Requests answered, by method, request and response format, and HTTP status",
            requests.clone(),
        );
        registry.register(
            "protogate_request_duration_seconds",
            "Time from request head to response, by method",
            request_duration.clone(),
        );
        registry.register(
            "protogate_upstream_request_duration_seconds",
            "Time the upstream took to answer a call, by method",
            upstream_duration.clone(),
        );
        registry.register(
            "protogate_downgrades",
            "Protobuf messages rendered as JSON (or with dropped unknown fields), by method and reason",
            downgrades.clone(),
        );
        registry.register(
            "protogate_requests_in_flight",
            "Requests being served right now",
            in_flight.clone(),
        );
        let shed = Family::<ShedLabels, Counter>::default();
        registry.register(
            "protogate_shed",
            "Requests and connections refused at once because a limit was reached, by reason",
            shed.clone(),
        );
        let request_bytes_held = Gauge::default();
        registry.register(
            "protogate_request_bytes_held",
            "Bytes of request bodies (and of their answers) held by requests in flight",
            request_bytes_held.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "protogate_connections",
            "Client connections open",
            connections.clone(),
        );
        let json_refused = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "protogate_json_refused",
            "Requests refused because JSON on their method is past its sunset or in a brownout, by method and reason",
            json_refused.clone(),
        );
        let schema_info = Family::<SchemaLabels, Gauge>::default();
        registry.register(
            "protogate_schema_info",
            "1 for the schema in force, by the digest of its FileDescriptorSet and its source",
            schema_info.clone(),
        );
        let schema_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "protogate_schema_reloads",
            "Reloads of the configuration and schema (SIGHUP, a watched file changed), by result",
            schema_reloads.clone(),
        );
        Metrics {
            schema_info,
            schema_reloads,
            json_refused,
            registry,
            shed,
            request_bytes_held,
            connections,
            requests,
            request_duration,
            upstream_duration,
            downgrades,
            in_flight,
        }
    }

    /// The upstreams' families: endpoints by state, calls sent.
    pub(crate) fn register_upstreams(
        &mut self,
        (endpoints, calls): (
            Family<crate::upstream::EndpointLabels, Gauge>,
            Family<crate::upstream::UpstreamLabels, Counter>,
        ),
    ) {
        self.registry.register(
            "protogate_upstream_endpoints",
            "Endpoints of each upstream (every address its URLs resolve to), by state: healthy or ejected",
            endpoints,
        );
        self.registry.register(
            "protogate_upstream_requests",
            "Calls sent to each upstream (retries included), by the upstream as configured",
            calls,
        );
    }

    /// The exposition text (OpenMetrics, which Prometheus scrapes natively).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The Content-Type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
