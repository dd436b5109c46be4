//! Answers: errors rendered as google.rpc.Status (written in the request's protocol's form),
//! the status records of streams, and the small response builders.

use super::*;

impl Edge {
    /// Renders an error as google.rpc.Status in the request's protocol's form and the format
    /// it decides ([`Protocol::error_format`]: the plan's, or Accept's when the request
    /// failed before it had a plan). Rendering upstream details as JSON is a downgrade.
    pub(super) fn error_response(
        &self,
        ctx: &mut RequestCtx<'_>,
        err: &EdgeError,
    ) -> Response<ResponseBody> {
        let status = err.code_and_status().1;
        // Shedding is counted, not logged at warn: under overload a line per refusal would add
        // to it; and a client asking for what is not implemented is the client's doing.
        if status.is_server_error()
            && !matches!(err, EdgeError::Shed(_) | EdgeError::NotImplemented(_))
        {
            tracing::warn!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %err, "request failed");
        } else {
            tracing::debug!(method = ctx.method.map(|m| &*m.full_name), status = status.as_u16(), error = %err, "request rejected");
        }
        if let EdgeError::Shed(reason) = err {
            self.metrics
                .shed
                .get_or_create(&crate::metrics::ShedLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
        // The sunset policy's refusal of JSON is answered in JSON, the one format such a
        // client reads.
        let negotiated = match err {
            EdgeError::JsonRefused { .. } => Some(Format::Json),
            _ => ctx.plan.map(|p| p.response),
        };
        let format = ctx.protocol.error_format(negotiated, &ctx.head.headers);
        let (body, findings) = self.status_rendering(err, format);
        // A rendering the client reads in the format it asked for; Connect's error JSON
        // carries the details' bytes beside their JSON, so a protobuf client loses nothing.
        if let (Some(findings), Some(method)) = (findings, ctx.method)
            && negotiated.is_none_or(|asked| asked == format)
        {
            let of = Rendering {
                method,
                client: &ctx.caller.client,
                fallback: ctx.plan.is_some_and(|p| p.fallback),
            };
            self.note_downgrades(&of, format, &findings, true);
        }
        ctx.protocol.error_answer(
            ctx.head,
            err,
            format,
            body,
            &self.config.forward_response_headers,
        )
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

pub(super) use crate::protocol::plain;
