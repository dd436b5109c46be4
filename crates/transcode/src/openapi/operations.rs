//! Operations: an operation's id, tags, description, path parameters, request body and
//! responses in every format and framing the gateway speaks, and `components.responses.Error`.

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{Value, json};

use super::STATUS;
use super::paths::{ConvertedPath, PathVar, pattern_regex};
use super::schemas::{Generator, Mode, any_schema, reference};
use crate::rest::{BodyTarget, Route};
use crate::{Method, StreamingKind, media};

/// The canonical media types, as the gateway's answers carry them.
const JSON: &str = media::JSON[0];
const MSGPACK: &str = media::MSGPACK[0];
const PROTOBUF: &str = media::PROTOBUF[0];
const NDJSON: &str = media::NDJSON[0];
const SSE: &str = media::SSE[0];

fn binary(description: String) -> Value {
    json!({ "type": "string", "format": "binary", "description": description })
}

impl Generator {
    /// One operation: a rule's route (with its converted path and the names its path
    /// parameters take), or `POST /pkg.Service/Method` when `route` is None.
    pub(super) fn operation(
        &mut self,
        method: &Method,
        route: Option<(&Route, &ConvertedPath)>,
        id: &str,
        names: &[String],
    ) -> Value {
        let client_stream = matches!(
            method.streaming,
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional
        );
        let server_stream = matches!(
            method.streaming,
            StreamingKind::ServerStreaming | StreamingKind::Bidirectional
        );
        let mut op = json!({
            "operationId": id,
            "tags": [&*method.service],
            "summary": method.descriptor.name(),
        });
        op["description"] = self
            .operation_description(method, route.map(|(r, _)| r))
            .into();
        if method
            .descriptor
            .method_descriptor_proto()
            .options
            .as_ref()
            .is_some_and(|o| o.deprecated())
        {
            op["deprecated"] = true.into();
        }

        let mut parameters = Vec::new();
        if let Some((route, converted)) = route {
            for (var, name) in converted.vars.iter().zip(names) {
                parameters.push(self.path_parameter(route, var, name));
            }
            if !client_stream {
                let mut truncated = false;
                self.query_parameters(route, &mut parameters, &mut truncated);
                if truncated {
                    op["x-protogate-query-parameters-truncated"] = true.into();
                }
            }
        }
        if !parameters.is_empty() {
            op["parameters"] = parameters.into();
        }

        let input = &method.input;
        let body = if client_stream {
            Some(self.stream_content(input, false))
        } else {
            match route.map(|(r, _)| r) {
                None => {
                    let s = self.message_ref_of(input);
                    Some(self.unary_content(s, Some(input)))
                }
                Some(r) if r.raw_request() => Some(raw_content()),
                Some(r) => match &r.body {
                    BodyTarget::None => None,
                    BodyTarget::All => {
                        let s = self.message_ref_of(input);
                        Some(self.unary_content(s, Some(input)))
                    }
                    BodyTarget::Field(f) => {
                        let schema = self.field_schema(f);
                        let message = match f.kind() {
                            Kind::Message(m) if !f.is_list() => Some(m),
                            _ => None,
                        };
                        Some(self.unary_content(schema, message.as_ref()))
                    }
                },
            }
        };
        if let Some(content) = body {
            op["requestBody"] = json!({ "content": content });
        }

        let response = match route.map(|(r, _)| r) {
            Some(r) if r.raw_response() => raw_content(),
            Some(r) => {
                let protobuf = if r.protobuf_response() {
                    r.response_message()
                } else {
                    None
                };
                match (&r.response_body, server_stream) {
                    (None, false) => {
                        let s = self.message_ref_of(&method.output);
                        self.unary_content(s, protobuf.as_ref())
                    }
                    (None, true) => self.stream_content(&method.output, true),
                    (Some(f), stream) => {
                        let item = self.field_schema(f);
                        if stream {
                            self.stream_content_of(item, protobuf.as_ref(), true)
                        } else {
                            self.unary_content(item, protobuf.as_ref())
                        }
                    }
                }
            }
            None if server_stream => self.stream_content(&method.output, true),
            None => {
                let s = self.message_ref_of(&method.output);
                self.unary_content(s, Some(&method.output))
            }
        };
        let description = match route.and_then(|(r, _)| r.response_body.as_ref()) {
            Some(f) => format!(
                "Field `{}` of {}.",
                f.json_name(),
                method.output.full_name()
            ),
            None => format!("{}.", method.output.full_name()),
        };
        op["responses"] = json!({
            "200": { "description": description, "content": response },
            "default": { "$ref": "#/components/responses/Error" },
        });
        op
    }

    pub(super) fn message_ref_of(&mut self, m: &MessageDescriptor) -> Value {
        self.message_value(m, Mode::Body)
    }

    fn operation_description(&mut self, method: &Method, route: Option<&Route>) -> String {
        let mut parts: Vec<String> = self
            .comments
            .get(&method.descriptor.parent_file(), method.descriptor.path())
            .into_iter()
            .collect();
        let shape = match method.streaming {
            StreamingKind::Unary => "unary",
            StreamingKind::ClientStreaming => "client streaming",
            StreamingKind::ServerStreaming => "server streaming",
            StreamingKind::Bidirectional => "bidirectional streaming",
        };
        let mut call = format!("Calls `{}` ({shape})", method.full_name);
        match route {
            Some(r) => call.push_str(&format!(
                " by the HTTP rule `{} {}`",
                r.rule.method, r.rule.path
            )),
            None => call.push_str(" with the whole request message as the body"),
        }
        call.push('.');
        parts.push(call);
        if let Some(r) = route
            && let BodyTarget::Field(f) = &r.body
            && !matches!(
                method.streaming,
                StreamingKind::ClientStreaming | StreamingKind::Bidirectional
            )
        {
            parts.push(format!("The request body is field `{}`.", f.name()));
        }
        match method.streaming {
            StreamingKind::Unary | StreamingKind::ServerStreaming => {}
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional => {
                let mut s = String::from(
                    "The request body is a stream of request messages: one JSON array, \
                     application/x-ndjson (one message a line), consecutive MessagePack values \
                     or varint-delimited protobuf, by Content-Type.",
                );
                if route.is_some() {
                    s.push_str(
                        " Every field comes from those messages: values in the path or the \
                         query are refused.",
                    );
                }
                parts.push(s);
            }
        }
        if matches!(
            method.streaming,
            StreamingKind::ServerStreaming | StreamingKind::Bidirectional
        ) {
            parts.push(
                "The response is a stream of messages in the framing Accept picks: one JSON \
                 array, application/x-ndjson, server-sent events, consecutive MessagePack values \
                 or varint-delimited protobuf. An error after the first message ends the stream \
                 with `{\"@error\": google.rpc.Status}` (an `error` event in server-sent events)."
                    .into(),
            );
        }
        if method.streaming == StreamingKind::Bidirectional {
            parts.push("Served over HTTP/2 only.".into());
        }
        parts.join("\n\n")
    }

    fn path_parameter(&mut self, route: &Route, var: &PathVar, name: &str) -> Value {
        let mut notes = Vec::new();
        let leaf = var
            .variable
            .and_then(|k| route.variable_fields().get(k))
            .and_then(|fields| fields.last());
        let schema = match leaf {
            Some(leaf) => {
                if let Some(c) = self.comments.get(&leaf.parent_file(), leaf.path()) {
                    notes.push(c);
                }
                if name != var.name {
                    notes.push(format!("Sets field `{}`.", var.name));
                }
                let mut s = self.url_schema(leaf);
                if var.pattern != "*" {
                    notes.push(if var.pattern == "**" {
                        "Any path, possibly empty; its slashes are sent as they are, not \
                         percent-encoded."
                            .to_owned()
                    } else {
                        format!(
                            "A value of the form `{}`; its slashes are sent as they are, not \
                             percent-encoded.",
                            var.pattern
                        )
                    });
                    if leaf.kind() == Kind::String {
                        s["pattern"] = pattern_regex(&var.pattern).into();
                    }
                }
                s
            }
            None => {
                notes.push(if var.pattern == "**" {
                    "Any path (its slashes unencoded); not passed to the method.".to_owned()
                } else {
                    "Any path segment; not passed to the method.".to_owned()
                });
                json!({ "type": "string" })
            }
        };
        let mut p = json!({
            "name": name,
            "in": "path",
            "required": true,
            "schema": schema,
        });
        if !notes.is_empty() {
            p["description"] = notes.join("\n\n").into();
        }
        p
    }

    fn unary_content(&mut self, schema: Value, protobuf: Option<&MessageDescriptor>) -> Value {
        let mut content = json!({
            JSON: { "schema": schema.clone() },
            MSGPACK: { "schema": schema },
        });
        if let Some(m) = protobuf {
            content[PROTOBUF] = json!({
                "schema": binary(format!("{}, protobuf-encoded.", m.full_name())),
            });
        }
        content
    }

    fn stream_content(&mut self, m: &MessageDescriptor, response: bool) -> Value {
        let item = self.message_ref_of(m);
        self.stream_content_of(item, Some(m), response)
    }

    fn stream_content_of(
        &mut self,
        item: Value,
        protobuf: Option<&MessageDescriptor>,
        response: bool,
    ) -> Value {
        let mut content = json!({
            JSON: { "schema": { "type": "array", "items": item.clone() } },
            NDJSON: { "schema": item.clone() },
            MSGPACK: { "schema": item },
        });
        if response {
            content[SSE] = json!({
                "schema": {
                    "type": "string",
                    "description": "One `data:` event per message, the message as JSON.",
                },
            });
        }
        if let Some(m) = protobuf {
            content[PROTOBUF] = json!({
                "schema": binary(format!(
                    "{} messages, each protobuf-encoded behind its length as a varint.",
                    m.full_name()
                )),
            });
        }
        content
    }

    /// `components.responses.Error`: a google.rpc.Status in the negotiated format.
    pub(super) fn error_response(&mut self, status: Option<MessageDescriptor>) -> Value {
        match status {
            Some(m) => {
                self.message_ref(&m);
            }
            None => {
                // Schemas always carry google.rpc.Status (it is bundled); its shape anyway.
                self.seen.insert(STATUS.to_owned());
                self.components.insert(
                    STATUS.to_owned(),
                    json!({
                        "type": "object",
                        "properties": {
                            "code": { "type": "integer", "format": "int32" },
                            "message": { "type": "string" },
                            "details": { "type": "array", "items": any_schema() },
                        },
                    }),
                );
            }
        }
        json!({
            "description": "An error: a google.rpc.Status in the format Accept asks for.",
            "headers": {
                "grpc-status": {
                    "description": "The gRPC status code.",
                    "schema": { "type": "integer" },
                },
                "grpc-message": {
                    "description": "The status message, percent-encoded.",
                    "schema": { "type": "string" },
                },
            },
            "content": {
                JSON: { "schema": reference(STATUS) },
                MSGPACK: { "schema": reference(STATUS) },
                PROTOBUF: { "schema": binary(format!("{STATUS}, protobuf-encoded.")) },
            },
        })
    }
}

fn raw_content() -> Value {
    json!({
        "*/*": {
            "schema": binary("google.api.HttpBody: the bytes as they are, with their own \
                content type.".to_owned()),
        },
    })
}
