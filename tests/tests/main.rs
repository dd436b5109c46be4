//! The integration tests: the real gateway, real tonic backends and real clients on loopback,
//! one module per subject, in one binary (tests/Cargo.toml says why).

// Child processes under deadlines (grpc-gateway, the Python validators), shared with the
// transcoding crate's tests.
#[path = "../../crates/transcode/tests/external/mod.rs"]
mod external;

mod admin;
mod auth;
mod balancing;
mod compression;
mod connect;
mod connections;
mod cors;
mod forwarding;
mod gateway;
mod grpc_clients;
mod grpcgw_diff;
mod import;
mod json_options;
mod limits;
mod observability;
mod openapi;
mod promises;
mod python;
mod redis;
mod reload;
mod rest;
mod retries;
mod shedding;
mod streams;
mod timeouts;
mod tls;
mod upstream;
mod upstream_status;
