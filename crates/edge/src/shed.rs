//! Why a request or a connection is shed: the admission limits' reasons (admission.rs), the
//! connection limit's (server), carried by [`EdgeError::Shed`](crate::EdgeError::Shed) and
//! counted in `protogate_shed_total`.

/// Why a request or a connection was refused: the `reason` of `protogate_shed_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShedReason {
    /// `max_concurrent_requests` requests were in flight.
    Requests,
    /// The upstream had `max_concurrent_requests_per_upstream` calls in flight.
    UpstreamRequests,
    /// `max_inflight_bytes` of request bodies were held.
    Memory,
    /// `max_connections` connections were open and none of them idle.
    Connections,
}

impl ShedReason {
    pub const ALL: [ShedReason; 4] = [
        ShedReason::Requests,
        ShedReason::UpstreamRequests,
        ShedReason::Memory,
        ShedReason::Connections,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::Requests => "concurrency",
            ShedReason::UpstreamRequests => "upstream_concurrency",
            ShedReason::Memory => "memory",
            ShedReason::Connections => "connections",
        }
    }
}
