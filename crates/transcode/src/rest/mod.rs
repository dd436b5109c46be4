//! The REST mapping of google.api.http: rules (annotations or the caller's), routes built from
//! them when the schema loads, and the conversion of a matched request (path variables, query
//! parameters, body) into the method's request message. Pure functions of their inputs, as the
//! rest of the crate.
//!
//! A request message is assembled by concatenating encoded parts, which protobuf merges: the
//! body first, then the query parameters, then the path variables (so a path variable wins over
//! the same field in a `body: "*"` body, as grpc-gateway has it). A protobuf body therefore
//! reaches the upstream byte for byte, followed by the bound fields.

mod binding;
mod request;
mod rules;
mod template;

use std::collections::HashMap;
use std::sync::Arc;

use prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

pub use binding::{Binding, Resolution, Resolved};
pub use request::RequestBody;
pub use rules::HttpRule;
pub use template::percent_decode_bytes;
pub use template::{Dialect, Template, Variable};

use crate::{Method, Schema, SchemaError};

/// What to do with a query parameter that names no field of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownQuery {
    /// 400, naming the parameter (the default).
    #[default]
    Reject,
    /// Skip it.
    Ignore,
}

/// Where a route puts the request body.
#[derive(Debug, Clone)]
pub enum BodyTarget {
    /// The rule takes no body.
    None,
    /// `body: "*"`: the whole request message, less the fields bound by the path.
    All,
    /// `body: "field"`: one top-level field.
    Field(FieldDescriptor),
}

/// A rule bound to its method, checked against the schema.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: Method,
    /// The rule (for one binding: `additional_bindings` are routes of their own).
    pub rule: HttpRule,
    pub template: Template,
    pub body: BodyTarget,
    /// `response_body`: the top-level response field that is the HTTP response.
    pub response_body: Option<FieldDescriptor>,
    /// The field path of each template variable.
    vars: Vec<Vec<FieldDescriptor>>,
    /// PATCH: the FieldMask field filled from the body's keys when the request leaves it unset.
    patch_mask: Option<FieldDescriptor>,
}

/// Every route, most specific first.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Arc<Route>>,
    by_method: HashMap<String, Vec<usize>>,
    dialect: Dialect,
    /// [`Dialect::Envoy`]: every template's verb (a request's `:x` is a verb only if listed).
    verbs: Vec<String>,
}

/// The outcome of looking a request up.
#[derive(Debug)]
pub enum Lookup<'r, 'p> {
    /// The route and the raw (percent-encoded) value of each of its variables.
    Found(&'r Arc<Route>, Vec<&'p str>),
    /// The path matches routes of other HTTP methods only; they are listed.
    MethodNotAllowed(Vec<&'r str>),
    NotFound,
}

pub(crate) const HTTP_BODY: &str = "google.api.HttpBody";
const FIELD_MASK: &str = "google.protobuf.FieldMask";

impl Routes {
    /// Builds the routes of `schema`'s `google.api.http` annotations and of `configured` rules;
    /// a configured rule replaces the annotations of the method it selects. Fails, naming the
    /// rule, on a bad template, a field the request lacks, or two rules matching the same
    /// requests.
    pub fn new(schema: &Schema, configured: &[HttpRule]) -> Result<Routes, SchemaError> {
        Routes::with_dialect(schema, configured, Dialect::Spec)
    }

    /// [`Routes::new`] with the templates read and matched as `dialect` does.
    pub fn with_dialect(
        schema: &Schema,
        configured: &[HttpRule],
        dialect: Dialect,
    ) -> Result<Routes, SchemaError> {
        let by_selector: HashMap<String, &Method> = schema
            .methods()
            .map(|m| (m.descriptor.full_name().to_owned(), m))
            .collect();
        let overridden: std::collections::HashSet<&str> =
            configured.iter().map(|r| r.selector.as_str()).collect();
        let mut rules: Vec<HttpRule> = schema
            .http_rules()?
            .into_iter()
            .filter(|r| !overridden.contains(r.selector.as_str()))
            .collect();
        rules.extend(configured.iter().cloned());

        let mut routes = Vec::new();
        for rule in rules {
            let Some(method) = by_selector.get(&rule.selector) else {
                return Err(SchemaError::new(format!(
                    "http rule {}: no method {} in the schema",
                    rule.describe(),
                    rule.selector
                )));
            };
            let mut bindings = rule.additional_bindings.clone();
            let mut main = rule;
            main.additional_bindings.clear();
            for b in &bindings {
                if !b.additional_bindings.is_empty() {
                    return Err(SchemaError::new(format!(
                        "http rule {}: additional bindings cannot have bindings of their own",
                        b.describe()
                    )));
                }
            }
            bindings.insert(0, main);
            for binding in bindings {
                routes.push(
                    Route::new((*method).clone(), binding, dialect)
                        .map_err(|(rule, e)| SchemaError::new(format!("http rule {rule}: {e}")))?,
                );
            }
        }

        let mut seen: HashMap<(String, String), &Route> = HashMap::new();
        for r in &routes {
            let key = (r.rule.method.clone(), r.template.shape());
            if let Some(first) = seen.insert(key, r) {
                return Err(SchemaError::new(format!(
                    "http rules conflict: {} and {} match the same requests ({} {})",
                    first.rule.describe(),
                    r.rule.describe(),
                    r.rule.method,
                    r.template.shape()
                )));
            }
        }
        drop(seen);

        routes.sort_by_key(|r| r.template.specificity());
        let mut by_method: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, r) in routes.iter().enumerate() {
            by_method.entry(r.rule.method.clone()).or_default().push(i);
        }
        let mut verbs: Vec<String> = routes
            .iter()
            .filter_map(|r| r.template.verb().map(str::to_owned))
            .collect();
        verbs.sort_unstable();
        verbs.dedup();
        let routes = routes.into_iter().map(Arc::new).collect();
        Ok(Routes {
            routes,
            by_method,
            dialect,
            verbs,
        })
    }

    /// Every route, most specific first.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().map(|r| &**r)
    }

    /// Finds the most specific route for an HTTP method and a request path (as sent,
    /// percent-encoded, without the query).
    pub fn find<'r, 'p>(&'r self, http_method: &str, path: &'p str) -> Lookup<'r, 'p> {
        if let Some(candidates) = self.by_method.get(http_method) {
            for &i in candidates {
                let route = &self.routes[i];
                if let Some(values) = self.matches(route, path) {
                    return Lookup::Found(route, values);
                }
            }
        }
        let mut others: Vec<&str> = self
            .routes
            .iter()
            .filter(|r| r.rule.method != http_method && self.matches(r, path).is_some())
            .map(|r| r.rule.method.as_str())
            .collect();
        if others.is_empty() {
            return Lookup::NotFound;
        }
        others.sort_unstable();
        others.dedup();
        Lookup::MethodNotAllowed(others)
    }
}

impl Routes {
    #[inline]
    fn matches<'p>(&self, route: &Route, path: &'p str) -> Option<Vec<&'p str>> {
        match self.dialect {
            Dialect::Spec => route.template.matches(path),
            Dialect::Envoy => route.template.envoy_matches(path, &self.verbs),
        }
    }
}

impl Route {
    fn new(method: Method, rule: HttpRule, dialect: Dialect) -> Result<Route, (String, String)> {
        let fail = |e: String| (rule.describe(), e);
        if rule.method.is_empty() || rule.path.is_empty() {
            return Err(fail(
                "no HTTP method and path (get, put, post, delete, patch or custom)".into(),
            ));
        }
        if !rule
            .method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(fail(format!("{:?} is not an HTTP method", rule.method)));
        }
        let template = Template::parse_as(&rule.path, dialect)
            .map_err(|e| fail(format!("path template: {e}")))?;
        let input = &method.input;
        let mut vars = Vec::new();
        for v in template.variables() {
            let path = resolve_path(input, v.field_path.split('.'), false)
                .map_err(|e| fail(format!("path variable {{{}}}: {e}", v.field_path)))?;
            let Some(leaf) = path.last() else {
                return Err(fail("empty field path".into()));
            };
            if leaf.is_list() || leaf.is_map() {
                return Err(fail(format!(
                    "path variable {{{}}} names a repeated or map field",
                    v.field_path
                )));
            }
            leaf_kind(leaf)
                .map_err(|e| fail(format!("path variable {{{}}}: {e}", v.field_path)))?;
            vars.push(path);
        }
        let body =
            match rule.body.as_str() {
                "" => BodyTarget::None,
                "*" => BodyTarget::All,
                name => BodyTarget::Field(input.get_field_by_name(name).ok_or_else(|| {
                    fail(format!("body: {} has no field {name}", input.full_name()))
                })?),
            };
        // A request stream's messages come whole from the body: nothing to bind.
        if matches!(
            method.streaming,
            crate::StreamingKind::ClientStreaming | crate::StreamingKind::Bidirectional
        ) && (!matches!(body, BodyTarget::All)
            || !template.variables().is_empty()
            || input.full_name() == HTTP_BODY)
        {
            return Err(fail(
                "the method streams its requests: its rule takes body \"*\", no path variables, and no google.api.HttpBody".into(),
            ));
        }
        let response_body = match rule.response_body.as_str() {
            "" => None,
            name => Some(method.output.get_field_by_name(name).ok_or_else(|| {
                fail(format!(
                    "response_body: {} has no field {name}",
                    method.output.full_name()
                ))
            })?),
        };
        let patch_mask = if rule.method == "PATCH" && !matches!(body, BodyTarget::None) {
            let masks: Vec<FieldDescriptor> = input
                .fields()
                .filter(|f| {
                    is_message(f, FIELD_MASK)
                        && !matches!(&body, BodyTarget::Field(b) if b.number() == f.number())
                })
                .collect();
            masks
                .iter()
                .find(|f| f.name() == "update_mask")
                .or(if masks.len() == 1 {
                    masks.first()
                } else {
                    None
                })
                .cloned()
        } else {
            None
        };
        Ok(Route {
            method,
            rule,
            template,
            body,
            response_body,
            vars,
            patch_mask,
        })
    }

    /// Whether the rule binds a request body (`body: "*"` or a field).
    pub fn takes_body(&self) -> bool {
        !matches!(self.body, BodyTarget::None)
    }

    /// The request body is a `google.api.HttpBody`: raw bytes with their own content type.
    pub fn raw_request(&self) -> bool {
        match &self.body {
            BodyTarget::None => false,
            BodyTarget::All => self.method.input.full_name() == HTTP_BODY,
            BodyTarget::Field(f) => is_message(f, HTTP_BODY),
        }
    }

    /// The response is a `google.api.HttpBody` (the output, or its `response_body` field):
    /// answered as raw bytes with their own content type.
    pub fn raw_response(&self) -> bool {
        match &self.response_body {
            None => self.method.output.full_name() == HTTP_BODY,
            Some(f) => is_message(f, HTTP_BODY),
        }
    }

    /// Whether the response can be served as protobuf: not when `response_body` names a
    /// repeated, map or scalar field (no message to send).
    pub fn protobuf_response(&self) -> bool {
        self.response_body
            .as_ref()
            .is_none_or(|f| singular_message(f).is_some())
    }

    /// The message the HTTP response is made of (the output, or `response_body`'s message).
    pub fn response_message(&self) -> Option<MessageDescriptor> {
        match &self.response_body {
            None => Some(self.method.output.clone()),
            Some(f) => singular_message(f),
        }
    }

    /// The field paths bound by the template's variables.
    pub fn variable_fields(&self) -> &[Vec<FieldDescriptor>] {
        &self.vars
    }
}

fn is_message(f: &FieldDescriptor, name: &str) -> bool {
    singular_message(f).is_some_and(|m| m.full_name() == name)
}

/// The message type of a singular message field; None for scalars, repeated fields and maps
/// (prost-reflect's `is_list` is false for maps, so it cannot tell).
pub(crate) fn singular_message(f: &FieldDescriptor) -> Option<MessageDescriptor> {
    if f.cardinality() == Cardinality::Repeated {
        return None;
    }
    f.kind().as_message().cloned()
}

/// Resolves a dotted field path. Intermediate fields must be singular messages (not
/// well-known types with a JSON form of their own); names are proto names, or json names too
/// when `json_names`.
pub(crate) fn resolve_path<'a>(
    root: &MessageDescriptor,
    parts: impl Iterator<Item = &'a str>,
    json_names: bool,
) -> Result<Vec<FieldDescriptor>, String> {
    let mut msg = root.clone();
    let mut path: Vec<FieldDescriptor> = Vec::new();
    for part in parts {
        if let Some(prev) = path.last() {
            msg = match prev.kind() {
                Kind::Message(m)
                    if !prev.is_list()
                        && !prev.is_map()
                        && !crate::encode::has_special_json(m.full_name())
                        && !crate::encode::is_wrapper(&m) =>
                {
                    m
                }
                _ => {
                    return Err(format!(
                        "{} is not a message field with fields of its own",
                        prev.name()
                    ));
                }
            };
        }
        let field = if json_names {
            field_by_key(&msg, part)
        } else {
            msg.get_field_by_name(part)
        };
        let field = field.ok_or_else(|| format!("{} has no field {part}", msg.full_name()))?;
        path.push(field);
    }
    if path.is_empty() {
        return Err("empty field path".into());
    }
    Ok(path)
}

/// The field a JSON key names: its json_name first, then its proto name — the order the
/// encoders resolve keys in, so a key resolved here sets the same field there.
pub(crate) fn field_by_key(desc: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    desc.get_field_by_json_name(key)
        .or_else(|| desc.get_field_by_name(key))
}

/// The kind a string from a URL sets: scalars, enums, and the well-known types with a string
/// form (Timestamp, Duration, FieldMask, the wrappers).
pub(crate) fn leaf_kind(f: &FieldDescriptor) -> Result<Kind, String> {
    match f.kind() {
        Kind::Message(m) => {
            let name = m.full_name();
            if crate::encode::is_wrapper(&m) {
                Ok(m.get_field(1).map(|v| v.kind()).unwrap_or(Kind::String))
            } else if matches!(
                name,
                "google.protobuf.Timestamp" | "google.protobuf.Duration" | FIELD_MASK
            ) {
                Ok(Kind::String)
            } else {
                Err(format!(
                    "{} is a message ({name}); a URL can set only its fields",
                    f.name()
                ))
            }
        }
        k => Ok(k),
    }
}
