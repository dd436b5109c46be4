//! Unary calls (and the one request message of a server stream): `negotiate` the formats,
//! `decode_request` (the body read under its limits and converted, or passed through; path
//! variables and query parameters bound under an HTTP rule), the call, `encode_response`.

use super::*;

impl Edge {
    /// The request's format and the unary response's, from Content-Type and Accept.
    pub(super) fn negotiate_unary(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
    ) -> Result<Negotiated, EdgeError> {
        let request = self.request_format(head, target)?;
        let (response, fallback) = self.response_format(head, target, request)?;
        Ok(Negotiated {
            request,
            response,
            fallback,
        })
    }

    /// The request's format from Content-Type. Under an HTTP rule a request without a
    /// (supported) Content-Type is taken as JSON: a GET has no body, and a body is refused
    /// (415) when it is read.
    pub(super) fn request_format(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
    ) -> Result<Format, EdgeError> {
        let content_type = head.headers.get(header::CONTENT_TYPE);
        match target.route {
            None => negotiate::request_format(content_type),
            Some((route, _)) if route.raw_request() => Ok(Format::Json),
            Some(_) => Ok(negotiate::request_format(content_type).unwrap_or(Format::Json)),
        }
    }

    /// The format of a single answer from Accept (a google.api.HttpBody answer is raw: no
    /// negotiation, reported as protobuf).
    pub(super) fn response_format(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
        request: Format,
    ) -> Result<(Format, bool), EdgeError> {
        let route = target.rule();
        if route.is_some_and(Route::raw_response) {
            return Ok((Format::Protobuf, false));
        }
        negotiate::response_format(
            request,
            head.headers.get(header::ACCEPT),
            self.config.strict_accept,
            route.is_none_or(Route::protobuf_response),
        )
    }

    /// The deadline of the upstream call: the client's (`grpc-timeout`, `X-Timeout`) capped by
    /// `--upstream-timeout`.
    pub(super) fn deadline(&self, head: &http::request::Parts) -> Result<Duration, EdgeError> {
        let timeout = client_timeout(&head.headers)?;
        Ok(timeout.map_or(self.config.upstream_timeout, |t| {
            t.min(self.config.upstream_timeout)
        }))
    }

    /// Reads the body and builds the request message: the body converted (or passed through),
    /// and under an HTTP rule the path variables and query parameters bound in.
    pub(super) async fn decode_request<B>(
        &self,
        head: &http::request::Parts,
        target: Target<'_, '_>,
        formats: Negotiated,
        body: B,
    ) -> Result<Bytes, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        // Under an HTTP rule that takes a body, an unsupported Content-Type on a body known to
        // be non-empty (a Content-Length) is refused before the body is read; other bodies
        // are checked once read (an empty one needs no type).
        let content_type = head.headers.get(header::CONTENT_TYPE);
        let body_format = match target.route {
            Some((route, _))
                if route.takes_body() && !route.raw_request() && body.size_hint().lower() > 0 =>
            {
                Some(negotiate::request_format(content_type)?)
            }
            _ => None,
        };
        let body = read_limited(
            body,
            self.config.max_body_bytes,
            self.config.body_read_timeout,
        )
        .await?;
        let input = &target.method.input;
        let Some((route, values)) = target.route else {
            return match formats.request {
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
            let format = match body_format {
                Some(format) => format,
                // A rule without a body refuses any body (400, naming that), whatever its type.
                None if !route.takes_body() => Format::Json,
                None => negotiate::request_format(content_type)?,
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
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let method = target.method;
        // negotiate
        let formats = self.negotiate_unary(head, target)?;
        ctx.formats = Some(formats);
        let timeout = self.deadline(head)?;

        // decode_request
        let message = self.decode_request(head, target, formats, body).await?;

        // call_upstream
        let metadata = upstream_metadata(&head.headers);
        // A pass-through body is kept (a reference count, no copy) to diagnose a failure;
        // bodies the gateway encoded itself are well-formed and need not be kept.
        let sent = (formats.request == Format::Protobuf).then(|| message.clone());
        let call = self
            .upstreams
            .unary(&method.service, &method.path, message, metadata, timeout);
        let (answer, _) = self
            .call_upstream(method, Some(timeout), sent, call)
            .await?;

        // encode_response
        let mut response = self.encode_response(ctx, target, formats, &answer.body)?;
        response
            .headers_mut()
            .extend(metadata_headers(answer.metadata.into_headers()));
        Ok(response)
    }

    /// A unary answer in the negotiated format (or raw, for a google.api.HttpBody).
    pub(super) fn encode_response(
        &self,
        ctx: &RequestCtx<'_>,
        target: Target<'_, '_>,
        formats: Negotiated,
        answer: &Bytes,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        let route = target.rule();
        if let Some(route) = route.filter(|r| r.raw_response()) {
            let (content_type, data) = route
                .raw_response_parts(answer)
                .map_err(|e| EdgeError::Internal(format!("upstream HttpBody is malformed: {e}")))?;
            return Ok(raw_response(&content_type, Bytes::from(data)));
        }
        let to = formats.response;
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
                    formats.fallback,
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
