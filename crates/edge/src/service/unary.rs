//! Unary calls, after `negotiate`: `decode_request` (the body read under its limits and
//! converted, or passed through; path variables and query parameters bound under an HTTP
//! rule; also the one request message of a server stream), `call_upstream`,
//! `encode_response` (also the one answer of a client stream).

use super::*;

impl Edge {
    /// Reads the body and builds the request message: the body converted (or passed through),
    /// and under an HTTP rule the path variables and query parameters bound in.
    pub(super) async fn decode_request<B>(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Bytes, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        // Under an HTTP rule that takes a body, an unsupported Content-Type on a body known to
        // be non-empty (a Content-Length) is refused before the body is read; other bodies
        // are checked once read (an empty one needs no type).
        if let Some((route, _)) = target.route
            && route.takes_body()
            && !route.raw_request()
            && plan.body_type.is_none()
            && body.size_hint().lower() > 0
        {
            return Err(unsupported_body(head));
        }
        let body = read_limited(
            body,
            self.config.max_body_bytes,
            self.config.body_read_timeout,
        )
        .await?;
        let input = &target.method.input;
        let Some((route, values)) = target.route else {
            return match plan.request {
                // Protobuf goes up as it came, unchecked: checking costs as much as the rest
                // of the pass-through. A malformed body is diagnosed if the upstream fails.
                Format::Protobuf => Ok(body),
                from => {
                    // Protobuf is smaller than the JSON or MessagePack it came from.
                    let mut out = Vec::with_capacity(body.len());
                    self.schema
                        .to_protobuf(input, from, &body, &mut out, &self.transcode)
                        .map_err(EdgeError::BadBody)?;
                    Ok(Bytes::from(out))
                }
            };
        };
        let request_body = if body.is_empty() {
            RequestBody::Empty
        } else if route.raw_request() {
            RequestBody::Raw {
                content_type: header_str(&head.headers, header::CONTENT_TYPE).unwrap_or(""),
                data: &body,
            }
        } else {
            let format = match plan.body_type {
                // A rule without a body refuses any body (400, naming that), whatever its type.
                _ if !route.takes_body() => Format::Json,
                Some(format) => format,
                None => return Err(unsupported_body(head)),
            };
            RequestBody::Formatted(format, &body)
        };
        let mut out = Vec::with_capacity(body.len() + 64);
        route
            .request(
                &self.schema,
                values,
                head.uri.query(),
                request_body,
                self.config.unknown_query,
                &self.transcode,
                &mut out,
            )
            .map_err(bad_request)?;
        Ok(Bytes::from(out))
    }

    pub(super) async fn unary<'s, B>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &http::request::Parts,
        target: Target<'s, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let method = target.method;
        let message = self.decode_request(head, target, plan, body).await?;

        // call_upstream
        let metadata = upstream_metadata(&head.headers);
        // A pass-through body is kept (a reference count, no copy) to diagnose a failure;
        // bodies the gateway encoded itself are well-formed and need not be kept.
        let sent = (plan.request == Format::Protobuf).then(|| message.clone());
        // A unary plan always has a deadline (the configured cap at least).
        let timeout = plan.deadline.unwrap_or(self.config.upstream_timeout);
        let call = self
            .upstreams
            .unary(&method.service, &method.path, message, metadata, timeout);
        let (answer, _) = self
            .call_upstream(method, Some(timeout), sent, call)
            .await?;
        let mut response = self.encode_response(ctx, target, plan, &answer.body)?;
        response
            .headers_mut()
            .extend(metadata_headers(answer.metadata));
        Ok(response)
    }

    /// A unary answer in the negotiated format (or raw, for a google.api.HttpBody).
    pub(super) fn encode_response(
        &self,
        ctx: &RequestCtx<'_>,
        target: Target<'_, '_>,
        plan: Plan,
        answer: &Bytes,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        let route = target.rule();
        if let Some(route) = route.filter(|r| r.raw_response()) {
            let (content_type, data) = route
                .raw_response_parts(answer)
                .map_err(|e| EdgeError::Internal(format!("upstream HttpBody is malformed: {e}")))?;
            return Ok(raw_response(&content_type, Bytes::from(data)));
        }
        let to = plan.response;
        let body = match route {
            _ if passes_through(to, route) => answer.clone(),
            route => {
                let mut out = Vec::with_capacity(answer.len() * 2);
                let rendered = match route {
                    Some(route) => {
                        route.response(&self.schema, to, answer, &mut out, &self.transcode)
                    }
                    None => self.schema.from_protobuf(
                        &target.method.output,
                        to,
                        answer,
                        &mut out,
                        &self.transcode,
                    ),
                };
                let findings = rendered.map_err(|e| {
                    EdgeError::Internal(format!(
                        "upstream response does not render as {}: {e}",
                        to.as_str()
                    ))
                })?;
                self.note_downgrades(
                    target.method,
                    &ctx.client,
                    plan.fallback,
                    to,
                    &findings,
                    true,
                );
                Bytes::from(out)
            }
        };
        Ok(plain(StatusCode::OK, negotiate::content_type(to), body))
    }
}

/// The 415 for a body in a type we do not read (worded from its Content-Type).
fn unsupported_body(head: &http::request::Parts) -> EdgeError {
    match negotiate::request_format(head.headers.get(header::CONTENT_TYPE)) {
        Err(e) => e,
        Ok(format) => EdgeError::Internal(format!(
            "{} was taken for a type the gateway does not read",
            format.as_str()
        )),
    }
}
