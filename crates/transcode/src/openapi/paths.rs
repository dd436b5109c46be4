//! Rule path templates in OpenAPI's terms (`/v1/{name=shelves/*}` → `/v1/{name}`, the
//! variable's segments as a pattern) and the `paths` object, where paths of one shape share
//! their parameters' names.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

/// A rule's path template in OpenAPI's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConvertedPath {
    /// `/v1/{name}:archive`.
    pub(super) path: String,
    /// The path with every parameter as `{}`: OpenAPI takes paths of the same shape for the
    /// same path.
    pub(super) shape: String,
    /// The path parameters in order.
    pub(super) vars: Vec<PathVar>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathVar {
    /// The parameter's name: the variable's field path, or `_1`, `_2`… for a `*` or `**`
    /// outside any variable.
    pub(super) name: String,
    /// Index into the route's variables (None: a wildcard outside any variable).
    pub(super) variable: Option<usize>,
    /// The segments the variable covers (`*` when the template gives none).
    pub(super) pattern: String,
}

/// Converts a (valid) path template: `/v1/{name=shelves/*/books/*}:archive` →
/// `/v1/{name}:archive`.
pub(super) fn convert_path(template: &str) -> ConvertedPath {
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
pub(super) fn pattern_regex(pattern: &str) -> String {
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
pub(super) struct Paths {
    items: BTreeMap<String, BTreeMap<String, Value>>,
    /// Shape → (path, parameter names).
    shapes: HashMap<String, (String, Vec<String>)>,
}

impl Paths {
    pub(super) fn key_for(&self, converted: &ConvertedPath) -> (String, Vec<String>) {
        match self.shapes.get(&converted.shape) {
            Some(known) => known.clone(),
            None => (
                converted.path.clone(),
                converted.vars.iter().map(|v| v.name.clone()).collect(),
            ),
        }
    }

    pub(super) fn taken(&self, path: &str, method: &str) -> bool {
        self.items
            .get(path)
            .is_some_and(|ops| ops.contains_key(method))
    }

    pub(super) fn insert(
        &mut self,
        path: &str,
        shape: &str,
        names: Vec<String>,
        method: &str,
        op: Value,
    ) {
        self.shapes
            .entry(shape.to_owned())
            .or_insert_with(|| (path.to_owned(), names));
        self.items
            .entry(path.to_owned())
            .or_default()
            .insert(method.to_owned(), op);
    }

    pub(super) fn into_value(self) -> Value {
        json!(self.items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
