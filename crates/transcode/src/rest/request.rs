//! A matched request → the method's request message; the method's response → the HTTP
//! response under `response_body`.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use super::template::percent_decode;
use super::{
    BodyTarget, Route, UnknownQuery, field_by_key, leaf_kind, resolve_path, singular_message,
};
use crate::encode::Encoder;
use crate::tree::{In, Out};
use crate::wire::{self, Reader, put_len_prefixed, put_tag, put_varint};
use crate::{Error, Findings, Format, Options, Schema};

/// The body of an HTTP request, as the route will read it.
#[derive(Debug, Clone, Copy)]
pub enum RequestBody<'a> {
    /// No body, or an empty one.
    Empty,
    /// A body in one of the three formats.
    Formatted(Format, &'a [u8]),
    /// A body bound to a `google.api.HttpBody` ([`Route::raw_request`]): the bytes and the
    /// request's Content-Type, not transcoded.
    Raw {
        content_type: &'a str,
        data: &'a [u8],
    },
}

impl Route {
    /// Builds the request message of a matched route: the body, then the query parameters,
    /// then the path variables (`values` as [`super::Routes::find`] returned them), then, for
    /// a PATCH whose request leaves its FieldMask unset, the mask of the body's fields.
    /// Appends the protobuf bytes to `out`. Errors name the parameter, variable or field.
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        schema: &Schema,
        values: &[&str],
        query: Option<&str>,
        body: RequestBody<'_>,
        unknown_query: UnknownQuery,
        opts: &Options,
        out: &mut Vec<u8>,
    ) -> Result<Findings, Error> {
        let input = &self.method.input;
        let mut findings = self.body(schema, body, opts, out)?;

        let mut mask_set = false;
        if let Some(query) = query {
            for (key, path, values) in self.query_fields(query, unknown_query)? {
                let Some(leaf) = path.last() else {
                    return Err(Error::request(format!(
                        "query parameter {key}: empty field path"
                    )));
                };
                if !leaf.is_list() && values.len() > 1 {
                    return Err(Error::request(format!(
                        "query parameter {key} given {} times; field {} is not repeated",
                        values.len(),
                        leaf.name()
                    )));
                }
                mask_set |= self
                    .patch_mask
                    .as_ref()
                    .is_some_and(|m| path.len() == 1 && path[0].number() == m.number());
                let leaf_value = if leaf.is_list() {
                    values
                        .into_iter()
                        .map(|v| url_value(leaf, v))
                        .collect::<Result<Vec<_>, _>>()
                        .map(In::List)
                } else {
                    url_value(leaf, values.into_iter().next().unwrap_or_default())
                };
                let leaf_value = leaf_value
                    .map_err(|e| Error::request(format!("query parameter {key}: {e}")))?;
                encode_at(input, &path, leaf_value, opts, &mut findings, out)
                    .map_err(|e| Error::request(format!("query parameter {key}: {}", e.kind())))?;
            }
        }

        for ((var, path), raw) in self.template.variables().iter().zip(&self.vars).zip(values) {
            let name = &var.field_path;
            let value = var
                .decode(raw)
                .map_err(|e| Error::request(format!("path variable {name}: {e}")))?;
            let Some(leaf) = path.last() else {
                return Err(Error::request(format!(
                    "path variable {name}: empty field path"
                )));
            };
            let value = url_value(leaf, value)
                .map_err(|e| Error::request(format!("path variable {name}: {e}")))?;
            encode_at(input, path, value, opts, &mut findings, out)
                .map_err(|e| Error::request(format!("path variable {name}: {}", e.kind())))?;
        }

        if let (Some(mask), false) = (&self.patch_mask, mask_set) {
            self.fill_mask(mask, body, opts, out)?;
        }
        Ok(findings)
    }

    fn body(
        &self,
        schema: &Schema,
        body: RequestBody<'_>,
        opts: &Options,
        out: &mut Vec<u8>,
    ) -> Result<Findings, Error> {
        let input = &self.method.input;
        match (&self.body, body) {
            (_, RequestBody::Empty) => Ok(Findings::default()),
            (BodyTarget::None, _) => Err(Error::request(format!(
                "{} {} takes no request body",
                self.rule.method, self.rule.path
            ))),
            (BodyTarget::All, RequestBody::Raw { content_type, data }) => {
                put_http_body(out, content_type, data);
                Ok(Findings::default())
            }
            (BodyTarget::Field(f), RequestBody::Raw { content_type, data }) => {
                put_tag(out, f.number(), wire::LEN);
                put_varint(out, http_body_len(content_type, data) as u64);
                put_http_body(out, content_type, data);
                Ok(Findings::default())
            }
            (BodyTarget::All, RequestBody::Formatted(format, bytes)) => {
                schema.to_protobuf(input, format, bytes, out, opts)
            }
            (BodyTarget::Field(f), RequestBody::Formatted(format, bytes)) => {
                match singular_message(f) {
                    // Protobuf travels as it came; a converted body is written in place, its
                    // length patched in after (no second buffer).
                    Some(_) if format == Format::Protobuf => {
                        put_len_prefixed(out, f.number(), bytes);
                        Ok(Findings::default())
                    }
                    Some(m) => {
                        let start = out.len();
                        put_tag(out, f.number(), wire::LEN);
                        let len_at = out.len();
                        out.push(0);
                        match schema.to_protobuf(&m, format, bytes, out, opts) {
                            Ok(findings) => {
                                crate::wire::patch_len(out, len_at);
                                Ok(findings)
                            }
                            Err(e) => {
                                out.truncate(start);
                                Err(e)
                            }
                        }
                    }
                    _ => {
                        // A repeated, map or scalar field: the body is that field's value.
                        let value = match format {
                            Format::Json => crate::json::parse(bytes, crate::max_containers(opts))?,
                            Format::Msgpack => {
                                crate::msgpack::parse(bytes, crate::max_containers(opts))?
                            }
                            Format::Protobuf => {
                                return Err(Error::request(format!(
                                    "the body is field {} ({}), which is not a message: send it as JSON or MessagePack",
                                    f.name(),
                                    kind_name(f)
                                )));
                            }
                        };
                        let tree = In::Map(vec![(In::Str(f.json_name().to_owned()), value)]);
                        let mut findings = Findings::default();
                        Encoder::new(opts, &mut findings).message(input, &tree, out)?;
                        Ok(findings)
                    }
                }
            }
        }
    }

    /// The query's parameters grouped by field, in order of first appearance.
    #[allow(clippy::type_complexity)]
    fn query_fields(
        &self,
        query: &str,
        unknown: UnknownQuery,
    ) -> Result<Vec<(String, Vec<FieldDescriptor>, Vec<String>)>, Error> {
        let mut groups: Vec<(String, Vec<FieldDescriptor>, Vec<String>)> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode(k, false, true)
                .map_err(|e| Error::request(format!("query parameter {k:?}: {e}")))?;
            let value = percent_decode(v, false, true)
                .map_err(|e| Error::request(format!("query parameter {key}: {e}")))?;
            if let Some(g) = groups.iter_mut().find(|g| g.0 == key) {
                g.2.push(value);
                continue;
            }
            match self.query_field(&key) {
                Ok(path) => groups.push((key, path, vec![value])),
                Err(_) if unknown == UnknownQuery::Ignore => {}
                Err(e) => return Err(Error::request(format!("query parameter {key}: {e}"))),
            }
        }
        Ok(groups)
    }

    /// The field a query parameter sets: one not bound by the path or the body.
    fn query_field(&self, key: &str) -> Result<Vec<FieldDescriptor>, String> {
        let input = &self.method.input;
        match &self.body {
            BodyTarget::All => {
                return Err(format!(
                    "unknown parameter: the body carries the whole request ({} {} has body \"*\")",
                    self.rule.method, self.rule.path
                ));
            }
            BodyTarget::Field(b)
                if key
                    .split('.')
                    .next()
                    .is_some_and(|k| k == b.name() || k == b.json_name()) =>
            {
                return Err(format!("field {} is bound by the request body", b.name()));
            }
            _ => {}
        }
        let path = resolve_path(input, key.split('.'), true)
            .map_err(|e| format!("unknown parameter ({e})"))?;
        if self.vars.iter().any(|v| {
            v.iter()
                .map(FieldDescriptor::number)
                .eq(path.iter().map(FieldDescriptor::number))
        }) {
            return Err("the field is bound by the path".into());
        }
        let Some(leaf) = path.last() else {
            return Err("empty field path".into());
        };
        if leaf.is_map() {
            return Err(format!(
                "{} is a map field; a URL cannot set it",
                leaf.name()
            ));
        }
        leaf_kind(leaf)?;
        Ok(path)
    }

    /// Appends the FieldMask of the fields the body sets (proto names, nested messages
    /// descended into, as grpc-gateway computes it) unless the body sets the mask itself.
    fn fill_mask(
        &self,
        mask: &FieldDescriptor,
        body: RequestBody<'_>,
        opts: &Options,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let RequestBody::Formatted(format, bytes) = body else {
            return Ok(());
        };
        let desc = match &self.body {
            BodyTarget::All => self.method.input.clone(),
            BodyTarget::Field(f) => match singular_message(f) {
                Some(m) => m,
                None => return Ok(()),
            },
            BodyTarget::None => return Ok(()),
        };
        let exclude = matches!(self.body, BodyTarget::All).then(|| mask.number());
        let mut paths = Vec::new();
        match format {
            Format::Json | Format::Msgpack => {
                let tree = if format == Format::Json {
                    crate::json::parse(bytes, crate::max_containers(opts))?
                } else {
                    crate::msgpack::parse(bytes, crate::max_containers(opts))?
                };
                if mask_paths(&desc, &tree, "", exclude, &mut paths) {
                    return Ok(());
                }
            }
            Format::Protobuf => {
                // Top-level fields only: nested bytes are not decoded for a mask.
                let mut r = Reader::new(bytes, 0);
                while !r.is_empty() {
                    let (number, wire_type) = r.tag()?;
                    r.skip(number, wire_type, opts.max_depth)?;
                    if Some(number) == exclude {
                        return Ok(());
                    }
                    if let Some(f) = desc.get_field(number)
                        && !paths.iter().any(|p| p == f.name())
                    {
                        paths.push(f.name().to_owned());
                    }
                }
            }
        }
        let mut inner = Vec::new();
        for p in &paths {
            put_len_prefixed(&mut inner, 1, p.as_bytes());
        }
        put_len_prefixed(out, mask.number(), &inner);
        Ok(())
    }

    /// Renders the method's response as the HTTP response: the whole message, or the
    /// `response_body` field. A message field in protobuf is its bytes as they came.
    pub fn response(
        &self,
        schema: &Schema,
        to: Format,
        input: &[u8],
        out: &mut Vec<u8>,
        opts: &Options,
    ) -> Result<Findings, Error> {
        let Some(f) = &self.response_body else {
            return schema.from_protobuf(&self.method.output, to, input, out, opts);
        };
        if let Some(m) = singular_message(f) {
            let payload = field_payload(input, f.number())?;
            return schema.from_protobuf(&m, to, &payload, out, opts);
        }
        if to == Format::Protobuf {
            return Err(Error::unrenderable(format!(
                "response_body {} is not a message and has no protobuf form",
                f.name()
            )));
        }
        // A repeated, map or scalar field: the rendering of that field alone.
        let only = field_occurrences(input, f.number())?;
        let mut findings = Findings::default();
        let mut renderer = crate::decode::Renderer::new(opts, &mut findings);
        let rendered = renderer.message(&self.method.output, &only, 0)?;
        let name = renderer.output_name(f);
        let value = match rendered {
            Out::Map(entries) => entries
                .into_iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v),
            _ => None,
        };
        let value = value.unwrap_or_else(|| {
            if f.is_map() {
                Out::Map(Vec::new())
            } else if f.is_list() {
                Out::List(Vec::new())
            } else if f.supports_presence() {
                Out::Null
            } else {
                renderer.default_scalar(f)
            }
        });
        match to {
            Format::Json => crate::json::write(&value, out),
            _ => crate::msgpack::write(&value, out),
        }
        Ok(findings)
    }

    /// The content type and bytes of a `google.api.HttpBody` response
    /// ([`Self::raw_response`]).
    pub fn raw_response_parts(&self, input: &[u8]) -> Result<(String, Vec<u8>), Error> {
        let message = match &self.response_body {
            None => input.to_vec(),
            Some(f) => field_payload(input, f.number())?,
        };
        let mut content_type = String::new();
        let mut data: &[u8] = &[];
        let mut r = Reader::new(&message, 0);
        while !r.is_empty() {
            let (number, wire_type) = r.tag()?;
            match (number, wire_type) {
                (1, wire::LEN) => {
                    let (b, _) = r.len_delimited()?;
                    content_type = std::str::from_utf8(b)
                        .map_err(|_| Error::new(crate::ErrorKind::InvalidUtf8))?
                        .to_owned();
                }
                (2, wire::LEN) => data = r.len_delimited()?.0,
                _ => r.skip(number, wire_type, 100)?,
            }
        }
        Ok((content_type, data.to_vec()))
    }
}

/// The encoded length of [`put_http_body`]'s output.
fn http_body_len(content_type: &str, data: &[u8]) -> usize {
    let field = |len: usize| {
        if len == 0 {
            0
        } else {
            1 + wire::varint_len(len as u64) + len
        }
    };
    field(content_type.len()) + field(data.len())
}

/// google.api.HttpBody { content_type = 1; data = 2 }.
fn put_http_body(out: &mut Vec<u8>, content_type: &str, data: &[u8]) {
    if !content_type.is_empty() {
        put_len_prefixed(out, 1, content_type.as_bytes());
    }
    if !data.is_empty() {
        put_len_prefixed(out, 2, data);
    }
}

/// Encodes `value` at field path `path` of `root` (nested messages around it) and appends it.
fn encode_at(
    root: &MessageDescriptor,
    path: &[FieldDescriptor],
    value: In,
    opts: &Options,
    findings: &mut Findings,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let tree = path.iter().rev().fold(value, |inner, f| {
        In::Map(vec![(In::Str(f.json_name().to_owned()), inner)])
    });
    Encoder::new(opts, findings).message(root, &tree, out)
}

/// A string from a URL as the JSON value its field's mapping reads: `true`/`false` for bools
/// (and the other spellings grpc-gateway's ParseBool takes), numbers for enum numbers, and
/// strings otherwise (the JSON mapping reads every number kind from a string).
fn url_value(field: &FieldDescriptor, s: String) -> Result<In, String> {
    let kind = leaf_kind(field)?;
    Ok(match kind {
        Kind::Bool => match s.as_str() {
            "true" | "True" | "TRUE" | "t" | "T" | "1" => In::Bool(true),
            "false" | "False" | "FALSE" | "f" | "F" | "0" => In::Bool(false),
            _ => return Err(format!("expected a boolean (true or false), got {s:?}")),
        },
        Kind::Enum(_) => match s.parse::<i64>() {
            Ok(n) => In::I64(n),
            Err(_) => In::Str(s),
        },
        _ if matches!(field.kind(), Kind::Message(m) if m.full_name() == super::FIELD_MASK) => {
            // Proto names (`display_name`) or json names (`displayName`), comma-separated.
            let mut paths = Vec::new();
            for p in s.split(',').filter(|p| !p.is_empty()) {
                paths.push(if p.contains('_') {
                    crate::wkt::field_mask_path_to_json(p)?
                } else {
                    p.to_owned()
                });
            }
            In::Str(paths.join(","))
        }
        _ => In::Str(s),
    })
}

fn kind_name(f: &FieldDescriptor) -> &'static str {
    if f.is_map() {
        "a map"
    } else if f.is_list() {
        "repeated"
    } else {
        "a scalar"
    }
}

/// The merged payload of a singular message field: every occurrence's bytes, concatenated.
fn field_payload(input: &[u8], number: u32) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut r = Reader::new(input, 0);
    while !r.is_empty() {
        let (n, wire_type) = r.tag()?;
        if n == number && wire_type == wire::LEN {
            out.extend_from_slice(r.len_delimited()?.0);
        } else {
            r.skip(n, wire_type, 100)?;
        }
    }
    Ok(out)
}

/// The occurrences of one field (tags included), as a message holding that field alone.
fn field_occurrences(input: &[u8], number: u32) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut r = Reader::new(input, 0);
    while !r.is_empty() {
        let start = r.offset();
        let (n, wire_type) = r.tag()?;
        r.skip(n, wire_type, 100)?;
        if n == number {
            out.extend_from_slice(&input[start..r.offset()]);
        }
    }
    Ok(out)
}

/// Collects FieldMask paths for the keys of a body object. Returns true when the object sets
/// the mask field itself (`exclude`), in which case nothing is to be filled.
fn mask_paths(
    desc: &MessageDescriptor,
    tree: &In,
    prefix: &str,
    exclude: Option<u32>,
    paths: &mut Vec<String>,
) -> bool {
    let In::Map(entries) = tree else {
        return false;
    };
    for (k, v) in entries {
        let In::Str(k) = k else { continue };
        let Some(f) = field_by_key(desc, k) else {
            continue;
        };
        if prefix.is_empty() && Some(f.number()) == exclude {
            return true;
        }
        let name = format!("{prefix}{}", f.name());
        match (f.kind(), v) {
            (Kind::Message(m), In::Map(inner))
                if !f.is_list()
                    && !f.is_map()
                    && !crate::encode::has_special_json(m.full_name())
                    && !inner.is_empty() =>
            {
                mask_paths(&m, v, &format!("{name}."), None, paths);
            }
            _ => paths.push(name),
        }
    }
    false
}
