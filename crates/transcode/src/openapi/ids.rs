//! Operation ids: unique, stable names for every route and every `POST /pkg.Service/Method`.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::rest::Routes;
use crate::{Method, Schema};

/// `pkg.Service.Method` for a method's first binding, `pkg.Service.Method.1`, `.2`… for the
/// others, `pkg.Service.Method.rpc` for `POST /pkg.Service/Method`. Bindings are numbered in
/// the order their annotation lists them; the bindings of configured rules (which replace
/// the annotations and are not known here) in the routes' order, most specific first.
pub(super) struct OperationIds {
    /// By route index.
    pub(super) routes: Vec<String>,
    /// By method full name (`pkg.Service/Method`).
    pub(super) rpc: HashMap<String, String>,
}

impl OperationIds {
    pub(super) fn new(schema: &Schema, routes: &Routes, methods: &[&Method]) -> OperationIds {
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
