//! The request path, step by step: negotiate → route → decode_request → call_upstream →
//! encode_response → record. Every outcome, success or error, passes through `record`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{
    HeaderMap, HeaderName, HeaderValue, Method as HttpMethod, Request, Response, StatusCode, header,
};
use http_body::Body;
use http_body_util::Full;
use tonic::metadata::MetadataMap;
use transcode::{Findings, Format, MessageDescriptor, Method, Schema};

use crate::EdgeConfig;
use crate::body::read_limited;
use crate::downgrade::{Client, Downgrade, DowngradeLog, Reason};
use crate::error::{Code, EdgeError};
use crate::metrics::{DowngradeLabels, MethodLabels, MethodName, Metrics, RequestLabels};
use crate::negotiate::{self, Negotiated};
use crate::upstream::Upstreams;

/// Everything a request needs, built before serving and shared read-only.
pub struct Edge {
    schema: Schema,
    upstreams: Upstreams,
    config: EdgeConfig,
    metrics: Metrics,
    downgrades: DowngradeLog,
    status: MessageDescriptor,
    transcode: transcode::Options,
    /// The method label of requests that name no method.
    unknown_method: std::sync::Arc<str>,
}

/// One request's context: who asked, for what, in which formats, and what was downgraded.
struct RequestCtx<'a> {
    start: Instant,
    /// The Accept header, for the format of an error answered before negotiation succeeded.
    accept: Option<HeaderValue>,
    method: Option<&'a Method>,
    formats: Option<Negotiated>,
    client: Client,
}

/// The response body type.
pub type ResponseBody = Full<Bytes>;

impl Edge {
    pub fn new(schema: Schema, upstreams: Upstreams, config: EdgeConfig) -> Result<Edge, String> {
        let status = schema
            .message("google.rpc.Status")
            .ok_or("the schema lacks google.rpc.Status and the bundled copy could not be added")?;
        let downgrades = DowngradeLog::new(
            config.downgrade_log_interval,
            crate::downgrade::DEFAULT_CAPACITY,
        );
        Ok(Edge {
            schema,
            upstreams,
            config,
            metrics: Metrics::new(),
            downgrades,
            status,
            transcode: transcode::Options::default(),
            unknown_method: "unknown".into(),
        })
    }

    pub fn config(&self) -> &EdgeConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    pub(crate) fn downgrade_log(&self) -> &DowngradeLog {
        &self.downgrades
    }

    /// Serves one request. Never fails: every error becomes a response.
    pub async fn handle<B>(self: Arc<Self>, req: Request<B>) -> Response<ResponseBody>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let path = req.uri().path();
        match path {
            "/healthz" => {
                return plain(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    Bytes::from_static(b"ok\n"),
                );
            }
            "/readyz" => return self.readyz().await,
            "/metrics" => {
                return plain(
                    StatusCode::OK,
                    crate::metrics::CONTENT_TYPE,
                    Bytes::from(self.metrics.render()),
                );
            }
            _ => {}
        }
        let headers = req.headers();
        let mut ctx = RequestCtx {
            start: Instant::now(),
            accept: headers.get(header::ACCEPT).cloned(),
            method: None,
            formats: None,
            client: Client::new(
                header_str(headers, header::USER_AGENT),
                header_str(headers, "x-client-id"),
            ),
        };
        self.metrics.in_flight.inc();
        let _in_flight = InFlight(&self.metrics);
        let result = self.unary(&mut ctx, req).await;
        let response = match result {
            Ok(response) => response,
            Err(err) => self.error_response(&mut ctx, &err),
        };
        self.record(&ctx, response.status());
        response
    }

    async fn unary<'s, B>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        req: Request<B>,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let (head, body) = req.into_parts();

        // route
        let Some(method) = self.schema.method(head.uri.path()) else {
            return Err(EdgeError::UnknownMethod(head.uri.path().to_owned()));
        };
        ctx.method = Some(method);
        if head.method != HttpMethod::POST {
            return Err(EdgeError::MethodNotAllowed {
                method: method.full_name.to_string(),
            });
        }
        if method.streaming != transcode::StreamingKind::Unary {
            return Err(EdgeError::Streaming {
                method: method.full_name.to_string(),
            });
        }

        // negotiate
        let formats = negotiate::negotiate(
            head.headers.get(header::CONTENT_TYPE),
            head.headers.get(header::ACCEPT),
            self.config.strict_accept,
        )?;
        ctx.formats = Some(formats);
        let timeout = client_timeout(&head.headers)?;
        let timeout = timeout.map_or(self.config.upstream_timeout, |t| {
            t.min(self.config.upstream_timeout)
        });

        // decode_request
        let body = read_limited(
            body,
            self.config.max_body_bytes,
            self.config.body_read_timeout,
        )
        .await?;
        let body = match formats.request {
            // Protobuf goes up as it came, unchecked: checking costs as much as the rest of
            // the pass-through. A malformed body is diagnosed if the upstream fails on it.
            Format::Protobuf => body,
            from => {
                // Protobuf is smaller than the JSON or MessagePack it came from.
                let mut out = Vec::with_capacity(body.len());
                self.schema
                    .to_protobuf(&method.input, from, &body, &mut out, &self.transcode)
                    .map_err(EdgeError::BadBody)?;
                // The text is not needed any more: free it before the call (peak memory).
                drop(body);
                Bytes::from(out)
            }
        };

        // call_upstream
        let metadata = upstream_metadata(&head.headers);
        let started = Instant::now();
        // A pass-through body is kept (a reference count, no copy) to diagnose a failure;
        // bodies the gateway encoded itself are well-formed and need not be kept.
        let sent = (formats.request == Format::Protobuf).then(|| body.clone());
        let call = self
            .upstreams
            .unary(&method.service, &method.path, body, metadata, timeout);
        let answer = tokio::time::timeout(timeout, call).await;
        self.metrics
            .upstream_duration
            .get_or_create(&MethodLabels {
                method: MethodName(method.full_name.clone()),
            })
            .observe(started.elapsed().as_secs_f64());
        let answer = match answer {
            Err(_) => return Err(EdgeError::DeadlineExceeded),
            // The upstream enforces the grpc-timeout we sent and may answer first, as
            // CANCELLED (tonic) or DEADLINE_EXCEEDED: either way our deadline has passed.
            Ok(Err(status))
                if matches!(
                    status.code(),
                    tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
                ) && started.elapsed() >= timeout.mul_f64(0.9) =>
            {
                return Err(EdgeError::DeadlineExceeded);
            }
            Ok(Err(status)) => {
                // An upstream that cannot decode a pass-through body answers INTERNAL (tonic,
                // grpc-go) or INVALID_ARGUMENT: if the body is malformed, that is the client's
                // error, and it is named as such.
                if let Some(sent) = &sent
                    && matches!(
                        status.code(),
                        tonic::Code::Internal | tonic::Code::InvalidArgument | tonic::Code::Unknown
                    )
                    && let Err(e) =
                        self.schema
                            .validate_protobuf(&method.input, sent, &self.transcode)
                {
                    return Err(EdgeError::BadBody(e));
                }
                return Err(upstream_error(&status));
            }
            Ok(Ok(answer)) => answer,
        };

        // encode_response
        let body = match formats.response {
            Format::Protobuf => answer.body,
            to => {
                let mut out = Vec::with_capacity(answer.body.len() * 2);
                let findings = self
                    .schema
                    .from_protobuf(&method.output, to, &answer.body, &mut out, &self.transcode)
                    .map_err(|e| {
                        EdgeError::Internal(format!(
                            "upstream response does not render as {}: {e}",
                            to.as_str()
                        ))
                    })?;
                self.note_downgrades(ctx, to, &findings);
                Bytes::from(out)
            }
        };
        let mut response = plain(
            StatusCode::OK,
            negotiate::content_type(formats.response),
            body,
        );
        response
            .headers_mut()
            .extend(metadata_headers(answer.metadata.into_headers()));
        Ok(response)
    }

    /// Counts and logs the downgrades of one rendering of a protobuf message as `to`.
    fn note_downgrades(&self, ctx: &RequestCtx<'_>, to: Format, findings: &Findings) {
        let Some(method) = ctx.method else { return };
        let note = |reason: Reason, findings: Option<&Findings>| {
            self.metrics
                .downgrades
                .get_or_create(&DowngradeLabels {
                    method: MethodName(method.full_name.clone()),
                    reason: reason.as_str(),
                })
                .inc();
            self.downgrades.record(&Downgrade {
                method: &method.full_name,
                reason,
                format: to,
                client: &ctx.client,
                findings,
            });
        };
        if to == Format::Json {
            let fallback = ctx.formats.is_some_and(|f| f.fallback);
            note(
                if fallback {
                    Reason::AcceptFallback
                } else {
                    Reason::JsonRequested
                },
                None,
            );
        }
        if findings.dropped_data() {
            note(Reason::UnknownFields, Some(findings));
        }
    }

    /// Renders an error as google.rpc.Status in the negotiated format (or the one Accept
    /// asks for when negotiation itself failed).
    fn error_response(&self, ctx: &mut RequestCtx<'_>, err: &EdgeError) -> Response<ResponseBody> {
        let (code, status) = err.code_and_status();
        let message = err.to_string();
        if status.is_server_error() {
            tracing::warn!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request failed");
        } else {
            tracing::debug!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request rejected");
        }
        let format = match ctx.formats {
            Some(f) => f.response,
            None => negotiate::negotiate(
                Some(&HeaderValue::from_static("application/json")),
                ctx.accept.as_ref(),
                false,
            )
            .map_or(Format::Json, |n| n.response),
        };
        // Upstream details travel as they came: grpc-status-details-bin is a google.rpc.Status.
        let upstream_details = match err {
            EdgeError::Upstream(u) => u.details.clone(),
            _ => None,
        };
        let from_upstream = upstream_details.is_some();
        let status_bytes = upstream_details
            .unwrap_or_else(|| Bytes::from(transcode::encode_status(code as i32, &message)));
        let body = match format {
            Format::Protobuf => status_bytes,
            to => {
                let mut out = Vec::new();
                match self.schema.from_protobuf(
                    &self.status,
                    to,
                    &status_bytes,
                    &mut out,
                    &self.transcode,
                ) {
                    Ok(findings) => {
                        if from_upstream {
                            self.note_downgrades(ctx, to, &findings);
                        }
                        Bytes::from(out)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "upstream grpc-status-details-bin does not render; sending code and message only");
                        let fallback = transcode::encode_status(code as i32, &message);
                        let mut out = Vec::new();
                        let _ = self.schema.from_protobuf(
                            &self.status,
                            to,
                            &fallback,
                            &mut out,
                            &self.transcode,
                        );
                        Bytes::from(out)
                    }
                }
            }
        };
        let mut response = plain(status, negotiate::content_type(format), body);
        let headers = response.headers_mut();
        headers.insert("grpc-status", HeaderValue::from(code as i32));
        if let Ok(v) = HeaderValue::from_str(&percent_encode_grpc_message(&message)) {
            headers.insert("grpc-message", v);
        }
        if let EdgeError::MethodNotAllowed { .. } = err {
            headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        if let EdgeError::Upstream(u) = err {
            headers.extend(u.metadata.clone());
        }
        response
    }

    /// Metrics and the per-request debug line: runs for every outcome.
    fn record(&self, ctx: &RequestCtx<'_>, status: StatusCode) {
        let method = ctx.method.map_or("unknown", |m| &*m.full_name);
        let label = MethodName(
            ctx.method
                .map_or_else(|| self.unknown_method.clone(), |m| m.full_name.clone()),
        );
        let (request_format, response_format) = ctx.formats.map_or(("unknown", "unknown"), |f| {
            (f.request.as_str(), f.response.as_str())
        });
        self.metrics
            .requests
            .get_or_create(&RequestLabels {
                method: label.clone(),
                request_format,
                response_format,
                code: status.as_u16(),
            })
            .inc();
        let elapsed = ctx.start.elapsed();
        self.metrics
            .request_duration
            .get_or_create(&MethodLabels { method: label })
            .observe(elapsed.as_secs_f64());
        tracing::debug!(
            method,
            request_format,
            response_format,
            status = status.as_u16(),
            elapsed_us = elapsed.as_micros() as u64,
            user_agent = %ctx.client.user_agent,
            "request"
        );
    }

    /// Ready when the schema is loaded (it is, or we would not be serving) and every upstream
    /// accepts a TCP connection.
    async fn readyz(&self) -> Response<ResponseBody> {
        let mut problems = Vec::new();
        for uri in self.upstreams.uris() {
            let authority = uri.parse::<http::Uri>().ok().and_then(|u| {
                u.authority()
                    .map(|a| (a.host().to_owned(), a.port_u16().unwrap_or(80)))
            });
            let Some((host, port)) = authority else {
                problems.push(format!("{uri}: no host"));
                continue;
            };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            match tokio::time::timeout(
                Duration::from_secs(1),
                tokio::net::TcpStream::connect((host.as_str(), port)),
            )
            .await
            {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => problems.push(format!("{uri}: {e}")),
                Err(_) => problems.push(format!("{uri}: connect timed out")),
            }
        }
        if problems.is_empty() {
            plain(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ready\n"),
            )
        } else {
            let text = format!("not ready: upstream unreachable: {}\n", problems.join("; "));
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from(text),
            )
        }
    }
}

/// Decrements the in-flight gauge however the request ends (including cancellation).
struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

fn upstream_error(status: &tonic::Status) -> EdgeError {
    let details = (!status.details().is_empty()).then(|| Bytes::copy_from_slice(status.details()));
    let code = status.code() as i32;
    if code == Code::Unavailable as i32 && details.is_none() {
        return EdgeError::Unavailable(format!("upstream unavailable: {}", status.message()));
    }
    EdgeError::Upstream(Box::new(crate::error::UpstreamError {
        code,
        message: status.message().to_owned(),
        details,
        metadata: metadata_headers(status.metadata().clone().into_headers()),
    }))
}

fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<ResponseBody> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The client's deadline: `grpc-timeout` (gRPC's `1*8DIGIT unit`) or `X-Timeout` in seconds.
fn client_timeout(headers: &HeaderMap) -> Result<Option<Duration>, EdgeError> {
    if let Some(v) = headers.get("grpc-timeout") {
        let s = v.to_str().unwrap_or("");
        let bad = || {
            EdgeError::BadHeader(format!(
                "grpc-timeout {s:?} is not 1-8 digits followed by H, M, S, m, u or n"
            ))
        };
        if s.len() < 2 || s.len() > 9 {
            return Err(bad());
        }
        let (digits, unit) = s.split_at(s.len() - 1);
        let n: u64 = if digits.bytes().all(|c| c.is_ascii_digit()) {
            digits.parse().map_err(|_| bad())?
        } else {
            return Err(bad());
        };
        let d = match unit {
            "H" => Duration::from_secs(n.saturating_mul(3600)),
            "M" => Duration::from_secs(n.saturating_mul(60)),
            "S" => Duration::from_secs(n),
            "m" => Duration::from_millis(n),
            "u" => Duration::from_micros(n),
            "n" => Duration::from_nanos(n),
            _ => return Err(bad()),
        };
        return Ok(Some(d));
    }
    if let Some(v) = headers.get("x-timeout") {
        let s = v.to_str().unwrap_or("").trim();
        let secs: f64 = s
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x < 1e9)
            .ok_or_else(|| {
                EdgeError::BadHeader(format!(
                    "X-Timeout {s:?} is not a positive number of seconds"
                ))
            })?;
        return Ok(Some(Duration::from_secs_f64(secs)));
    }
    Ok(None)
}

/// Headers forwarded upstream as gRPC metadata: `authorization`, `x-request-id`, and every
/// `grpc-metadata-*` with the prefix stripped (names reserved by gRPC are not forwarded).
fn upstream_metadata(headers: &HeaderMap) -> MetadataMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        if n == "authorization" || n == "x-request-id" {
            out.append(name.clone(), value.clone());
        } else if let Some(rest) = n.strip_prefix("grpc-metadata-") {
            if rest.is_empty() || is_reserved_metadata(rest) {
                continue;
            }
            if let Ok(key) = HeaderName::from_bytes(rest.as_bytes()) {
                out.append(key, value.clone());
            }
        }
    }
    MetadataMap::from_headers(out)
}

fn is_reserved_metadata(name: &str) -> bool {
    name.starts_with("grpc-")
        || matches!(
            name,
            "te" | "content-type"
                | "content-length"
                | "host"
                | "connection"
                | "user-agent"
                | "transfer-encoding"
                | "keep-alive"
                | "upgrade"
                | "trailer"
                | "date"
                | "server"
        )
}

/// Upstream metadata (headers and trailers) as `grpc-metadata-*` response headers.
fn metadata_headers(metadata: HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in &metadata {
        let n = name.as_str();
        if is_reserved_metadata(n) {
            continue;
        }
        if let Ok(key) = HeaderName::from_bytes(format!("grpc-metadata-{n}").as_bytes()) {
            out.append(key, value.clone());
        }
    }
    out
}

/// gRPC's grpc-message encoding: bytes outside printable ASCII, and `%`, as `%XX`.
fn percent_encode_grpc_message(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        let mut h = HeaderMap::new();
        assert_eq!(client_timeout(&h).unwrap(), None);
        h.insert("grpc-timeout", HeaderValue::from_static("250m"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(250))
        );
        h.insert("grpc-timeout", HeaderValue::from_static("2S"));
        assert_eq!(client_timeout(&h).unwrap(), Some(Duration::from_secs(2)));
        for bad in ["", "m", "123456789S", "1x", "-1S", "1.5S"] {
            h.insert("grpc-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
        let mut h = HeaderMap::new();
        h.insert("x-timeout", HeaderValue::from_static("1.5"));
        assert_eq!(
            client_timeout(&h).unwrap(),
            Some(Duration::from_millis(1500))
        );
        for bad in ["0", "-1", "abc", "inf", "NaN"] {
            h.insert("x-timeout", HeaderValue::from_static(bad));
            assert!(client_timeout(&h).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_both_ways() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer x"));
        h.insert("x-request-id", HeaderValue::from_static("r1"));
        h.insert("grpc-metadata-tenant", HeaderValue::from_static("acme"));
        h.insert("grpc-metadata-grpc-timeout", HeaderValue::from_static("1S"));
        h.insert("cookie", HeaderValue::from_static("secret"));
        let md = upstream_metadata(&h).into_headers();
        assert_eq!(md.get("authorization").unwrap(), "Bearer x");
        assert_eq!(md.get("x-request-id").unwrap(), "r1");
        assert_eq!(md.get("tenant").unwrap(), "acme");
        assert!(md.get("grpc-timeout").is_none() && md.get("cookie").is_none());
        let mut up = HeaderMap::new();
        up.insert("content-type", HeaderValue::from_static("application/grpc"));
        up.insert("grpc-status", HeaderValue::from_static("0"));
        up.insert("x-trace", HeaderValue::from_static("t"));
        let back = metadata_headers(up);
        assert_eq!(back.len(), 1);
        assert_eq!(back.get("grpc-metadata-x-trace").unwrap(), "t");
    }

    #[test]
    fn grpc_message_encoding() {
        assert_eq!(percent_encode_grpc_message("a b%c\né"), "a b%25c%0A%C3%A9");
    }
}
