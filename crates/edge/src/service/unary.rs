//! Unary calls, after `negotiate`: `decode_request` (the body read under its limits and
//! converted, or passed through; path variables and query parameters bound under an HTTP
//! rule; also the one request message of a server stream), the call, `encode_response`
//! (also the one answer of a client stream).

use super::*;

impl Edge {
    /// Reads the body and builds the request message as the binding says: the body converted
    /// (or passed through), and under an HTTP rule the path variables and query parameters
    /// bound in.
    pub(super) async fn decode_request<B>(
        &self,
        head: &http::request::Parts,
        target: Binding<'_, '_>,
        plan: Plan,
        body: B,
        ticket: &mut Ticket,
    ) -> Result<(Bytes, Option<Conversion>), EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        // A body in a type we do not read, known to be non-empty (a Content-Length), is
        // refused before it is read; other bodies once read (an empty one needs no type).
        let typed = target.takes_body() && !target.raw_request();
        if typed && plan.body_type.is_none() && body.size_hint().lower() > 0 {
            return Err(unsupported_body(head));
        }
        let body = read_limited(
            body,
            self.config.max_body_bytes,
            self.config.body_read_timeout,
            ticket,
        )
        .await?;
        let body = if plan.enveloped_request {
            crate::protocol::connect::one_message(
                body,
                plan.message_coding,
                self.config.max_body_bytes,
            )?
        } else {
            body
        };
        // Protobuf goes up as it came, unchecked: checking costs as much as the rest of the
        // pass-through. A malformed body is diagnosed if the upstream fails.
        if target.request_passes_through(plan.request) {
            let n = body.len();
            return Ok((body, Some(Conversion::passed_through(n))));
        }
        let request_body = if target.rule().is_none() {
            RequestBody::Formatted(plan.request, &body)
        } else if body.is_empty() {
            RequestBody::Empty
        } else if target.raw_request() {
            RequestBody::Raw {
                content_type: header_str(&head.headers, header::CONTENT_TYPE).unwrap_or(""),
                data: &body,
            }
        } else {
            let format = match plan.body_type {
                // A rule without a body refuses any body (400, naming that), whatever its type.
                _ if !typed => Format::Json,
                Some(format) => format,
                None => return Err(unsupported_body(head)),
            };
            RequestBody::Formatted(format, &body)
        };
        // Protobuf is smaller than the JSON or MessagePack it came from.
        let mut out = Vec::with_capacity(body.len() + 64);
        let began = Instant::now();
        target
            .request(
                &self.schema,
                head.uri.query(),
                request_body,
                self.config.unknown_query,
                &self.transcode,
                &mut out,
            )
            .map_err(bad_request)?;
        let conversion = Conversion {
            format: plan.body_type.unwrap_or(plan.request),
            protobuf_bytes: out.len(),
            format_bytes: body.len(),
            elapsed: began.elapsed(),
        };
        Ok((Bytes::from(out), Some(conversion)))
    }

    pub(super) async fn unary<'s, B>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &http::request::Parts,
        target: Binding<'s, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let method = target.method;
        let (message, conversion) = self
            .decode_request(head, target, plan, body, ctx.ticket()?)
            .await?;
        ctx.noted.request_conversion = conversion;

        // call_upstream
        let metadata = ctx.upstream_metadata(self)?;
        // A pass-through body is kept (a reference count, no copy) to diagnose a failure;
        // bodies the gateway encoded itself are well-formed and need not be kept.
        let sent = (plan.request == Format::Protobuf).then(|| message.clone());
        // A unary plan always has a deadline (the configured cap at least).
        let timeout = plan.deadline.unwrap_or(self.config.upstream_timeout);
        let call = self.upstreams.unary(
            method,
            message,
            metadata,
            timeout,
            self.retries.of(method).as_ref(),
        );
        let (answer, latency) = self.call_upstream(method, Some(timeout), sent, call).await;
        ctx.upstream_latency = Some(latency);
        ctx.end_call(match &answer {
            Ok(_) => Code::Ok,
            Err(e) => e.code_and_status().0,
        });
        let (answer, _) = answer?;
        let mut response = self.encode_response(ctx, target, plan, &answer.body)?;
        response.headers_mut().extend(
            ctx.protocol
                .answer_metadata(&answer.metadata, &self.config.forward_response_headers),
        );
        Ok(response)
    }

    /// encode_response: a unary answer in the plan's format, as the binding renders it (or
    /// raw, for a google.api.HttpBody).
    pub(super) fn encode_response(
        &self,
        ctx: &mut RequestCtx<'_>,
        target: Binding<'_, '_>,
        plan: Plan,
        answer: &Bytes,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        if target.raw_response() {
            let (content_type, data) = target.raw_response_parts(answer).map_err(|e| {
                EdgeError::BadUpstreamAnswer(format!("the upstream's HttpBody is malformed: {e}"))
            })?;
            return Ok(raw_response(&content_type, Bytes::from(data)));
        }
        let to = plan.response;
        if target.response_passes_through(to) {
            ctx.noted.answer_conversion = Some(Conversion::passed_through(answer.len()));
            return Ok(plain(
                StatusCode::OK,
                ctx.protocol.content_type(to),
                answer.clone(),
            ));
        }
        let mut out = Vec::with_capacity(answer.len() * 2);
        let began = Instant::now();
        let mut findings = target
            .response(
                &self.schema,
                to,
                answer,
                &mut out,
                self.json.of(target.method).options(None),
            )
            .map_err(|e| {
                EdgeError::BadUpstreamAnswer(format!(
                    "the upstream's answer does not render as {}: {e}",
                    to.as_str()
                ))
            })?;
        let elapsed = began.elapsed();
        let of = Rendering {
            method: target.method,
            client: &ctx.caller.client,
            fallback: plan.fallback,
        };
        self.note_downgrades(&of, to, &findings, true);
        ctx.noted.answer_conversion = Some(Conversion {
            format: to,
            protobuf_bytes: answer.len(),
            format_bytes: out.len(),
            elapsed,
        });
        ctx.noted.dropped = std::mem::take(&mut findings.unknown_fields);
        Ok(plain(
            StatusCode::OK,
            ctx.protocol.content_type(to),
            Bytes::from(out),
        ))
    }
}

/// The 415 for a body in a type we do not read (the plan has no body type): worded from its
/// Content-Type, which only this error path reads again.
fn unsupported_body(head: &http::request::Parts) -> EdgeError {
    negotiate::request_format(head.headers.get(header::CONTENT_TYPE))
        .err()
        .unwrap_or_else(|| EdgeError::UnsupportedMediaType("unsupported Content-Type".into()))
}
