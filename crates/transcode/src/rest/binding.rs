//! How a request maps onto its method, whichever way it came: the one precedence that finds
//! the method ([`Routes::resolve`]) and the one value that says what to do with the request
//! and its answer ([`Binding`]). The edge asks these instead of branching on
//! `POST /pkg.Service/Method` versus an HTTP rule.

use std::sync::Arc;

use super::{Lookup, RequestBody, Route, Routes, UnknownQuery};
use crate::{Error, Findings, Format, Method, Options, Schema};

/// Where a request goes.
pub enum Resolution<'a, 'p> {
    /// A method, through its gRPC path or an HTTP rule.
    Found(Resolved<'a, 'p>),
    /// The path is served, under other HTTP methods only (listed; `POST` too for a path that is
    /// also a gRPC path).
    PathNotAllowed(Vec<&'a str>),
    /// The gRPC path of this method, under another HTTP method than `POST`.
    MethodNotAllowed(&'a Method),
    NotFound,
}

/// A method found for a request: the method, and the HTTP rule with its variables' raw
/// (percent-encoded) values when the request came through one. [`Resolved::binding`] borrows
/// it as a [`Binding`].
pub struct Resolved<'a, 'p> {
    pub method: &'a Method,
    pub rule: Option<(&'a Arc<Route>, Vec<&'p str>)>,
}

impl<'a, 'p> Resolved<'a, 'p> {
    pub fn binding(&self) -> Binding<'a, '_>
    where
        'p: 'a,
    {
        Binding {
            method: self.method,
            rule: self
                .rule
                .as_ref()
                .map(|(route, values)| (*route, values.as_slice())),
        }
    }
}

impl Routes {
    /// The one precedence: `POST` to a method's gRPC path (`/pkg.Service/Method`) is that
    /// method, whatever the rules say; anything else is looked up among the HTTP rules, most
    /// specific first. The OpenAPI document lists the same order (a rule on a gRPC path is
    /// the one shadowed).
    pub fn resolve<'a, 'p>(
        &'a self,
        schema: &'a Schema,
        http_method: &str,
        path: &'p str,
    ) -> Resolution<'a, 'p> {
        let grpc = schema.method(path);
        if let Some(method) = grpc
            && http_method == "POST"
        {
            return Resolution::Found(Resolved { method, rule: None });
        }
        match self.find(http_method, path) {
            Lookup::Found(route, values) => Resolution::Found(Resolved {
                method: &route.method,
                rule: Some((route, values)),
            }),
            Lookup::MethodNotAllowed(mut allow) => {
                if grpc.is_some() && !allow.contains(&"POST") {
                    allow.push("POST");
                }
                Resolution::PathNotAllowed(allow)
            }
            Lookup::NotFound => match grpc {
                Some(method) => Resolution::MethodNotAllowed(method),
                None => Resolution::NotFound,
            },
        }
    }
}

/// A matched request's method and how the request maps onto it: `POST /pkg.Service/Method`
/// (no rule: the body is the whole request message, the answer the whole response) or an
/// HTTP rule (path variables and query parameters bound, a body field, a response field,
/// `google.api.HttpBody`).
#[derive(Clone, Copy)]
pub struct Binding<'a, 'v> {
    pub method: &'a Method,
    rule: Option<(&'a Arc<Route>, &'v [&'a str])>,
}

impl<'a, 'v> Binding<'a, 'v> {
    /// The binding of an answer: what renders a method's responses (path values play no
    /// part there).
    pub fn of_answer(method: &'a Method, route: Option<&'a Arc<Route>>) -> Binding<'a, 'v> {
        Binding {
            method,
            rule: route.map(|route| (route, &[][..])),
        }
    }

    /// The HTTP rule the request came through.
    pub fn rule(&self) -> Option<&'a Route> {
        self.rule.map(|(route, _)| &**route)
    }

    /// The HTTP rule, shared (a response stream keeps it).
    pub fn route(&self) -> Option<&'a Arc<Route>> {
        self.rule.map(|(route, _)| route)
    }

    /// Whether the request carries a body (a rule without `body` refuses one).
    pub fn takes_body(&self) -> bool {
        self.rule().is_none_or(Route::takes_body)
    }

    /// Whether the body is a `google.api.HttpBody`'s raw bytes, under their own type.
    pub fn raw_request(&self) -> bool {
        self.rule().is_some_and(Route::raw_request)
    }

    /// Whether the answer is a `google.api.HttpBody`'s raw bytes, under their own type.
    pub fn raw_response(&self) -> bool {
        self.rule().is_some_and(Route::raw_response)
    }

    /// Whether the answer has a protobuf form (a `response_body` that is not a message has
    /// none).
    pub fn protobuf_response(&self) -> bool {
        self.rule().is_none_or(Route::protobuf_response)
    }

    /// Whether a request body in `from` goes upstream as it came (no decoding, no copy):
    /// protobuf that is the whole request message.
    pub fn request_passes_through(&self, from: Format) -> bool {
        from == Format::Protobuf && self.rule.is_none()
    }

    /// Whether an answer goes back as it came in `to`: protobuf that is the whole response.
    pub fn response_passes_through(&self, to: Format) -> bool {
        to == Format::Protobuf && self.rule().is_none_or(|r| r.response_body.is_none())
    }

    /// Builds the request message from the body (and, under a rule, the query and the path
    /// variables), appended to `out` as protobuf. Errors name the field, parameter or
    /// variable.
    pub fn request(
        &self,
        schema: &Schema,
        query: Option<&str>,
        body: RequestBody<'_>,
        unknown_query: UnknownQuery,
        opts: &Options,
        out: &mut Vec<u8>,
    ) -> Result<Findings, Error> {
        match (self.rule, body) {
            (Some((route, values)), body) => {
                route.request(schema, values, query, body, unknown_query, opts, out)
            }
            (None, RequestBody::Formatted(from, data)) => {
                schema.to_protobuf(&self.method.input, from, data, out, opts)
            }
            (None, RequestBody::Empty) => Ok(Findings::default()),
            (None, RequestBody::Raw { .. }) => Err(Error::request(format!(
                "{} takes a message, not raw bytes",
                self.method.path
            ))),
        }
    }

    /// Renders one answer as the HTTP response in `to`: the whole message, or the rule's
    /// `response_body` field.
    pub fn response(
        &self,
        schema: &Schema,
        to: Format,
        answer: &[u8],
        out: &mut Vec<u8>,
        opts: &Options,
    ) -> Result<Findings, Error> {
        match self.rule() {
            Some(route) => route.response(schema, to, answer, out, opts),
            None => schema.from_protobuf(&self.method.output, to, answer, out, opts),
        }
    }

    /// A `google.api.HttpBody` answer's content type and bytes.
    pub fn raw_response_parts(&self, answer: &[u8]) -> Result<(String, Vec<u8>), Error> {
        match self.rule() {
            Some(route) => route.raw_response_parts(answer),
            None => Err(Error::unrenderable(format!(
                "{} does not answer a google.api.HttpBody",
                self.method.path
            ))),
        }
    }
}
