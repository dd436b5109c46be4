//! Header names that are HTTP's or gRPC's own, never a call's metadata: a leaf the modules
//! that map headers (REST/HTTP, Connect, `[auth]`) share.

/// Whether `name` (lowercase) is HTTP's or gRPC's own: `grpc-*`, the connection's headers,
/// `content-type`, `user-agent`, `te`, … — never passed as metadata either way.
pub(crate) fn is_reserved_metadata(name: &str) -> bool {
    name.starts_with("grpc-")
        || matches!(
            name,
            "te" | "content-type"
                | "content-length"
                | "host"
                | "connection"
                | "proxy-connection"
                | "user-agent"
                | "transfer-encoding"
                | "keep-alive"
                | "upgrade"
                | "trailer"
                | "date"
                | "server"
        )
}
