//! HTTP rules: `google.api.http` method options read from the schema, or the same rules given
//! by the caller (the gateway's config file).

use prost::Message as _;

use crate::Schema;

/// One `google.api.HttpRule`: an HTTP method and path template bound to an RPC method.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpRule {
    /// The method's full name, `pkg.Service.Method`.
    pub selector: String,
    /// `GET`, `PUT`, `POST`, `DELETE`, `PATCH`, or a custom method's name as written.
    pub method: String,
    /// The path template.
    pub path: String,
    /// `""` (no body), `"*"` (every field not bound by the path) or a top-level field name.
    pub body: String,
    /// `""` (the whole response) or a top-level field of the response.
    pub response_body: String,
    /// More bindings of the same method (they carry no bindings of their own).
    pub additional_bindings: Vec<HttpRule>,
}

impl HttpRule {
    /// `GET /v1/books/{id}` — how rules are named in messages.
    pub fn describe(&self) -> String {
        format!("{} {} ({})", self.method, self.path, self.selector)
    }
}

/// The `google.api.http` extension's field number in `MethodOptions`.
const HTTP_EXTENSION: u32 = 72295728;

#[derive(Clone, PartialEq, prost::Message)]
struct HttpRulePb {
    #[prost(string, tag = "1")]
    selector: String,
    #[prost(oneof = "PatternPb", tags = "2, 3, 4, 5, 6, 8")]
    pattern: Option<PatternPb>,
    #[prost(string, tag = "7")]
    body: String,
    #[prost(string, tag = "12")]
    response_body: String,
    #[prost(message, repeated, tag = "11")]
    additional_bindings: Vec<HttpRulePb>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum PatternPb {
    #[prost(string, tag = "2")]
    Get(String),
    #[prost(string, tag = "3")]
    Put(String),
    #[prost(string, tag = "4")]
    Post(String),
    #[prost(string, tag = "5")]
    Delete(String),
    #[prost(string, tag = "6")]
    Patch(String),
    #[prost(message, tag = "8")]
    Custom(CustomPb),
}

#[derive(Clone, PartialEq, prost::Message)]
struct CustomPb {
    #[prost(string, tag = "1")]
    kind: String,
    #[prost(string, tag = "2")]
    path: String,
}

impl HttpRulePb {
    fn into_rule(self, selector: &str) -> HttpRule {
        let (method, path) = match self.pattern {
            Some(PatternPb::Get(p)) => ("GET".to_owned(), p),
            Some(PatternPb::Put(p)) => ("PUT".to_owned(), p),
            Some(PatternPb::Post(p)) => ("POST".to_owned(), p),
            Some(PatternPb::Delete(p)) => ("DELETE".to_owned(), p),
            Some(PatternPb::Patch(p)) => ("PATCH".to_owned(), p),
            Some(PatternPb::Custom(c)) => (c.kind, c.path),
            None => (String::new(), String::new()),
        };
        HttpRule {
            selector: selector.to_owned(),
            method,
            path,
            body: self.body,
            response_body: self.response_body,
            additional_bindings: self
                .additional_bindings
                .into_iter()
                .map(|b| b.into_rule(selector))
                .collect(),
        }
    }
}

impl Schema {
    /// The `google.api.http` rules annotated on the schema's methods, in schema order.
    /// Works whether or not the schema includes `google/api/annotations.proto`: the option is
    /// read from the method options' bytes.
    pub fn http_rules(&self) -> Result<Vec<HttpRule>, crate::SchemaError> {
        let mut rules = Vec::new();
        for service in self.pool().services() {
            for method in service.methods() {
                let options = method.method_descriptor_proto().options.is_some();
                if !options {
                    continue;
                }
                // prost-reflect decodes options it has already validated; guard anyway, a
                // descriptor set is input.
                let bytes = std::panic::catch_unwind(|| method.options().encode_to_vec()).map_err(
                    |_| {
                        crate::SchemaError::new(format!(
                            "{}: the options of {} do not decode",
                            method.parent_file().name(),
                            method.full_name()
                        ))
                    },
                )?;
                if let Some(rule) = http_option(&bytes).map_err(|e| {
                    crate::SchemaError::new(format!(
                        "{}: google.api.http option of {}: {e}",
                        method.parent_file().name(),
                        method.full_name()
                    ))
                })? {
                    rules.push(rule.into_rule(method.full_name()));
                }
            }
        }
        Ok(rules)
    }
}

/// The last `google.api.http` option in encoded `MethodOptions`.
fn http_option(options: &[u8]) -> Result<Option<HttpRulePb>, String> {
    let mut r = crate::wire::Reader::new(options, 0);
    let mut found = None;
    while !r.is_empty() {
        let (number, wire_type) = r.tag().map_err(|e| e.to_string())?;
        if number == HTTP_EXTENSION && wire_type == crate::wire::LEN {
            let (bytes, _) = r.len_delimited().map_err(|e| e.to_string())?;
            found = Some(HttpRulePb::decode(bytes).map_err(|e| e.to_string())?);
        } else {
            r.skip(number, wire_type, 100).map_err(|e| e.to_string())?;
        }
    }
    Ok(found)
}
