//! Edge errors and the one place that maps them to the wire: HTTP status plus a
//! google.rpc.Status (code and message), by the contract's table.

use std::fmt;

use http::StatusCode;

/// gRPC status codes (google.rpc.Code), by the names the spec uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    pub fn from_i32(code: i32) -> Code {
        use Code::*;
        match code {
            0 => Ok,
            1 => Cancelled,
            3 => InvalidArgument,
            4 => DeadlineExceeded,
            5 => NotFound,
            6 => AlreadyExists,
            7 => PermissionDenied,
            8 => ResourceExhausted,
            9 => FailedPrecondition,
            10 => Aborted,
            11 => OutOfRange,
            12 => Unimplemented,
            13 => Internal,
            14 => Unavailable,
            15 => DataLoss,
            16 => Unauthenticated,
            _ => Unknown,
        }
    }

    /// The code's name as grpc-go writes it (`OK`, `Canceled`, `InvalidArgument`, …), which
    /// its Prometheus metrics use for their `grpc_code` label: ours.
    pub fn name(self) -> &'static str {
        use Code::*;
        match self {
            Ok => "OK",
            Cancelled => "Canceled",
            Unknown => "Unknown",
            InvalidArgument => "InvalidArgument",
            DeadlineExceeded => "DeadlineExceeded",
            NotFound => "NotFound",
            AlreadyExists => "AlreadyExists",
            PermissionDenied => "PermissionDenied",
            ResourceExhausted => "ResourceExhausted",
            FailedPrecondition => "FailedPrecondition",
            Aborted => "Aborted",
            OutOfRange => "OutOfRange",
            Unimplemented => "Unimplemented",
            Internal => "Internal",
            Unavailable => "Unavailable",
            DataLoss => "DataLoss",
            Unauthenticated => "Unauthenticated",
        }
    }

    /// The HTTP status for a gRPC code: the google.rpc.Code mapping Envoy and Connect use.
    pub fn http_status(self) -> StatusCode {
        use Code::*;
        match self {
            Ok => StatusCode::OK,
            Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
            Unknown | Internal | DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
            InvalidArgument | FailedPrecondition | OutOfRange => StatusCode::BAD_REQUEST,
            DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            NotFound => StatusCode::NOT_FOUND,
            AlreadyExists | Aborted => StatusCode::CONFLICT,
            PermissionDenied => StatusCode::FORBIDDEN,
            ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

/// Everything that can go wrong while serving one request.
#[derive(Debug)]
pub enum EdgeError {
    /// The body does not convert (malformed, wrong type, unknown key...): names the field path.
    BadBody(transcode::Error),
    /// A header we need is malformed (e.g. `grpc-timeout`).
    BadHeader(String),
    UnsupportedMediaType(String),
    NotAcceptable(String),
    UnknownMethod(String),
    /// A path the gateway does not serve, on a listener without routes (the admin listener).
    NotFound(String),
    /// A CORS preflight from an origin `[cors]` does not allow.
    OriginNotAllowed(String),
    /// A request that does not map onto the method (a bad query parameter or path variable,
    /// a malformed message in a request stream...): the message names what.
    BadRequest(String),
    /// A path served under other HTTP methods only.
    MethodNotAllowed {
        /// `method pkg.Svc/Method` or `path /v1/...`.
        what: String,
        /// The methods it accepts, for the Allow header (`GET, DELETE`).
        allow: String,
    },
    /// Something this gateway does not serve (e.g. a bidirectional stream over HTTP/1.1).
    NotImplemented(String),
    PayloadTooLarge {
        limit: usize,
    },
    /// The request head (its `name: value` lines) is larger than `max_header_bytes`.
    HeadTooLarge {
        limit: usize,
    },
    /// The client stopped sending its body.
    BodyTimeout,
    /// The client went away while sending its body (nobody reads the answer).
    ClientClosed(String),
    /// The upstream could not be reached.
    Unavailable(String),
    /// The deadline passed before the upstream answered.
    DeadlineExceeded,
    /// The upstream answered with a gRPC error (boxed: it is the largest variant).
    Upstream(Box<UpstreamError>),
    /// The upstream answered something that cannot be rendered (a malformed message, an
    /// HttpBody that is not one): the upstream's problem, not the client's nor ours (502).
    BadUpstreamAnswer(String),
    /// A fault of ours.
    Internal(String),
    /// Refused at once because a limit was reached (503 with `Retry-After`).
    Shed(crate::shed::ShedReason),
    /// Credentials refused, or required and missing (`[auth]`): 401 with a
    /// `WWW-Authenticate` challenge; the precise reason stays in the debug log.
    Unauthenticated(crate::auth::Failure),
    /// The client's budget is spent (`[rate_limit]`): 429 with `Retry-After` and the
    /// `RateLimit-Policy` / `RateLimit` headers.
    RateLimited(crate::rate_limit::Decision),
    /// JSON on a method whose JSON is past its sunset or in a brownout (`[[json_sunset]]`):
    /// 406, or 415 when the body was JSON; rendered in JSON whatever was asked.
    JsonRefused {
        /// Names the method, the dates and the link.
        message: String,
        json_body: bool,
    },
}

/// A gRPC error the upstream answered with.
#[derive(Debug)]
pub struct UpstreamError {
    pub code: Code,
    pub message: String,
    /// Its `grpc-status-details-bin`: an encoded google.rpc.Status.
    pub details: Option<bytes::Bytes>,
    /// Its headers and trailers as it sent them (the client protocol maps them to the
    /// answer's headers).
    pub metadata: http::HeaderMap,
}

impl EdgeError {
    /// The gRPC code and HTTP status this error answers with.
    pub fn code_and_status(&self) -> (Code, StatusCode) {
        use EdgeError::*;
        match self {
            BadBody(_) | BadHeader(_) | BadRequest(_) => {
                (Code::InvalidArgument, StatusCode::BAD_REQUEST)
            }
            UnsupportedMediaType(_) => (Code::InvalidArgument, StatusCode::UNSUPPORTED_MEDIA_TYPE),
            NotAcceptable(_) => (Code::InvalidArgument, StatusCode::NOT_ACCEPTABLE),
            UnknownMethod(_) | NotFound(_) => (Code::NotFound, StatusCode::NOT_FOUND),
            OriginNotAllowed(_) => (Code::PermissionDenied, StatusCode::FORBIDDEN),
            MethodNotAllowed { .. } => (Code::Unimplemented, StatusCode::METHOD_NOT_ALLOWED),
            NotImplemented(_) => (Code::Unimplemented, StatusCode::NOT_IMPLEMENTED),
            PayloadTooLarge { .. } => (Code::ResourceExhausted, StatusCode::PAYLOAD_TOO_LARGE),
            HeadTooLarge { .. } => (
                Code::ResourceExhausted,
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ),
            BodyTimeout => (Code::DeadlineExceeded, StatusCode::REQUEST_TIMEOUT),
            ClientClosed(_) => (Code::Cancelled, Code::Cancelled.http_status()),
            Unavailable(_) => (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
            DeadlineExceeded => (Code::DeadlineExceeded, StatusCode::GATEWAY_TIMEOUT),
            Upstream(u) => (u.code, u.code.http_status()),
            BadUpstreamAnswer(_) => (Code::Internal, StatusCode::BAD_GATEWAY),
            Internal(_) => (Code::Internal, StatusCode::INTERNAL_SERVER_ERROR),
            Shed(_) => (Code::Unavailable, StatusCode::SERVICE_UNAVAILABLE),
            Unauthenticated(_) => (Code::Unauthenticated, StatusCode::UNAUTHORIZED),
            RateLimited(_) => (Code::ResourceExhausted, StatusCode::TOO_MANY_REQUESTS),
            JsonRefused { json_body, .. } => (
                Code::FailedPrecondition,
                if *json_body {
                    StatusCode::UNSUPPORTED_MEDIA_TYPE
                } else {
                    StatusCode::NOT_ACCEPTABLE
                },
            ),
        }
    }

    /// The headers this error's answer carries whatever the protocol: `Retry-After` (a shed
    /// or rate-limited request), `WWW-Authenticate` (401), `RateLimit-Policy` and
    /// `RateLimit` (429).
    pub fn put_headers(&self, headers: &mut http::HeaderMap) {
        use http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
        match self {
            EdgeError::Shed(_) => {
                headers.insert(RETRY_AFTER, http::HeaderValue::from_static("1"));
            }
            EdgeError::Unauthenticated(failure) => {
                headers.insert(WWW_AUTHENTICATE, failure.challenge());
            }
            EdgeError::RateLimited(decision) => {
                headers.insert(RETRY_AFTER, http::HeaderValue::from(decision.retry_after()));
                headers.insert(
                    crate::rate_limit::RATELIMIT_POLICY,
                    decision.policy_header(),
                );
                headers.insert(crate::rate_limit::RATELIMIT, decision.state_header());
            }
            _ => {}
        }
    }

    /// True when the client caused it (logged at debug level only).
    pub fn is_client_error(&self) -> bool {
        self.code_and_status().1.is_client_error()
    }
}

impl fmt::Display for EdgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EdgeError::*;
        match self {
            BadBody(e) => write!(f, "invalid request body: {e}"),
            BadHeader(m)
            | BadRequest(m)
            | NotImplemented(m)
            | UnsupportedMediaType(m)
            | NotAcceptable(m)
            | Unavailable(m)
            | BadUpstreamAnswer(m)
            | Internal(m)
            | NotFound(m)
            | JsonRefused { message: m, .. } => f.write_str(m),
            OriginNotAllowed(origin) => write!(f, "CORS: the origin {origin} is not allowed"),
            UnknownMethod(what) => write!(f, "no method or HTTP rule for {what}"),
            MethodNotAllowed { what, allow } => write!(f, "{what} accepts {allow} only"),
            HeadTooLarge { limit } => {
                write!(f, "request head exceeds the limit of {limit} bytes")
            }
            PayloadTooLarge { limit } => {
                write!(f, "request body exceeds the limit of {limit} bytes")
            }
            BodyTimeout => f.write_str("timed out reading the request body"),
            ClientClosed(cause) => write!(
                f,
                "the client closed the connection while sending the body: {cause}"
            ),
            DeadlineExceeded => f.write_str("upstream did not answer before the deadline"),
            Upstream(u) => f.write_str(&u.message),
            Unauthenticated(failure) => f.write_str(failure.message()),
            RateLimited(d) => write!(
                f,
                "this client's rate limit ({} requests a second, bursts of {}) is reached; retry in {} s",
                d.limit.per_second,
                d.limit.burst,
                d.retry_after()
            ),
            Shed(reason) => {
                use crate::shed::ShedReason::*;
                let limit = match reason {
                    Requests => "max_concurrent_requests requests in flight",
                    UpstreamRequests => {
                        "max_concurrent_requests_per_upstream calls in flight to this upstream"
                    }
                    Memory => "max_inflight_bytes of request bodies held",
                    Connections => "max_connections connections open",
                };
                write!(f, "the gateway is at its limit of {limit}; retry later")
            }
        }
    }
}

impl std::error::Error for EdgeError {}

/// Why an [`crate::Edge`] or its [`crate::Upstreams`] cannot be built from a configuration.
#[derive(Debug)]
pub enum SetupError {
    /// An upstream URI that cannot be used, and why.
    Upstream { uri: String, reason: String },
    /// An upstream configured for a service the schema lacks (a misspelt name).
    UnknownService { service: String, known: Vec<String> },
    /// The HTTP rules do not fit the schema, or two of them match the same requests.
    Routes(transcode::SchemaError),
    /// The schema has no google.rpc.Status (error bodies need it).
    NoStatus,
    /// An HTTP rule takes the path of one of the gateway's own endpoints on its listener.
    PathTaken { path: String, rule: String },
    /// The CORS settings cannot work, and why.
    Cors(String),
    /// A `[[json_sunset]]` rule that cannot work (or two that tie on a method).
    Sunset(crate::migration::PolicyError),
    /// `[rate_limit] redis` cannot be used, and why.
    RateLimit(String),
    /// A `[services."…"]` override (`json`, `timeout`) that names nothing in the schema.
    Override(String),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::Upstream { uri, reason } => write!(f, "upstream {uri:?}: {reason}"),
            SetupError::UnknownService { service, known } => write!(
                f,
                "services.\"{service}\": the schema has no such service (it has {})",
                known.join(", ")
            ),
            SetupError::Routes(e) => write!(f, "{e}"),
            SetupError::PathTaken { path, rule } => write!(
                f,
                "the HTTP rule {rule} takes {path}, which the gateway answers itself on the same listener (a rule's template may cover it, its literal path may not: move the rule, or the gateway's own with admin_listen or openapi_path)"
            ),
            SetupError::Cors(why) | SetupError::Override(why) => f.write_str(why),
            SetupError::Sunset(e) => write!(f, "{e}"),
            SetupError::RateLimit(why) => write!(f, "[rate_limit] redis: {why}"),
            SetupError::NoStatus => f.write_str(
                "the schema lacks google.rpc.Status and the bundled copy could not be added",
            ),
        }
    }
}

impl std::error::Error for SetupError {}

/// gRPC's grpc-message encoding: bytes outside printable ASCII, and `%`, as `%XX`.
pub(crate) fn encode_grpc_message(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `grpc-message` is percent-encoded UTF-8; anything undecodable is kept as it came.
pub(crate) fn decode_grpc_message(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            raw[i],
            raw.get(i + 1).copied().and_then(hex),
            raw.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_message_encoding_round_trips() {
        assert_eq!(encode_grpc_message("a b%c\né"), "a b%25c%0A%C3%A9");
        for text in ["", "plain", "100% ✓\r\n", "%%", "\u{7f}\u{0}"] {
            assert_eq!(
                decode_grpc_message(encode_grpc_message(text).as_bytes()),
                text
            );
        }
        // What is not an escape stays as it came; bytes that are not UTF-8 are replaced.
        assert_eq!(decode_grpc_message(b"50%, %zz %4"), "50%, %zz %4");
        assert_eq!(decode_grpc_message(b"%FF"), "\u{fffd}");
    }
}
