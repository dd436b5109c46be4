//! Migration insight: who still speaks JSON, what it costs, and a JSON sunset
//! policy with brownouts. Pure and I/O-free: times are parameters, nothing here logs, reads
//! a clock, or touches a socket; the request path, the config and the admin endpoints call it.
//!
//! # Layout
//! - `client`: [`ClientId`], who the client is (headers, mTLS, User-Agent).
//! - `tracker`: [`Tracker`], the bounded per-method, per-client counts, drops, 24 h JSON
//!   share and conversion costs ([`Finished`], [`Conversion`]).
//! - `table`, `series`: the Space-Saving client table and the one-minute ring behind it.
//! - `sunset`: [`SunsetPolicy`], [`SunsetRule`] → [`JsonDecision`] and its headers.
//! - `dates`: [`parse_time`], [`parse_duration`], [`parse_brownout`]; RFC 3339 and
//!   HTTP-date rendering.
//! - `export`: [`Exporter`], the top clients of each method as Prometheus series.
//! - `fleet`: the fleet's report from Prometheus ([`from_prometheus`]).
//! - `parse`, `merge`: [`parse_json`] reads a document back; [`Report::merge`] makes the
//!   fleet's report of its replicas'.
//! - `report`, `page`, `json`: [`Report`] (plain data), [`render_html`], [`render_json`].
//!
//! # Wiring
//! Built once (config → `Edge`):
//! ```text
//! let policy = SunsetPolicy::new(rules)?;                 // rules from [[json_sunset]]:
//!     // SunsetRule { selector, deprecation: parse_time(..)?, sunset, link,
//!     //              brownouts: parse_brownout(..)? each, exempt_clients }
//! policy.effective(schema.methods().map(|m| &*m.full_name))?;  // ambiguity → start-up error;
//!     // the Vec it returns is what `check` prints (method, rule.selector(), phase …)
//! let tracker = Tracker::new(max_clients);                // migration.max_clients, default 1,000
//! ```
//! Per request, once the plan is known (`negotiate`):
//! ```text
//! let client = ClientId::from_request(&head.headers, config.client_id_header.as_ref(), None);
//! if plan.response == Format::Json {
//!     match policy.decide(&method.full_name, SystemTime::now(), client.name(), client.is_verified()) {
//!         JsonDecision::Allowed => {}
//!         JsonDecision::Deprecated { headers } => { /* headers.apply(answer.headers_mut());
//!                                                     count Reason::JsonDeprecated */ }
//!         JsonDecision::Exempt { headers, .. } => { /* headers.apply(..) */ }
//!         JsonDecision::Refused { reason, message } => { /* 406 (415 for a JSON body),
//!             google.rpc.Status{message} in JSON, protogate_json_refused_total{method,reason} */ }
//!     }
//! }
//! ```
//! Around each conversion: `let t = Instant::now(); … ; Conversion { format, protobuf_bytes,
//! format_bytes, elapsed: t.elapsed() }` — put a unary call's into [`Finished`], record a
//! stream's messages with [`Tracker::record_conversion`]. When the request is over (`record`):
//! ```text
//! tracker.record(&method.full_name, &client, &Finished { request, response, downgrades,
//!     dropped: &findings.unknown_fields, verdict: decision.verdict(),
//!     request_conversion, answer_conversion }, SystemTime::now());
//! ```
//! (`client.into_owned()` keeps it past the request's headers, for a streamed answer.)
//! Admin endpoints:
//! ```text
//! let report = tracker.report(&policy, method_glob, SystemTime::now());
//! GET /admin/migration       → render_html(&report), text/html; charset=utf-8
//! GET /admin/migration.json  → render_json(&report), application/json
//! ```
//! The JSON document's fields are listed in `json.rs`.

/// The `[migration]` settings and the client header, for [`crate::EdgeConfig`].
#[derive(Debug, Clone)]
pub struct MigrationConfig {
    /// (method, client) rows kept in the whole gateway (default [`DEFAULT_MAX_CLIENTS`]).
    pub max_clients: usize,
    /// A header naming the client, read after `x-client-id` (`client_id_header`).
    pub client_id_header: Option<http::HeaderName>,
    /// Which clients have Prometheus series of their own (`export_clients`,
    /// `export_unverified`).
    pub export: ExportSettings,
    /// This gateway's name on its page (the pod name, else the host name).
    pub instance: Option<String>,
    /// Where the page reads the fleet's view (`fleet_prometheus`): Prometheus's HTTP API.
    pub fleet_prometheus: Option<crate::fetch::HttpUrl>,
}

impl Default for MigrationConfig {
    fn default() -> MigrationConfig {
        MigrationConfig {
            max_clients: DEFAULT_MAX_CLIENTS,
            client_id_header: None,
            export: ExportSettings::default(),
            instance: None,
            fleet_prometheus: None,
        }
    }
}

mod client;
mod dates;
mod export;
mod figures;
#[cfg(test)]
mod fixture;
mod fleet;
mod json;
mod merge;
mod page;
mod parse;
mod report;
mod series;
mod sunset;
mod table;
mod tracker;

pub use client::{ClientId, MAX_NAME_BYTES, Source, UNKNOWN, X_CLIENT_ID};
pub use dates::{
    Brownout, ParseError, http_date, parse_brownout, parse_duration, parse_time, rfc3339,
};
pub use export::{DEFAULT_EXPORT_CLIENTS, ExportSettings, Exporter, MethodSeries, OTHER, samples};
pub use figures::{number, percent, thousands};
pub use fleet::{Sample, from_prometheus, is_range, parse_vector, queries};
pub use json::render_json;
pub use page::{Views, esc, render_html};
pub use parse::parse_json;
pub use report::{
    ClientReport, FieldReport, MethodReport, Origin, Report, ShareSeries, SunsetReport,
    sunset_report,
};
pub use sunset::{
    DEPRECATION, DeprecationHeaders, JsonDecision, Phase, PolicyError, RefusalReason, Rule, SUNSET,
    SunsetPolicy, SunsetRule, Verdict, dotted, glob_match,
};
pub use tracker::{
    Conversion, ConversionTotals, Cost, Counts, DEFAULT_MAX_CLIENTS, Direction, DowngradeSet,
    FORMATS, Finished, FormatMix, MAX_DROPPED_FIELDS, MAX_METHODS, REASONS, Tracker,
};
