//! Answers: error answers as google.rpc.Status in the negotiated format, the status records
//! of streams, downgrade accounting of every rendering, and the small response builders.

use super::*;

/// Whose rendering a downgrade is: the method, the client, and whether JSON was a fallback
/// (Accept named nothing we serve) rather than asked for.
pub(super) struct Rendering<'a> {
    pub(super) method: &'a Method,
    pub(super) client: &'a Client,
    pub(super) fallback: bool,
}

impl Edge {
    /// Counts the downgrades of one rendering of a protobuf message as `to`, and logs them
    /// (rate-limited) when `log` (a stream logs its first message's only).
    pub(super) fn note_downgrades(
        &self,
        of: &Rendering<'_>,
        to: Format,
        findings: &Findings,
        log: bool,
    ) {
        let Rendering {
            method,
            client,
            fallback,
        } = *of;
        let note = |reason: Reason, findings: Option<&Findings>| {
            self.metrics
                .downgrades
                .get_or_create(&DowngradeLabels {
                    method: MethodName(method.full_name.clone()),
                    reason: reason.as_str(),
                })
                .inc();
            if log {
                self.downgrades.record(&Downgrade {
                    method: &method.full_name,
                    reason,
                    format: to,
                    client,
                    findings,
                });
            }
        };
        if to == Format::Json {
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

    /// Renders an error as google.rpc.Status in the plan's format (or, when the request
    /// failed before it had a plan, the one its Accept asks for).
    pub(super) fn error_response(
        &self,
        ctx: &mut RequestCtx<'_>,
        headers: &HeaderMap,
        err: &EdgeError,
    ) -> Response<ResponseBody> {
        let (code, status) = err.code_and_status();
        let message = err.to_string();
        // Shedding is counted, not logged at warn: under overload a line per refusal would add
        // to it; and a client asking for what is not implemented is the client's doing.
        if status.is_server_error()
            && !matches!(err, EdgeError::Shed(_) | EdgeError::NotImplemented(_))
        {
            tracing::warn!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request failed");
        } else {
            tracing::debug!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %message, "request rejected");
        }
        let format = match ctx.plan {
            // The refusal of JSON is answered in JSON: the one format such a client reads.
            _ if matches!(err, EdgeError::JsonRefused { .. }) => Format::Json,
            Some(plan) => plan.response,
            None => {
                negotiate::response_format(Format::Json, headers.get(header::ACCEPT), false, true)
                    .map_or(Format::Json, |(f, _)| f)
            }
        };
        let (body, findings) = self.status_rendering(err, format);
        if let (Some(findings), Some(method)) = (findings, ctx.method) {
            let fallback = ctx.plan.is_some_and(|p| p.fallback);
            let of = Rendering {
                method,
                client: &ctx.client,
                fallback,
            };
            self.note_downgrades(&of, format, &findings, true);
        }
        let mut response = plain(status, negotiate::content_type(format), body);
        let headers = response.headers_mut();
        put_status_headers(headers, code, &message);
        if let EdgeError::MethodNotAllowed { allow, .. } = err
            && let Ok(v) = HeaderValue::from_str(allow)
        {
            headers.insert(header::ALLOW, v);
        }
        if let EdgeError::Upstream(u) = err {
            headers.extend(u.metadata.clone());
        }
        if let EdgeError::Shed(reason) = err {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            self.metrics
                .shed
                .get_or_create(&crate::metrics::ShedLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
        response
    }

    /// An error as google.rpc.Status in `format` (mid-stream status records).
    pub(super) fn status_body(&self, err: &EdgeError, format: Format) -> Bytes {
        self.status_rendering(err, format).0
    }

    /// An error as google.rpc.Status in `format`, and the findings of rendering upstream
    /// details (a downgrade) when there were any.
    pub(super) fn status_rendering(
        &self,
        err: &EdgeError,
        format: Format,
    ) -> (Bytes, Option<Findings>) {
        let (code, _) = err.code_and_status();
        let message = err.to_string();
        // Upstream details travel as they came: grpc-status-details-bin is a google.rpc.Status.
        let upstream_details = match err {
            EdgeError::Upstream(u) => u.details.clone(),
            _ => None,
        };
        let from_upstream = upstream_details.is_some();
        let status_bytes = upstream_details
            .unwrap_or_else(|| Bytes::from(transcode::encode_status(code as i32, &message)));
        if format == Format::Protobuf {
            return (status_bytes, None);
        }
        let mut out = Vec::new();
        match self.schema.from_protobuf(
            &self.status,
            format,
            &status_bytes,
            &mut out,
            &self.transcode,
        ) {
            Ok(findings) => (Bytes::from(out), from_upstream.then_some(findings)),
            Err(e) => {
                tracing::warn!(error = %e, "upstream grpc-status-details-bin does not render; sending code and message only");
                let fallback = transcode::encode_status(code as i32, &message);
                let mut out = Vec::new();
                let _ = self.schema.from_protobuf(
                    &self.status,
                    format,
                    &fallback,
                    &mut out,
                    &self.transcode,
                );
                (Bytes::from(out), None)
            }
        }
    }
}

/// A google.api.HttpBody answer: its bytes under its own content type.
pub(super) fn raw_response(content_type: &str, data: Bytes) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::full(data));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, raw_content_type(content_type));
    r
}

/// An HttpBody's content type as a header (application/octet-stream when it has none).
pub(super) fn raw_content_type(content_type: &str) -> HeaderValue {
    HeaderValue::from_str(content_type)
        .ok()
        .filter(|_| !content_type.is_empty())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

pub(super) fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<ResponseBody> {
    let mut r = Response::new(ResponseBody::full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}
