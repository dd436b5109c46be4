//! Query parameters: the fields of a request message a URL can set, found by a walk over the
//! message that stops at bound fields, the body, recursion and a limit.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::{Value, json};

use super::schemas::{Generator, is_deprecated_field};
use crate::rest::{BodyTarget, Route};

/// At most this many query parameters are listed for one operation: wide, deeply nested
/// request messages could otherwise describe millions.
const MAX_QUERY_PARAMETERS: usize = 1000;

impl Generator {
    /// The query parameters of a route: every field of the request not bound by the path or
    /// the body that a URL can set (scalars, enums, the well-known types with a string form;
    /// nested messages' fields dotted), by json name.
    pub(super) fn query_parameters(
        &mut self,
        route: &Route,
        out: &mut Vec<Value>,
        truncated: &mut bool,
    ) {
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
