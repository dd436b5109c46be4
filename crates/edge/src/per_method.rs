//! Settings that `[services."pkg.Service"]` and `[services."pkg.Service.Method"]` tables
//! override for their methods (`[json]`, `timeout`): [`PerMethod`], one value for every
//! method but those an override reaches, which a map by gRPC path holds. Without overrides a
//! request makes no lookup.

use std::collections::HashMap;
use std::sync::Arc;

use transcode::{Method, Schema};

/// A value per method: `default`, or the one resolved for the methods an override names.
pub(crate) struct PerMethod<T> {
    default: T,
    /// By method path (`/pkg.Service/Method`); empty without overrides. A fast hasher: the
    /// keys are the schema's, and SipHash cost a request ≈ 150 instructions per lookup
    /// (`make bench-ir`, `IR_RETRY=1`).
    by_path: HashMap<Arc<str>, T, foldhash::fast::RandomState>,
}

impl<T> PerMethod<T> {
    /// The table of `overrides` (by service or method full name, `pkg.Service.Method`) over
    /// `schema`: each method an override reaches gets `resolve(its method's override, its
    /// service's)`, every other `default`. An override naming neither a service nor a method
    /// of the schema is an error naming it and `key` (the setting), unless `lenient` (the
    /// schema is not loaded yet).
    pub(crate) fn new<S: Copy>(
        default: T,
        overrides: &[(String, S)],
        schema: &Schema,
        lenient: bool,
        key: &str,
        resolve: impl Fn(Option<S>, Option<S>) -> T,
    ) -> Result<PerMethod<T>, String> {
        if !lenient
            && let Some((name, _)) = overrides
                .iter()
                .find(|(name, _)| !schema.methods().any(|m| names(name, m)))
        {
            return Err(format!(
                "services.\"{name}\"{key}: the schema has no service or method {name} (a method is named pkg.Service.Method)"
            ));
        }
        let mut by_path = HashMap::default();
        if !overrides.is_empty() {
            for m in schema.methods() {
                let of = |service: bool| {
                    overrides
                        .iter()
                        .find(|(n, _)| (**n == *m.service) == service && names(n, m))
                        .map(|(_, s)| *s)
                };
                let (method, service) = (of(false), of(true));
                if method.is_some() || service.is_some() {
                    by_path.insert(m.path.clone(), resolve(method, service));
                }
            }
        }
        Ok(PerMethod { default, by_path })
    }

    /// `method`'s value.
    #[inline]
    pub(crate) fn of(&self, method: &Method) -> &T {
        if self.by_path.is_empty() {
            return &self.default;
        }
        self.by_path.get(&method.path).unwrap_or(&self.default)
    }
}

/// Whether `name` is `m`'s service (`pkg.Service`) or `m` itself (`pkg.Service.Method`).
fn names(name: &str, m: &Method) -> bool {
    let service = &*m.service;
    name == service
        || name
            .strip_prefix(service)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|method| m.full_name.get(service.len() + 1..) == Some(method))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_service_or_one_of_its_methods() {
        let schema = Schema::compile(&["s.proto".to_owned()], |_| {
            Some(
                "syntax = \"proto3\"; package p; message M {} \
                 service S { rpc A(M) returns (M); } service SA { rpc B(M) returns (M); }"
                    .to_owned(),
            )
        })
        .unwrap();
        let a = schema.method("/p.S/A").unwrap();
        for (name, want) in [
            ("p.S", true),
            ("p.S.A", true),
            ("p.S/A", false),
            ("p.SA", false),
            ("p.S.B", false),
            ("p", false),
            ("p.S.", false),
        ] {
            assert_eq!(names(name, a), want, "{name}");
        }
        let t = PerMethod::new(
            0,
            &[("p.S".to_owned(), 1), ("p.SA.B".to_owned(), 2)],
            &schema,
            false,
            ".x",
            |m: Option<i32>, s: Option<i32>| m.or(s).unwrap_or(0) * 10,
        )
        .unwrap();
        assert_eq!(*t.of(a), 10);
        assert_eq!(*t.of(schema.method("/p.SA/B").unwrap()), 20);
        let e = PerMethod::new(0, &[("p.T".to_owned(), 1)], &schema, false, ".x", |_, _| 0)
            .err()
            .unwrap();
        assert!(e.contains("services.\"p.T\".x"), "{e}");
    }
}
