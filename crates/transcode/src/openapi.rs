//! An OpenAPI 3.1 document of what the gateway serves, generated from the schema and its HTTP
//! rules: every rule's route (path variables and query parameters as parameters, the body and
//! `response_body` as the request and response schemas) and the `POST /pkg.Service/Method`
//! route of every method. `components.schemas` holds one schema per message and enum that an
//! operation reaches, in the JSON mapping's shape (json names, 64-bit integers as strings,
//! bytes as base64, enums as names or numbers, the well-known types' JSON forms).
//!
//! What OpenAPI cannot say is kept in extensions: routes of custom HTTP methods (`SEARCH`) under
//! `x-protogate-custom-methods`, and routes whose path an earlier route of the same HTTP method
//! already takes in OpenAPI's terms (`/v1/{name=shelves/*}` and `/v1/{name=authors/*}` are both
//! `/v1/{name}`) under `x-protogate-overlapping-routes`, keyed by their template.
//!
//! The output is deterministic: the same schema and routes give the same document.

use std::collections::{BTreeMap, HashMap, HashSet};

use prost_reflect::{EnumDescriptor, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value, json};

use crate::rest::{BodyTarget, Route, Routes};
use crate::{Method, Schema, StreamingKind, media};

/// The canonical media types, as the gateway's answers carry them.
const JSON: &str = media::JSON[0];
const MSGPACK: &str = media::MSGPACK[0];
const PROTOBUF: &str = media::PROTOBUF[0];
const NDJSON: &str = media::NDJSON[0];
const SSE: &str = media::SSE[0];

const STATUS: &str = "google.rpc.Status";

/// The HTTP methods an OpenAPI path item has a field for (as `google.api.http` spells them).
const OPENAPI_METHODS: &[&str] = &[
    "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE",
];

/// At most this many query parameters are listed for one operation: wide, deeply nested
/// request messages could otherwise describe millions.
const MAX_QUERY_PARAMETERS: usize = 1000;

/// The OpenAPI 3.1 document of `routes` (built from `schema`) and of every method's
/// `POST /pkg.Service/Method` route.
pub fn document(schema: &Schema, routes: &Routes, title: &str) -> Value {
    let mut g = Generator::default();
    let mut methods: Vec<&Method> = schema.methods().collect();
    methods.sort_by(|a, b| a.full_name.cmp(&b.full_name));
    let ids = OperationIds::new(schema, routes, &methods);

    let mut paths = Paths::default();
    // The gRPC paths first, by the one precedence (`Routes::resolve`: `POST
    // /pkg.Service/Method` is the method before any rule), so a rule with that very path is the
    // one shadowed.
    for m in &methods {
        let path = format!("/{}", m.full_name);
        let op = g.operation(m, None, &ids.rpc[&*m.full_name], &[]);
        paths.insert(&path, &path, Vec::new(), "post", op);
    }
    let mut custom: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut overlapping: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for (i, route) in routes.iter().enumerate() {
        let converted = convert_path(&route.rule.path);
        let own: Vec<String> = converted.vars.iter().map(|v| v.name.clone()).collect();
        let id = &ids.routes[i];
        if !OPENAPI_METHODS.contains(&route.rule.method.as_str()) {
            let op = g.operation(&route.method, Some((route, &converted)), id, &own);
            custom
                .entry(converted.path)
                .or_default()
                .insert(route.rule.method.clone(), op);
            continue;
        }
        let method = route.rule.method.to_ascii_lowercase();
        let (path, names) = paths.key_for(&converted);
        // A rule the router never reaches (`Routes::resolve` sends a request on a gRPC path
        // to its method first) is listed with the overlapping ones, as is one whose path and
        // method an earlier entry took.
        let unreachable = converted.vars.is_empty()
            && matches!(
                routes.resolve(schema, &route.rule.method, &route.rule.path),
                crate::rest::Resolution::Found(r) if r.rule.is_none()
            );
        if unreachable || paths.taken(&path, &method) {
            let op = g.operation(&route.method, Some((route, &converted)), id, &own);
            overlapping
                .entry(route.rule.path.clone())
                .or_default()
                .insert(method, op);
        } else {
            let op = g.operation(&route.method, Some((route, &converted)), id, &names);
            paths.insert(&path, &converted.shape, names, &method, op);
        }
    }

    let error = g.error_response(schema.message(STATUS));
    let mut tags: Vec<&str> = methods.iter().map(|m| &*m.service).collect();
    tags.dedup();
    let tags: Vec<Value> = tags
        .into_iter()
        .map(|name| {
            let mut tag = json!({ "name": name });
            let service = methods
                .iter()
                .find(|m| &*m.service == name)
                .map(|m| m.descriptor.parent_service());
            if let Some(s) = service
                && let Some(c) = g.comments.get(&s.parent_file(), s.path())
            {
                tag["description"] = c.into();
            }
            tag
        })
        .collect();

    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": "1",
            "description": "Generated by protogate from the loaded schema and its HTTP rules. \
                Bodies are application/json (the proto3 JSON mapping), application/msgpack \
                (the same shape) or application/x-protobuf, by Content-Type and Accept; \
                request bodies and query parameters take proto field names as well as the \
                JSON names shown. Errors are google.rpc.Status.",
        },
        "tags": tags,
        "paths": paths.into_value(),
    });
    let schemas = g.finish();
    doc["components"] = json!({
        "schemas": schemas,
        "responses": { "Error": error },
    });
    if !custom.is_empty() {
        doc["x-protogate-custom-methods"] = json!(custom);
    }
    if !overlapping.is_empty() {
        doc["x-protogate-overlapping-routes"] = json!(overlapping);
    }
    doc
}

// --- paths -------------------------------------------------------------------------------------

/// A rule's path template in OpenAPI's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConvertedPath {
    /// `/v1/{name}:archive`.
    path: String,
    /// The path with every parameter as `{}`: OpenAPI takes paths of the same shape for the
    /// same path.
    shape: String,
    /// The path parameters in order.
    vars: Vec<PathVar>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathVar {
    /// The parameter's name: the variable's field path, or `_1`, `_2`… for a `*` or `**`
    /// outside any variable.
    name: String,
    /// Index into the route's variables (None: a wildcard outside any variable).
    variable: Option<usize>,
    /// The segments the variable covers (`*` when the template gives none).
    pattern: String,
}

/// Converts a (valid) path template: `/v1/{name=shelves/*/books/*}:archive` →
/// `/v1/{name}:archive`.
fn convert_path(template: &str) -> ConvertedPath {
    let mut path = String::with_capacity(template.len());
    let mut shape = String::with_capacity(template.len());
    let mut vars: Vec<PathVar> = Vec::new();
    let mut variables = 0;
    let mut wildcards = 0;
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        let after_slash = path.ends_with('/');
        if c == '{'
            && let Some(end) = rest.find('}')
        {
            let inner = &rest[1..end];
            let (name, pattern) = inner.split_once('=').unwrap_or((inner, "*"));
            path.push_str(&format!("{{{name}}}"));
            shape.push_str("{}");
            vars.push(PathVar {
                name: name.to_owned(),
                variable: Some(variables),
                pattern: pattern.to_owned(),
            });
            variables += 1;
            rest = &rest[end + 1..];
        } else if c == '*' && after_slash {
            let pattern = if rest.starts_with("**") { "**" } else { "*" };
            wildcards += 1;
            let name = format!("_{wildcards}");
            path.push_str(&format!("{{{name}}}"));
            shape.push_str("{}");
            vars.push(PathVar {
                name,
                variable: None,
                pattern: pattern.to_owned(),
            });
            rest = &rest[pattern.len()..];
        } else {
            path.push(c);
            shape.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    ConvertedPath { path, shape, vars }
}

/// An anchored regular expression for the values of a variable's segments.
fn pattern_regex(pattern: &str) -> String {
    let mut re = String::from("^");
    for (i, seg) in pattern.split('/').enumerate() {
        match seg {
            "**" if i == 0 => re.push_str(".*"),
            "**" => re.push_str("(/.*)?"),
            _ => {
                if i > 0 {
                    re.push('/');
                }
                if seg == "*" {
                    re.push_str("[^/]+");
                } else {
                    for c in seg.chars() {
                        // ECMA-262 (JSON Schema's dialect) allows escaping only these.
                        if "\\^$.*+?()[]{}|".contains(c) {
                            re.push('\\');
                        }
                        re.push(c);
                    }
                }
            }
        }
    }
    re.push('$');
    re
}

/// The `paths` object under construction. OpenAPI takes two paths that differ only in their
/// parameters' names for the same path, so the first route of a shape names its parameters
/// and later routes of that shape use those names.
#[derive(Default)]
struct Paths {
    items: BTreeMap<String, BTreeMap<String, Value>>,
    /// Shape → (path, parameter names).
    shapes: HashMap<String, (String, Vec<String>)>,
}

impl Paths {
    fn key_for(&self, converted: &ConvertedPath) -> (String, Vec<String>) {
        match self.shapes.get(&converted.shape) {
            Some(known) => known.clone(),
            None => (
                converted.path.clone(),
                converted.vars.iter().map(|v| v.name.clone()).collect(),
            ),
        }
    }

    fn taken(&self, path: &str, method: &str) -> bool {
        self.items
            .get(path)
            .is_some_and(|ops| ops.contains_key(method))
    }

    fn insert(&mut self, path: &str, shape: &str, names: Vec<String>, method: &str, op: Value) {
        self.shapes
            .entry(shape.to_owned())
            .or_insert_with(|| (path.to_owned(), names));
        self.items
            .entry(path.to_owned())
            .or_default()
            .insert(method.to_owned(), op);
    }

    fn into_value(self) -> Value {
        json!(self.items)
    }
}

// --- operation ids -----------------------------------------------------------------------------

/// `pkg.Service.Method` for a method's first binding, `pkg.Service.Method.1`, `.2`… for the
/// others, `pkg.Service.Method.rpc` for `POST /pkg.Service/Method`. Bindings are numbered in
/// the order their annotation lists them; the bindings of configured rules (which replace
/// the annotations and are not known here) in the routes' order, most specific first.
struct OperationIds {
    /// By route index.
    routes: Vec<String>,
    /// By method full name (`pkg.Service/Method`).
    rpc: HashMap<String, String>,
}

impl OperationIds {
    fn new(schema: &Schema, routes: &Routes, methods: &[&Method]) -> OperationIds {
        // The annotations' order of bindings; configured rules keep the routes' order.
        let mut annotated: HashMap<String, Vec<(String, String, String, String)>> = HashMap::new();
        for rule in schema.http_rules().unwrap_or_default() {
            let list = annotated.entry(rule.selector.clone()).or_default();
            for b in std::iter::once(&rule).chain(&rule.additional_bindings) {
                list.push((
                    b.method.clone(),
                    b.path.clone(),
                    b.body.clone(),
                    b.response_body.clone(),
                ));
            }
        }
        let mut by_method: BTreeMap<String, Vec<(usize, usize)>> = BTreeMap::new();
        for (i, r) in routes.iter().enumerate() {
            let selector = r.method.descriptor.full_name();
            let position = annotated
                .get(selector)
                .and_then(|list| {
                    list.iter().position(|(m, p, b, rb)| {
                        *m == r.rule.method
                            && *p == r.rule.path
                            && *b == r.rule.body
                            && *rb == r.rule.response_body
                    })
                })
                .unwrap_or(usize::MAX);
            by_method
                .entry(selector.to_owned())
                .or_default()
                .push((position, i));
        }
        let mut used = HashSet::new();
        let mut unique = |id: String| {
            let mut candidate = id.clone();
            let mut n = 2;
            while !used.insert(candidate.clone()) {
                candidate = format!("{id}_{n}");
                n += 1;
            }
            candidate
        };
        let mut ids = vec![String::new(); routes.iter().count()];
        for (selector, mut list) in by_method {
            list.sort_unstable();
            for (k, (_, i)) in list.into_iter().enumerate() {
                ids[i] = unique(if k == 0 {
                    selector.clone()
                } else {
                    format!("{selector}.{k}")
                });
            }
        }
        let rpc = methods
            .iter()
            .map(|m| {
                let id = unique(format!("{}.rpc", m.descriptor.full_name()));
                (m.full_name.to_string(), id)
            })
            .collect();
        OperationIds { routes: ids, rpc }
    }
}

// --- schemas -----------------------------------------------------------------------------------

/// How a value is written: in a body (the JSON mapping) or as a URL string (path variable,
/// query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Body,
    Url,
}

#[derive(Default)]
struct Generator {
    comments: Comments,
    /// Full names of the components written or queued.
    seen: HashSet<String>,
    queue: Vec<Pending>,
    components: BTreeMap<String, Value>,
}

enum Pending {
    Message(MessageDescriptor),
    Enum(EnumDescriptor),
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn binary(description: String) -> Value {
    json!({ "type": "string", "format": "binary", "description": description })
}

fn is_deprecated_field(f: &FieldDescriptor) -> bool {
    f.field_descriptor_proto()
        .options
        .as_ref()
        .is_some_and(|o| o.deprecated())
}

impl Generator {
    /// The components, once every operation is written.
    fn finish(&mut self) -> Value {
        while let Some(p) = self.queue.pop() {
            let (name, schema) = match p {
                Pending::Message(m) => (m.full_name().to_owned(), self.message_schema(&m)),
                Pending::Enum(e) => (e.full_name().to_owned(), self.enum_schema(&e)),
            };
            self.components.insert(name, schema);
        }
        json!(std::mem::take(&mut self.components))
    }

    fn message_ref(&mut self, m: &MessageDescriptor) -> Value {
        if self.seen.insert(m.full_name().to_owned()) {
            self.queue.push(Pending::Message(m.clone()));
        }
        reference(m.full_name())
    }

    fn enum_ref(&mut self, e: &EnumDescriptor) -> Value {
        if self.seen.insert(e.full_name().to_owned()) {
            self.queue.push(Pending::Enum(e.clone()));
        }
        reference(e.full_name())
    }

    fn message_schema(&mut self, m: &MessageDescriptor) -> Value {
        let mut properties = Map::new();
        for f in m.fields() {
            let mut s = self.field_schema(&f);
            let mut notes: Vec<String> = self
                .comments
                .get(&f.parent_file(), f.path())
                .into_iter()
                .collect();
            if let Some(o) = f.containing_oneof().filter(|o| !o.is_synthetic()) {
                let members: Vec<String> =
                    o.fields().map(|f| format!("`{}`", f.json_name())).collect();
                notes.push(format!(
                    "Part of oneof `{}`: at most one of {} is set.",
                    o.name(),
                    members.join(", ")
                ));
            }
            if !notes.is_empty() {
                // The field's words first, then the type's (a well-known type's form).
                if let Some(Value::String(d)) = s.get("description") {
                    notes.push(d.clone());
                }
                s["description"] = notes.join("\n\n").into();
            }
            if is_deprecated_field(&f) {
                s["deprecated"] = true.into();
            }
            properties.insert(f.json_name().to_owned(), s);
        }
        let mut s = json!({ "type": "object", "properties": properties });
        if let Some(c) = self.comments.get(&m.parent_file(), m.path()) {
            s["description"] = c.into();
        }
        if m.descriptor_proto()
            .options
            .as_ref()
            .is_some_and(|o| o.deprecated())
        {
            s["deprecated"] = true.into();
        }
        s
    }

    fn enum_schema(&mut self, e: &EnumDescriptor) -> Value {
        let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
        let numbers: Vec<String> = e
            .values()
            .map(|v| format!("{} = {}", v.name(), v.number()))
            .collect();
        let mut s = json!({
            "oneOf": [
                { "type": "string", "enum": names },
                {
                    "type": "integer",
                    "format": "int32",
                    "description": format!("The value's number: {}.", numbers.join(", ")),
                },
            ],
        });
        if let Some(c) = self.comments.get(&e.parent_file(), e.path()) {
            s["description"] = c.into();
        }
        s
    }

    /// The schema of a field's value in a body: maps and repeated fields included.
    fn field_schema(&mut self, f: &FieldDescriptor) -> Value {
        if f.is_map()
            && let Kind::Message(entry) = f.kind()
        {
            let key = entry.map_entry_key_field();
            let value = entry.map_entry_value_field();
            let mut s = json!({
                "type": "object",
                "additionalProperties": self.kind_schema(&value.kind(), Mode::Body),
            });
            let names = match key.kind() {
                Kind::Bool => Some(json!({ "enum": ["true", "false"] })),
                Kind::String => None,
                Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => {
                    Some(json!({ "pattern": "^[0-9]+$" }))
                }
                _ => Some(json!({ "pattern": "^-?[0-9]+$" })),
            };
            if let Some(names) = names {
                s["propertyNames"] = names;
            }
            s
        } else if f.is_list() {
            json!({ "type": "array", "items": self.kind_schema(&f.kind(), Mode::Body) })
        } else {
            self.kind_schema(&f.kind(), Mode::Body)
        }
    }

    /// The schema of a field's value as URL strings: repeated fields are arrays (the
    /// parameter repeats).
    fn url_schema(&mut self, f: &FieldDescriptor) -> Value {
        let one = self.kind_schema(&f.kind(), Mode::Url);
        if f.is_list() {
            json!({ "type": "array", "items": one })
        } else {
            one
        }
    }

    /// The schema of one value of a kind.
    fn kind_schema(&mut self, kind: &Kind, mode: Mode) -> Value {
        let float = |format: &str| {
            json!({
                "oneOf": [
                    { "type": "number", "format": format },
                    { "type": "string", "enum": ["NaN", "Infinity", "-Infinity"] },
                ],
            })
        };
        // 64-bit integers are strings in JSON (numbers are accepted too); in a URL they are
        // digits either way.
        let long = |format: &str| match mode {
            Mode::Body => json!({ "type": "string", "format": format }),
            Mode::Url => json!({ "type": "integer", "format": format }),
        };
        match kind {
            Kind::Double => float("double"),
            Kind::Float => float("float"),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Kind::Uint32 | Kind::Fixed32 => json!({
                "type": "integer",
                "format": "uint32",
                "minimum": 0,
                "maximum": u32::MAX,
            }),
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => long("int64"),
            Kind::Uint64 | Kind::Fixed64 => long("uint64"),
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::String => json!({ "type": "string" }),
            Kind::Bytes => json!({
                "type": "string",
                "format": "byte",
                "contentEncoding": "base64",
            }),
            Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue" => match mode {
                Mode::Body => json!({ "type": "null" }),
                Mode::Url => json!({ "type": "string", "enum": ["NULL_VALUE"] }),
            },
            Kind::Enum(e) => self.enum_ref(e),
            Kind::Message(m) => self.message_value(m, mode),
        }
    }

    /// A message-typed value: the well-known types' JSON forms inline, other messages by
    /// reference.
    fn message_value(&mut self, m: &MessageDescriptor, mode: Mode) -> Value {
        if crate::encode::is_wrapper(m) {
            let inner = m.get_field(1).map_or(Kind::String, |f| f.kind());
            let inner = self.kind_schema(&inner, mode);
            return match mode {
                Mode::Body => nullable(inner),
                Mode::Url => inner,
            };
        }
        match m.full_name() {
            "google.protobuf.Timestamp" => json!({
                "type": "string",
                "format": "date-time",
                "description": "RFC 3339, in UTC (`Z`) on output: 1972-01-01T10:00:20.021Z.",
            }),
            "google.protobuf.Duration" => json!({
                "type": "string",
                "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$",
                "description": "Seconds with up to nine fractional digits and the suffix `s`: 1.5s.",
            }),
            "google.protobuf.FieldMask" => json!({
                "type": "string",
                "format": "field-mask",
                "description": "Comma-separated field paths: `displayName,address.city`.",
            }),
            "google.protobuf.Struct" => json!({ "type": "object" }),
            "google.protobuf.Value" => json!({ "description": "Any JSON value." }),
            "google.protobuf.ListValue" => json!({ "type": "array" }),
            "google.protobuf.Any" => any_schema(),
            _ => self.message_ref(m),
        }
    }

    // --- operations ----------------------------------------------------------------------------

    /// One operation: a rule's route (with its converted path and the names its path
    /// parameters take), or `POST /pkg.Service/Method` when `route` is None.
    fn operation(
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

    fn message_ref_of(&mut self, m: &MessageDescriptor) -> Value {
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

    /// The query parameters of a route: every field of the request not bound by the path or
    /// the body that a URL can set (scalars, enums, the well-known types with a string form;
    /// nested messages' fields dotted), by json name.
    fn query_parameters(&mut self, route: &Route, out: &mut Vec<Value>, truncated: &mut bool) {
        if matches!(route.body, BodyTarget::All) {
            return;
        }
        let body = match &route.body {
            BodyTarget::Field(f) => Some(f.number()),
            _ => None,
        };
        let bound: Vec<Vec<u32>> = route
            .variable_fields()
            .iter()
            .map(|p| p.iter().map(|f| f.number()).collect())
            .collect();
        let mut walk = QueryWalk {
            bound: &bound,
            body,
            stack: vec![route.method.input.full_name().to_owned()],
            numbers: Vec::new(),
            found: Vec::new(),
            truncated: false,
        };
        walk.message(&route.method.input);
        *truncated = walk.truncated;
        for path in walk.found {
            // Never skips: a found path ends at its parameter's field.
            let Some(leaf) = path.last() else { continue };
            let json_name: Vec<&str> = path.iter().map(|f| f.json_name()).collect();
            let proto_name: Vec<&str> = path.iter().map(|f| f.name()).collect();
            let (json_name, proto_name) = (json_name.join("."), proto_name.join("."));
            let mut notes: Vec<String> = self
                .comments
                .get(&leaf.parent_file(), leaf.path())
                .into_iter()
                .collect();
            if json_name != proto_name {
                notes.push(format!("Also accepted as `{proto_name}`."));
            }
            let mut p = json!({
                "name": json_name,
                "in": "query",
                "schema": self.url_schema(leaf),
            });
            if !notes.is_empty() {
                p["description"] = notes.join("\n\n").into();
            }
            if is_deprecated_field(leaf) {
                p["deprecated"] = true.into();
            }
            out.push(p);
        }
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
    fn error_response(&mut self, status: Option<MessageDescriptor>) -> Value {
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

/// google.protobuf.Any in JSON.
fn any_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "@type": {
                "type": "string",
                "description": "`type.googleapis.com/` and the full name of the message.",
            },
        },
        "description": "The message's fields next to `@type` (a well-known type with a JSON \
            form of its own under `value`).",
    })
}

fn raw_content() -> Value {
    json!({
        "*/*": {
            "schema": binary("google.api.HttpBody: the bytes as they are, with their own \
                content type.".to_owned()),
        },
    })
}

/// `schema` or null.
fn nullable(mut schema: Value) -> Value {
    if let Some(Value::String(t)) = schema.get("type").cloned() {
        schema["type"] = json!([t, "null"]);
        return schema;
    }
    if let Some(Value::Array(alternatives)) = schema.get_mut("oneOf") {
        alternatives.push(json!({ "type": "null" }));
        return schema;
    }
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// The walk over a request message's fields for query parameters.
struct QueryWalk<'a> {
    bound: &'a [Vec<u32>],
    body: Option<u32>,
    /// Messages being descended into (a recursive message ends the descent).
    stack: Vec<String>,
    numbers: Vec<u32>,
    found: Vec<Vec<FieldDescriptor>>,
    truncated: bool,
}

impl QueryWalk<'_> {
    fn message(&mut self, m: &MessageDescriptor) {
        self.walk(m, &mut Vec::new());
    }

    fn walk(&mut self, m: &MessageDescriptor, path: &mut Vec<FieldDescriptor>) {
        for f in m.fields() {
            if self.found.len() >= MAX_QUERY_PARAMETERS {
                self.truncated = true;
                return;
            }
            if path.is_empty() && Some(f.number()) == self.body {
                continue;
            }
            self.numbers.push(f.number());
            let bound = self.bound.contains(&self.numbers);
            if !bound && !f.is_map() {
                path.push(f.clone());
                match f.kind() {
                    Kind::Message(inner) if crate::rest::leaf_kind(&f).is_err() => {
                        if !f.is_list()
                            && !crate::encode::has_special_json(inner.full_name())
                            && !self.stack.iter().any(|s| s == inner.full_name())
                        {
                            self.stack.push(inner.full_name().to_owned());
                            self.walk(&inner, path);
                            self.stack.pop();
                        }
                    }
                    _ => self.found.push(path.clone()),
                }
                path.pop();
            }
            self.numbers.pop();
        }
    }
}

// --- comments ----------------------------------------------------------------------------------

/// Leading comments from the schema's source info (descriptor sets built with it), by file
/// and element path.
#[derive(Default)]
struct Comments {
    files: HashMap<String, HashMap<Vec<i32>, String>>,
}

impl Comments {
    fn get(&mut self, file: &FileDescriptor, path: &[i32]) -> Option<String> {
        self.files
            .entry(file.name().to_owned())
            .or_insert_with(|| {
                let Some(info) = &file.file_descriptor_proto().source_code_info else {
                    return HashMap::new();
                };
                info.location
                    .iter()
                    .filter_map(|l| {
                        let text = clean_comment(l.leading_comments.as_deref()?);
                        (!text.is_empty()).then(|| (l.path.clone(), text))
                    })
                    .collect()
            })
            .get(path)
            .cloned()
    }
}

fn clean_comment(c: &str) -> String {
    let lines: Vec<&str> = c
        .lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect();
    lines.join("\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::HttpRule;

    const PROTO: &str = r#"
        syntax = "proto3";
        package t.v1;
        import "google/protobuf/empty.proto";
        import "google/protobuf/struct.proto";
        import "google/protobuf/wrappers.proto";

        enum Color { COLOR_UNSPECIFIED = 0; RED = 1; }

        // A tree.
        message Node {
          string id = 1;
          Node child = 2;
          repeated Node children = 3;
          map<int64, Color> colors = 4;
          oneof pick { string a = 5; int32 b = 6; }
          google.protobuf.Struct meta = 7;
          google.protobuf.Value any_value = 8;
          google.protobuf.NullValue nothing = 9;
          google.protobuf.DoubleValue score = 10;
          string old = 11 [deprecated = true];
          map<bool, string> flags = 12;
          uint32 small = 13;
        }

        message Page { int32 size = 1; Node where = 2; }

        service Tree {
          rpc Get(Node) returns (Node);
          rpc List(Page) returns (stream Node);
          rpc Ping(google.protobuf.Empty) returns (google.protobuf.Empty);
        }
    "#;

    fn rule(selector: &str, method: &str, path: &str) -> HttpRule {
        HttpRule {
            selector: selector.into(),
            method: method.into(),
            path: path.into(),
            ..HttpRule::default()
        }
    }

    fn doc() -> Value {
        let schema = Schema::compile(&["t.proto".to_owned()], |name| {
            (name == "t.proto").then(|| PROTO.to_owned())
        })
        .unwrap();
        let mut get = rule("t.v1.Tree.Get", "GET", "/v1/{id=nodes/*}");
        get.additional_bindings = vec![
            // The same OpenAPI path and method as the first: an overlapping route.
            rule("", "GET", "/v1/{id=roots/*}"),
            rule("", "SEARCH", "/v1/nodes"),
            rule("", "GET", "/v1/*/things/{child.id}"),
        ];
        let rules = [get, rule("t.v1.Tree.List", "GET", "/v1/pages/{size}")];
        let routes = Routes::new(&schema, &rules).unwrap();
        let doc = document(&schema, &routes, "t");
        assert_eq!(document(&schema, &routes, "t"), doc);
        assert_eq!(
            document(&schema, &routes, "t").to_string(),
            doc.to_string(),
            "deterministic"
        );
        doc
    }

    fn names(op: &Value) -> Vec<&str> {
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn paths_from_templates() {
        let c = convert_path("/v1/{name=shelves/*/books/*}:archive");
        assert_eq!(c.path, "/v1/{name}:archive");
        assert_eq!(c.shape, "/v1/{}:archive");
        assert_eq!(c.vars[0].pattern, "shelves/*/books/*");
        assert_eq!(c.vars[0].variable, Some(0));
        let c = convert_path("/v1/{book.name}/x");
        assert_eq!(c.path, "/v1/{book.name}/x");
        assert_eq!(c.vars[0].pattern, "*");
        let c = convert_path("/v1/*/x/{a}/**:v");
        assert_eq!(c.path, "/v1/{_1}/x/{a}/{_2}:v");
        let vars: Vec<_> = c
            .vars
            .iter()
            .map(|v| (v.name.as_str(), v.variable))
            .collect();
        assert_eq!(vars, [("_1", None), ("a", Some(0)), ("_2", None)]);

        assert_eq!(
            pattern_regex("shelves/*/books/*"),
            "^shelves/[^/]+/books/[^/]+$"
        );
        assert_eq!(pattern_regex("**"), "^.*$");
        assert_eq!(pattern_regex("a.b/**"), "^a\\.b(/.*)?$");
    }

    #[test]
    fn operations_parameters_and_extensions() {
        let doc = doc();
        let paths = &doc["paths"];
        // Configured rules (not annotations) are numbered in the routes' order, most specific
        // first.
        let get = &paths["/v1/{id}"]["get"];
        assert_eq!(get["operationId"], "t.v1.Tree.Get.1");
        // Recursive and repeated messages, maps, Struct and Value are no query parameters.
        assert_eq!(
            names(get),
            ["id", "a", "b", "nothing", "score", "old", "small"]
        );
        let score = &get["parameters"][4];
        assert_eq!(score["schema"]["oneOf"][0]["format"], "double");
        assert_eq!(get["parameters"][5]["deprecated"], true);
        assert_eq!(
            doc["x-protogate-overlapping-routes"]["/v1/{id=roots/*}"]["get"]["operationId"],
            "t.v1.Tree.Get.2"
        );
        assert_eq!(
            doc["x-protogate-custom-methods"]["/v1/nodes"]["SEARCH"]["operationId"],
            "t.v1.Tree.Get"
        );
        let things = &paths["/v1/{_1}/things/{child.id}"]["get"];
        assert_eq!(things["operationId"], "t.v1.Tree.Get.3");
        assert_eq!(&names(things)[..3], ["_1", "child.id", "id"]);
        assert_eq!(things["parameters"][0]["in"], "path");

        // A server stream: nested fields dotted, the recursion cut at the repeated type.
        let list = &paths["/v1/pages/{size}"]["get"];
        assert_eq!(list["parameters"][0]["schema"]["type"], "integer");
        assert_eq!(names(list)[..3], ["size", "where.id", "where.a"]);
        assert!(!names(list).iter().any(|n| n.starts_with("where.child")));
        let content = &list["responses"]["200"]["content"];
        assert_eq!(
            content["application/json"]["schema"]["items"]["$ref"],
            "#/components/schemas/t.v1.Node"
        );
        assert!(content.get("text/event-stream").is_some());

        let ping = &paths["/t.v1.Tree/Ping"]["post"];
        assert_eq!(ping["operationId"], "t.v1.Tree.Ping.rpc");
        assert_eq!(
            ping["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/google.protobuf.Empty"
        );
        assert_eq!(doc["tags"], json!([{ "name": "t.v1.Tree" }]));
    }

    #[test]
    fn message_schemas() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        let node = &schemas["t.v1.Node"];
        let p = &node["properties"];
        assert_eq!(p["child"]["$ref"], "#/components/schemas/t.v1.Node");
        assert_eq!(
            p["colors"],
            json!({
                "type": "object",
                "additionalProperties": { "$ref": "#/components/schemas/t.v1.Color" },
                "propertyNames": { "pattern": "^-?[0-9]+$" },
            })
        );
        assert_eq!(
            p["flags"]["propertyNames"],
            json!({ "enum": ["true", "false"] })
        );
        assert!(
            p["a"]["description"]
                .as_str()
                .unwrap()
                .contains("oneof `pick`")
        );
        assert_eq!(p["meta"], json!({ "type": "object" }));
        assert!(p["anyValue"].get("type").is_none());
        assert_eq!(p["nothing"], json!({ "type": "null" }));
        assert_eq!(p["score"]["oneOf"][2], json!({ "type": "null" }));
        assert_eq!(p["old"]["deprecated"], true);
        assert_eq!(p["small"]["maximum"], u32::MAX);
        assert_eq!(
            schemas["t.v1.Color"]["oneOf"][0]["enum"],
            json!(["COLOR_UNSPECIFIED", "RED"])
        );
        assert_eq!(
            schemas["google.protobuf.Empty"],
            json!({ "type": "object", "properties": {} })
        );

        // Every reference resolves.
        fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r);
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let pointer = r.strip_prefix('#').unwrap();
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }
}
