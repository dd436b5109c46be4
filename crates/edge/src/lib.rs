//! protogate's HTTP edge: serving, negotiation, routing, upstream gRPC calls, downgrade
//! warnings, errors and metrics. No format logic lives here (that is `transcode`), and nothing
//! here reads flags, environment variables or files (that is the binary).
//!
//! # Layout
//! - [`server`]: the accept loop, HTTP/1.1 + HTTP/2 on one port, in clear text or over TLS,
//!   graceful shutdown.
//! - [`service`]: the request path: one ordered pipeline (`service/pipeline.rs`), one module
//!   per step (ARCHITECTURE.md has the map).
//! - [`negotiate`]: Content-Type and Accept.
//! - [`protocol`]: what differs between client protocols (REST/HTTP today).
//! - `headers`: deadline, metadata and status headers; `reserved`: the header names HTTP and
//!   gRPC keep for themselves.
//! - [`auth`]: who is calling, verified (bearer tokens, API keys), and the refusals.
//! - [`rate_limit`]: per-client budgets, in this process or shared in Redis.
//! - [`selector`]: the method selectors per-method settings name methods by.
//! - `media_type`: RFC 9110 media types.
//! - [`upstream`]: a pool of endpoints per upstream (resolved, balanced, health-checked);
//!   unary calls and streams on their HTTP/2 connections.
//! - [`downgrade`]: the rate-limited downgrade warning.
//! - [`metrics`]: Prometheus metrics.
//! - [`migration`]: who still speaks JSON, what it costs, the JSON sunset policy (pure).
//! - [`error`]: edge errors and their mapping to HTTP status and google.rpc.Status.
//! - `admission`: the request, upstream and byte limits requests are admitted under.
//! - `shed`: why a request or a connection is refused ([`ShedReason`]).
//! - [`cors`]: CORS preflights and headers.
//! - [`coding`]: content codings: answers compressed, request bodies decoded.
//! - [`trace`]: the spans of requests and upstream calls, for an exporter the binary supplies.
//! - [`fetch`]: one plain-http GET (the fleet view's Prometheus queries; `protogate report`).
//! - `body`: body reading with the size limit enforced while reading.
//! - `config`: [`EdgeConfig`], the edge's settings as plain data.

mod admission;
pub mod auth;
mod body;
pub mod coding;
mod config;
pub mod cors;
pub mod downgrade;
pub mod error;
pub mod fetch;
pub mod forwarding;
mod headers;
pub mod json_options;
mod media_type;
pub mod metrics;
pub mod migration;
pub mod negotiate;
mod per_method;
pub mod protocol;
pub mod rate_limit;
mod reserved;
pub mod selector;
pub mod server;
pub mod service;
mod shed;
pub mod trace;
mod transport;
pub mod upstream;

pub use config::{EdgeConfig, ReadyzRequires};
pub use error::{EdgeError, SetupError};
pub use server::{serve, serve_admin, serve_all};
pub use service::{ADMIN_PATHS, Edge, Live, schema_digest};
pub use shed::ShedReason;
pub use upstream::{
    Reflected, ReflectedFile, ReflectionQuery, Resolution, Resolve, SystemResolver, Target,
    UpstreamOptions, UpstreamSpec, UpstreamTls, Upstreams,
};
