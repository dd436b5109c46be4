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
    /// The client protocol (`http`, `grpc`, `grpc-web`).
    pub protocol: &'static str,
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

/// `protogate_upstream_requests_total`'s labels: the upstream as configured.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    pub upstream: MethodName,
}

/// `protogate_upstream_retries_total`'s labels: the upstream, and the code retried.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    pub upstream: MethodName,
    /// The status of the attempt that was retried, as `grpc_code` names it.
    pub code: &'static str,
}

/// The upstreams' metric families: the upstream pools fill them, the registry exposes them
/// (`register_upstreams`).
#[derive(Clone, Debug, Default)]
pub(crate) struct UpstreamFamilies {
    /// `protogate_upstream_endpoints{upstream,state}`.
    pub(crate) endpoints: Family<EndpointLabels, Gauge>,
    /// `protogate_upstream_requests_total{upstream}`.
    pub(crate) calls: Family<UpstreamLabels, Counter>,
    /// `protogate_upstream_retries_total{upstream,code}`.
    pub(crate) retries: Family<RetryLabels, Counter>,
    /// `protogate_upstream_retries_refused_total{upstream}`.
    pub(crate) retries_refused: Family<UpstreamLabels, Counter>,
}

/// `protogate_upstream_endpoints`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub upstream: MethodName,
    /// `healthy` or `ejected`.
    pub state: &'static str,
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

/// A method's series of `protogate_request_duration_seconds`,
/// `protogate_upstream_request_duration_seconds` and `protogate_requests_total` (handles
/// shared with the families), each made in its family when first observed.
#[derive(Default)]
struct MethodSeries {
    request: std::sync::OnceLock<Histogram>,
    upstream: std::sync::OnceLock<Histogram>,
    /// The method's `protogate_requests_total` series seen so far (at most
    /// [`COUNTERS_PER_METHOD`]; past them, the family is asked each time).
    counters: std::sync::Mutex<Vec<(CounterKey, Counter)>>,
}

/// A request series' labels besides the method.
#[derive(PartialEq)]
struct CounterKey {
    request_format: &'static str,
    response_format: &'static str,
    code: u16,
    grpc_code: &'static str,
    protocol: &'static str,
}

/// The request series kept per method: formats × the statuses a method usually answers with.
const COUNTERS_PER_METHOD: usize = 32;

/// Every metric the edge keeps. Built before serving; shared read-only (the metrics use
/// atomics inside).
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: HistogramFamily,
    upstream_duration: HistogramFamily,
    /// The series of each method seen (its histograms and request counters), found with one
    /// lookup by a fast hasher (the keys are the schema's method names and `unknown`): three
    /// `get_or_create`s hashed their label sets with SipHash under the families' locks every
    /// request.
    by_method: std::sync::RwLock<
        std::collections::HashMap<Arc<str>, MethodSeries, foldhash::fast::RandomState>,
    >,
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
    /// Requests whose credentials were refused (or missing where required), by reason.
    pub auth_failures: Family<ReasonLabels, Counter>,
    /// Requests refused by a client's rate limit, by method (no client label: unbounded).
    pub rate_limited: Family<MethodLabels, Counter>,
    /// Rate-limit checks the shared backend (Redis) did not answer in time.
    pub rate_limit_backend_errors: Counter,
    /// 1 for the running binary, by its version and revision.
    pub build_info: Family<BuildLabels, Gauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub revision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
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

/// `method`'s histogram in `family` (made there if new).
fn family_member(family: &HistogramFamily, method: &MethodName) -> Histogram {
    family
        .get_or_create(&MethodLabels {
            method: method.clone(),
        })
        .clone()
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
        let auth_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "protogate_auth_failures",
            "Requests refused 401: credentials not valid, or required and missing, by reason",
            auth_failures.clone(),
        );
        let rate_limited = Family::<MethodLabels, Counter>::default();
        registry.register(
            "protogate_rate_limited",
            "Requests refused 429 by a client's rate limit, by method",
            rate_limited.clone(),
        );
        let rate_limit_backend_errors = Counter::default();
        registry.register(
            "protogate_rate_limit_backend_errors",
            "Rate-limit checks the shared backend (Redis) did not answer in time; the local bucket decided",
            rate_limit_backend_errors.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "protogate_build_info",
            "1 for the running binary, by its version and the revision it was built from",
            build_info.clone(),
        );
        // Every series whose labels are known now starts at 0, so a dashboard's panel and a
        // rate() alert see a healthy gateway's zero, not "no data".
        for reason in crate::shed::ShedReason::ALL {
            let _at_zero = shed.get_or_create(&ShedLabels {
                reason: reason.as_str(),
            });
        }
        for result in ["ok", "failed"] {
            let _at_zero = schema_reloads.get_or_create(&ResultLabels { result });
        }
        Metrics {
            build_info,
            auth_failures,
            rate_limited,
            rate_limit_backend_errors,
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
            by_method: Default::default(),
            downgrades,
            in_flight,
        }
    }

    /// Counts an answered request in `protogate_requests_total`.
    pub fn count_request(&self, labels: &RequestLabels) {
        let key = CounterKey {
            request_format: labels.request_format,
            response_format: labels.response_format,
            code: labels.code,
            grpc_code: labels.grpc_code,
            protocol: labels.protocol,
        };
        self.with_method(&labels.method, |h| {
            let mut counters = h
                .counters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((_, counter)) = counters.iter().find(|(k, _)| *k == key) {
                counter.inc();
                return;
            }
            let counter = self.requests.get_or_create(labels).clone();
            counter.inc();
            if counters.len() < COUNTERS_PER_METHOD {
                counters.push((key, counter));
            }
        });
    }

    /// Observes a request's duration (head to response) for `method`.
    pub fn observe_request_duration(&self, method: &MethodName, seconds: f64) {
        self.with_method(method, |h| {
            h.request
                .get_or_init(|| family_member(&self.request_duration, method))
                .observe(seconds)
        });
    }

    /// Observes an upstream call's duration for `method`.
    pub fn observe_upstream_duration(&self, method: &MethodName, seconds: f64) {
        self.with_method(method, |h| {
            h.upstream
                .get_or_init(|| family_member(&self.upstream_duration, method))
                .observe(seconds)
        });
    }

    fn with_method(&self, method: &MethodName, f: impl FnOnce(&MethodSeries)) {
        use std::sync::PoisonError;
        if let Some(h) = self
            .by_method
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&*method.0)
        {
            return f(h);
        }
        let mut by_method = self
            .by_method
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        f(by_method.entry(method.0.clone()).or_default());
    }

    /// The upstreams' families: endpoints by state, calls sent, retries.
    pub(crate) fn register_upstreams(&mut self, families: UpstreamFamilies) {
        self.registry.register(
            "protogate_upstream_endpoints",
            "Endpoints of each upstream (every address its URLs resolve to), by state: healthy or ejected",
            families.endpoints,
        );
        self.registry.register(
            "protogate_upstream_requests",
            "Calls sent to each upstream (retries included), by the upstream as configured",
            families.calls,
        );
        self.registry.register(
            "protogate_upstream_retries",
            "Attempts a retry policy sent again, by upstream and the status the attempt before had",
            families.retries,
        );
        self.registry.register(
            "protogate_upstream_retries_refused",
            "Retries a retry policy asked for that the upstream's retry budget did not allow",
            families.retries_refused,
        );
    }

    /// The exposition text (OpenMetrics, which Prometheus scrapes natively).
    pub fn render(&self) -> String {
        self.render_with(&Scraped::default())
    }

    /// The exposition text with the series read when scraped.
    pub fn render_with(&self, scraped: &Scraped<'_>) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        let scraped = scraped_registry(scraped);
        if let Some(body) = out.strip_suffix("# EOF\n") {
            let mut text = body.to_string();
            let _ = prometheus_client::encoding::text::encode(&mut text, &scraped);
            out = text;
        }
        out
    }
}

/// A client name as a label value, escaped as the exposition format asks (the crate writes
/// values as they are; method names never need it, a client's name may hold `"` or `\\`).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct ClientName(Arc<str>);

impl EncodeLabelValue for ClientName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        let mut rest = &*self.0;
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientRequestLabels {
    client: ClientName,
    method: MethodName,
    request_format: &'static str,
    response_format: &'static str,
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientDowngradeLabels {
    client: ClientName,
    method: MethodName,
    reason: &'static str,
}

/// What is read when `/metrics` is scraped, not kept in the registry.
#[derive(Debug, Default)]
pub struct Scraped<'a> {
    /// `protogate_client_requests_total`: each method's exported clients (the migration
    /// report's `Exporter`), zero series left out.
    pub client_requests: &'a [ClientRequests],
    /// `protogate_client_downgrades_total`, the same way.
    pub client_downgrades: &'a [ClientDowngrades],
    /// The `process_*` series.
    pub process: Option<Process>,
    /// The listener certificate's notAfter, Unix seconds
    /// (`protogate_tls_certificate_expiration_timestamp_seconds{name="server"}`).
    pub certificate_expiry: Option<i64>,
}

/// One `protogate_client_requests_total` series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRequests {
    pub client: Arc<str>,
    pub method: Arc<str>,
    pub request_format: &'static str,
    pub response_format: &'static str,
    pub protocol: &'static str,
    pub count: u64,
}

/// One `protogate_client_downgrades_total` series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientDowngrades {
    pub client: Arc<str>,
    pub method: Arc<str>,
    pub reason: &'static str,
    pub count: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    name: &'static str,
}

/// The process's own figures (read by the binary: `EdgeConfig::process`), under the names
/// every Prometheus client library uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Process {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub open_fds: u64,
    /// The soft limit (`None`: unlimited).
    pub max_fds: Option<u64>,
    pub start_time_seconds: f64,
}

/// The series made at each scrape, in a registry of their own.
fn scraped_registry(scraped: &Scraped<'_>) -> Registry {
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    let mut registry = Registry::default();
    if !scraped.client_requests.is_empty() || !scraped.client_downgrades.is_empty() {
        let requests = Family::<ClientRequestLabels, Counter>::default();
        for r in scraped.client_requests {
            requests
                .get_or_create(&ClientRequestLabels {
                    client: ClientName(r.client.clone()),
                    method: MethodName(r.method.clone()),
                    request_format: r.request_format,
                    response_format: r.response_format,
                    protocol: r.protocol,
                })
                .inc_by(r.count);
        }
        let downgrades = Family::<ClientDowngradeLabels, Counter>::default();
        for d in scraped.client_downgrades {
            downgrades
                .get_or_create(&ClientDowngradeLabels {
                    client: ClientName(d.client.clone()),
                    method: MethodName(d.method.clone()),
                    reason: d.reason,
                })
                .inc_by(d.count);
        }
        registry.register(
            "protogate_client_requests",
            "Requests of each method's top clients ([migration] export_clients per method; the rest under client=\"other\"), by formats and protocol",
            requests,
        );
        registry.register(
            "protogate_client_downgrades",
            "Downgrades of each method's top clients (the rest under client=\"other\"), by reason",
            downgrades,
        );
    }
    if let Some(at) = scraped.certificate_expiry {
        let family = Family::<CertificateLabels, Gauge>::default();
        family
            .get_or_create(&CertificateLabels { name: "server" })
            .set(at);
        registry.register(
            "protogate_tls_certificate_expiration_timestamp_seconds",
            "When the listener's TLS certificate in force expires (its notAfter), in Unix seconds",
            family,
        );
    }
    if let Some(p) = &scraped.process {
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            ConstCounter::new(p.cpu_seconds),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            ConstGauge::new(p.resident_bytes as i64),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors",
            ConstGauge::new(p.open_fds as i64),
        );
        if let Some(max) = p.max_fds {
            registry.register(
                "process_max_fds",
                "Maximum number of open file descriptors",
                ConstGauge::new(max as i64),
            );
        }
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            ConstGauge::new(p.start_time_seconds),
        );
    }
    registry
}

/// The Content-Type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, start: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(start))
    }

    #[test]
    fn a_methods_histograms_are_its_families_series_made_when_first_observed() {
        let metrics = Metrics::new();
        let echo = MethodName(Arc::from("bench.v1.BenchService/EchoOrder"));
        metrics.observe_request_duration(&echo, 0.001);
        // Another Arc of the same name is the same series.
        let again = MethodName(Arc::from("bench.v1.BenchService/EchoOrder"));
        metrics.observe_request_duration(&again, 0.002);
        let text = metrics.render();
        let count =
            r#"protogate_request_duration_seconds_count{method="bench.v1.BenchService/EchoOrder"}"#;
        assert_eq!(line(&text, count), Some(&*format!("{count} 2")), "{text}");
        // Never observed: no upstream series yet.
        assert!(
            !text.contains("protogate_upstream_request_duration_seconds_count{"),
            "{text}"
        );
        metrics.observe_upstream_duration(&echo, 0.0005);
        let text = metrics.render();
        let count = r#"protogate_upstream_request_duration_seconds_count{method="bench.v1.BenchService/EchoOrder"}"#;
        assert_eq!(line(&text, count), Some(&*format!("{count} 1")), "{text}");
    }

    #[test]
    fn request_counters_are_the_familys_series_kept_or_not() {
        let metrics = Metrics::new();
        let echo = MethodName(Arc::from("pkg.S/M"));
        let labels = |code: u16| RequestLabels {
            method: echo.clone(),
            request_format: "json",
            response_format: "protobuf",
            code,
            grpc_code: "OK",
            protocol: "http",
        };
        // More distinct series than a method keeps: those past the kept ones are counted
        // through the family, every one exactly.
        let codes: Vec<u16> = (0..COUNTERS_PER_METHOD as u16 + 8)
            .map(|i| 200 + i)
            .collect();
        for round in 1..=3 {
            for &code in &codes {
                metrics.count_request(&labels(code));
            }
            let text = metrics.render();
            for &code in &codes {
                let series = format!(
                    r#"protogate_requests_total{{method="pkg.S/M",request_format="json",response_format="protobuf",code="{code}",grpc_code="OK",protocol="http"}}"#
                );
                assert_eq!(
                    line(&text, &series),
                    Some(&*format!("{series} {round}")),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn client_series_escape_their_names_and_sit_before_the_end() {
        let requests = |client: &str| ClientRequests {
            client: Arc::from(client),
            method: Arc::from("p.S/M"),
            request_format: "json",
            response_format: "json",
            protocol: "http",
            count: 1,
        };
        let client_requests = [requests("web"), requests("a\"b\\c")];
        let client_downgrades = [ClientDowngrades {
            client: Arc::from("web"),
            method: Arc::from("p.S/M"),
            reason: "json_requested",
            count: 1,
        }];
        let process = Process {
            cpu_seconds: 1.5,
            resident_bytes: 1 << 20,
            open_fds: 7,
            max_fds: None,
            start_time_seconds: 1.7e9,
        };
        let text = Metrics::new().render_with(&Scraped {
            client_requests: &client_requests,
            client_downgrades: &client_downgrades,
            process: Some(process),
            certificate_expiry: Some(1_800_000_000),
        });
        for want in [
            r#"protogate_client_requests_total{client="web",method="p.S/M",request_format="json",response_format="json",protocol="http"} 1"#,
            r#"protogate_client_requests_total{client="a\"b\\c",method="p.S/M",request_format="json",response_format="json",protocol="http"} 1"#,
            r#"protogate_client_downgrades_total{client="web",method="p.S/M",reason="json_requested"} 1"#,
            "process_cpu_seconds_total 1.5",
            "process_resident_memory_bytes 1048576",
            "process_open_fds 7",
            "process_start_time_seconds 1700000000.0",
            r#"protogate_tls_certificate_expiration_timestamp_seconds{name="server"} 1800000000"#,
        ] {
            assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
        }
        assert!(!text.contains("process_max_fds"), "{text}");
        assert!(
            !text.contains(r#"_total{client="other""#),
            "nothing else: {text}"
        );
        assert_eq!(text.matches("# EOF").count(), 1);
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
