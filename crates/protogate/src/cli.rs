//! The command line, per ../shared/contract.md, and the readers of its values that are more
//! than a number or a name (`report`'s `--admin-url` and `--timeout`): `report` uses this
//! module, never the other way round.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "protogate",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PROTOGATE_GIT_REVISION"), ")"),
    about = "A content-negotiating RPC gateway: JSON, MessagePack and Protobuf in front of gRPC"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the gateway.
    Serve(ServeArgs),
    /// Load and validate everything `serve` would (configuration, schema, REST rules, upstream
    /// URLs, TLS files, the JSON sunset policy) without opening a port; print the route table
    /// and the sunset policy per method (exit 0), or every problem found (exit 64).
    Check(ServeArgs),
    /// Run an embedded demo shop service with the gateway in front of it and print curl examples.
    Demo(DemoArgs),
    /// Convert one message between JSON, MessagePack and Protobuf (stdin to stdout).
    Convert(ConvertArgs),
    /// Print a running gateway's migration report: who still speaks JSON, what it costs, the
    /// sunset state (its GET /admin/migration.json).
    Report(ReportArgs),
    /// Read an Envoy gRPC-JSON transcoder or a grpc-gateway set-up and print the
    /// protogate.toml that serves the same requests, naming every option it cannot carry over.
    Import(ImportArgs),
}

/// `protogate import`.
#[derive(Args, Debug, Clone, Default)]
#[command(group = clap::ArgGroup::new("from").required(true).args(["envoy", "grpc_gateway"]))]
pub struct ImportArgs {
    /// An Envoy configuration (YAML or JSON) with a grpc_json_transcoder filter in
    /// static_resources: its listener, routes and clusters are read too.
    #[arg(long, value_name = "FILE")]
    pub envoy: Option<PathBuf>,
    /// A grpc-gateway set-up: its options in a small TOML file (docs/coming-from-envoy.md
    /// shows its keys), or none with the flags below alone.
    #[arg(long = "grpc-gateway", value_name = "FILE", num_args = 0..=1)]
    pub grpc_gateway: Option<Option<PathBuf>>,
    /// grpc-gateway: the gRPC server's address (its --grpc-server-endpoint).
    #[arg(long, value_name = "HOST:PORT")]
    pub grpc_server_endpoint: Option<String>,
    /// grpc-gateway: the address it listens on.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// grpc-gateway: protojson's MarshalOptions.EmitUnpopulated.
    #[arg(long)]
    pub emit_unpopulated: bool,
    /// grpc-gateway: protojson's MarshalOptions.EmitDefaultValues.
    #[arg(long)]
    pub emit_default_values: bool,
    /// grpc-gateway: protojson's MarshalOptions.UseProtoNames.
    #[arg(long)]
    pub use_proto_names: bool,
    /// grpc-gateway: protojson's MarshalOptions.UseEnumNumbers.
    #[arg(long)]
    pub use_enum_numbers: bool,
    /// grpc-gateway: protojson's MarshalOptions.Indent (with Multiline), e.g. "  ".
    #[arg(long, value_name = "STRING")]
    pub indent: Option<String>,
    /// grpc-gateway: protojson's MarshalOptions.Multiline.
    #[arg(long)]
    pub multiline: bool,
    /// grpc-gateway: protojson's UnmarshalOptions.DiscardUnknown.
    #[arg(long)]
    pub discard_unknown: bool,
    /// grpc-gateway: a header its WithIncomingHeaderMatcher passes (a name, or a prefix
    /// ending in `*`). Repeatable.
    #[arg(long = "incoming-header", value_name = "NAME")]
    pub incoming_headers: Vec<String>,
    /// grpc-gateway: a metadata name its WithOutgoingHeaderMatcher passes. Repeatable.
    #[arg(long = "outgoing-header", value_name = "NAME")]
    pub outgoing_headers: Vec<String>,
    #[command(flatten)]
    pub schema: SchemaArgs,
}

/// Where the schema comes from.
#[derive(Args, Debug, Clone, Default)]
pub struct SchemaArgs {
    /// A binary FileDescriptorSet (protoc -o / buf build output). Repeatable.
    #[arg(long = "descriptor-set", value_name = "FILE")]
    pub descriptor_sets: Vec<PathBuf>,
    /// A .proto file compiled at start-up (no protoc needed). Repeatable.
    #[arg(long = "proto", value_name = "FILE")]
    pub protos: Vec<PathBuf>,
    /// An include directory for --proto imports. Repeatable.
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    pub includes: Vec<PathBuf>,
}

impl SchemaArgs {
    /// Whether any schema file is named.
    pub fn is_empty(&self) -> bool {
        self.descriptor_sets.is_empty() && self.protos.is_empty()
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Serve the admin endpoints (/healthz, /readyz, /metrics, /admin/migration,
    /// /admin/migration.json and /admin/schema) on this address instead of the main one.
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// Default upstream for every service, e.g. http://127.0.0.1:50051 (gRPC over h2c).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Take the schema from every upstream's gRPC server reflection (merged with any files
    /// given, which win); `--reflect=false` turns off what the config file turned on.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub reflect: Option<bool>,
    /// TOML file with the same settings plus per-service upstreams; flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Largest request body in bytes [default: 4194304].
    #[arg(long, value_name = "N")]
    pub max_body_bytes: Option<usize>,
    /// Cap on the upstream deadline, e.g. 2s [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub upstream_timeout: Option<String>,
    /// Answer 406 instead of falling back to JSON when Accept names nothing supported;
    /// `--strict-accept=false` turns off what the config file turned on.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub strict_accept: Option<bool>,
    /// Log format on stderr [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
    /// At most one downgrade log line per method, reason and client per interval; 0 logs every one [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub downgrade_log_interval: Option<String>,
    /// Runtime threads; 0 = one per CPU the process may use, on a single-threaded scheduler
    /// when that is one [default: 0].
    #[arg(long, value_name = "N")]
    pub worker_threads: Option<usize>,
    /// TLS on the listener: the PEM certificate chain (re-read when it changes); with
    /// --tls-key.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Address the gateway listens on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Log format on stderr.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// Downgrade log interval; 0 logs every occurrence.
    #[arg(long, value_name = "DURATION", default_value = "0")]
    pub downgrade_log_interval: String,
    /// Serve only the demo shop's gRPC service (schema v2) on --listen, as an upstream for
    /// `protogate serve --proto proto/demo/v1/shop.proto`.
    #[arg(long)]
    pub backend_only: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Full name of the message, e.g. bench.v1.Order.
    #[arg(long, value_name = "NAME")]
    pub message: String,
    /// Format of stdin.
    #[arg(long, value_enum)]
    pub from: FormatArg,
    /// Format of stdout.
    #[arg(long, value_enum)]
    pub to: FormatArg,
    /// JSON output uses proto field names instead of lowerCamelCase json_name.
    #[arg(long)]
    pub proto_field_names: bool,
    /// Print fields at their default value too.
    #[arg(long)]
    pub emit_defaults: bool,
    /// JSON output prints enum values as numbers.
    #[arg(long)]
    pub enum_numbers: bool,
    /// JSON output indented by N spaces per level (0: compact, the default).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub indent: u8,
    /// Skip unknown JSON / MessagePack keys instead of failing (reported on stderr).
    #[arg(long)]
    pub ignore_unknown_fields: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// The gateway's admin listener (its main one when it has none), e.g.
    /// http://127.0.0.1:9090; plain http:// only. Repeat it for each replica of a fleet:
    /// their reports are merged.
    #[arg(
        long,
        value_name = "URL",
        value_parser = parse_admin_url,
        required_unless_present = "prometheus",
        conflicts_with = "prometheus"
    )]
    pub admin_url: Vec<AdminUrl>,
    /// The fleet's report from the per-client series in this Prometheus (its HTTP API,
    /// e.g. http://prometheus:9090): every replica's counts since it started, summed.
    #[arg(long, value_name = "URL", value_parser = parse_prometheus_url)]
    pub prometheus: Option<edge::fetch::HttpUrl>,
    /// With --prometheus: the counts of this last window instead (a PromQL duration, e.g.
    /// 24h; Prometheus extrapolates increase() to the window's edges, so the figures are
    /// about).
    #[arg(long, value_name = "DURATION", requires = "prometheus", value_parser = parse_range)]
    pub range: Option<String>,
    /// Only the methods this glob matches (`*` any run of characters), e.g.
    /// 'demo.shop.v1.Shop.*'.
    #[arg(long, value_name = "GLOB")]
    pub method: Option<String>,
    /// Output: a terminal report, or the document as received (pretty-printed).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "table")]
    pub format: ReportFormat,
    /// Give up when resolving, connecting and the whole request take longer, e.g. 2s.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    pub timeout: Duration,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    Table,
    Json,
}

/// The path the gateway serves the document on.
const DOCUMENT_PATH: &str = "/admin/migration.json";

/// `--admin-url`, checked: where to connect, its `path` the document's.
pub type AdminUrl = edge::fetch::HttpUrl;

/// Reads `--admin-url`: `http://HOST[:PORT][/PREFIX]` (a URL ending in `/admin/migration` or
/// `/admin/migration.json` is taken as the document's).
pub fn parse_admin_url(text: &str) -> Result<AdminUrl, String> {
    let mut url = edge::fetch::HttpUrl::parse(text).map_err(|e| {
        if e.starts_with("no query") {
            format!("{e}: --method GLOB asks for methods")
        } else {
            e
        }
    })?;
    url.path = if url.path.ends_with(DOCUMENT_PATH) {
        url.path
    } else if url.path.ends_with("/admin/migration") {
        format!("{}.json", url.path)
    } else {
        format!("{}{DOCUMENT_PATH}", url.path)
    };
    Ok(url)
}

/// Reads `--prometheus`: `http://HOST[:PORT][/PREFIX]`.
pub fn parse_prometheus_url(text: &str) -> Result<edge::fetch::HttpUrl, String> {
    edge::fetch::HttpUrl::parse(text)
}

/// Reads `--range`: a PromQL duration (`24h`, `90m`, `7d`, `1h30m`).
pub fn parse_range(text: &str) -> Result<String, String> {
    if edge::migration::is_range(text) {
        Ok(text.to_owned())
    } else {
        Err("expected a PromQL duration such as 24h, 90m, 7d or 1h30m".into())
    }
}

/// Reads `--timeout` (`500ms`, `2s`, …; more than zero).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match crate::duration::parse_duration(text)? {
        d if d.is_zero() => Err("must be more than 0".into()),
        d => Ok(d),
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatArg {
    Json,
    Msgpack,
    Protobuf,
}

impl From<FormatArg> for transcode::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Json => transcode::Format::Json,
            FormatArg::Msgpack => transcode::Format::Msgpack,
            FormatArg::Protobuf => transcode::Format::Protobuf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_urls() {
        let u = parse_admin_url("http://127.0.0.1:9090").unwrap();
        assert_eq!(
            (
                u.authority.as_str(),
                u.host.as_str(),
                u.port,
                u.path.as_str()
            ),
            ("127.0.0.1:9090", "127.0.0.1", 9090, "/admin/migration.json")
        );
        let u = parse_admin_url("http://[::1]:9090/").unwrap();
        assert_eq!(
            (u.host.as_str(), u.path.as_str()),
            ("::1", "/admin/migration.json")
        );
        let u = parse_admin_url("http://gw.example/edge/").unwrap();
        assert_eq!(
            (u.port, u.path.as_str()),
            (80, "/edge/admin/migration.json")
        );
        let u = parse_admin_url("http://gw.example/admin/migration").unwrap();
        assert_eq!(u.path, "/admin/migration.json");
        let u = parse_admin_url("http://gw.example/admin/migration.json").unwrap();
        assert_eq!(u.path, "/admin/migration.json");
        assert!(
            parse_admin_url("https://gw.example")
                .unwrap_err()
                .contains("https")
        );
        assert!(parse_admin_url("gw.example:9090").is_err());
        assert!(parse_admin_url("http://u:p@gw.example").is_err());
        assert!(parse_admin_url("http://gw.example/?method=x").is_err());
        assert!(parse_admin_url("not a url").is_err());
    }

    #[test]
    fn timeouts() {
        assert!(parse_timeout("0").is_err());
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
    }
}
