//! `[json]`: how JSON answers are rendered — printing fields at their defaults, proto field
//! names, enum numbers, indentation, and the framing of a JSON answer stream — for the whole
//! gateway, with overrides per service and per method (`[services."pkg.Svc".json]`,
//! `[services."pkg.Svc.Method".json]`). Resolved once per snapshot into a table by method
//! (`Renderings`); a request takes its method's entry. Input never depends on these: both
//! field names, enum names and numbers are always accepted.

use transcode::stream::Framing;
use transcode::{Options, Schema};

use crate::per_method::PerMethod;

/// The framing of a JSON answer stream when Accept does not name one (`stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStream {
    /// One JSON array whose elements arrive as the messages do (the default).
    Array,
    /// One message per line (`application/x-ndjson`).
    Ndjson,
    /// Server-sent events (`text/event-stream`).
    Sse,
}

/// One `[json]` table as written: what it leaves unset comes from the table it overrides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonSettings {
    /// Print fields without presence at their defaults (`0`, `""`, `[]`, `{}`): grpc-gateway's
    /// `EmitUnpopulated`, Envoy's `always_print_primitive_fields`.
    pub emit_unpopulated: Option<bool>,
    /// Proto field names (`user_id`) instead of json names (`userId`).
    pub use_proto_names: Option<bool>,
    /// Enum values as numbers instead of names.
    pub enums_as_ints: Option<bool>,
    /// Spaces per level; 0 is compact. Applies to whole answers and JSON array streams;
    /// NDJSON lines and SSE events stay one line each.
    pub indent: Option<u8>,
    pub stream: Option<JsonStream>,
}

impl JsonSettings {
    /// `self` with what it leaves unset taken from `under`.
    fn over(self, under: JsonSettings) -> JsonSettings {
        JsonSettings {
            emit_unpopulated: self.emit_unpopulated.or(under.emit_unpopulated),
            use_proto_names: self.use_proto_names.or(under.use_proto_names),
            enums_as_ints: self.enums_as_ints.or(under.enums_as_ints),
            indent: self.indent.or(under.indent),
            stream: self.stream.or(under.stream),
        }
    }
}

/// `[json]` and its overrides.
#[derive(Debug, Clone, Default)]
pub struct JsonConfig {
    pub global: JsonSettings,
    /// By service (`pkg.Service`) or method (`pkg.Service.Method`) full name; a method's
    /// wins over its service's, which wins over the global table.
    pub overrides: Vec<(String, JsonSettings)>,
}

/// How one method's JSON answers are rendered.
#[derive(Debug, Clone)]
pub(crate) struct Rendering {
    /// Whole answers, JSON array streams and Connect stream messages.
    pub(crate) whole: Options,
    /// NDJSON lines and SSE events: `whole` without indentation.
    pub(crate) line: Options,
    /// The framing `JsonStream` picks.
    pub(crate) stream: Framing,
}

impl Rendering {
    fn new(s: JsonSettings) -> Rendering {
        let whole = Options {
            emit_defaults: s.emit_unpopulated.unwrap_or(false),
            proto_field_names: s.use_proto_names.unwrap_or(false),
            enum_numbers: s.enums_as_ints.unwrap_or(false),
            indent: s.indent.unwrap_or(0),
            ..Options::default()
        };
        let line = Options {
            indent: 0,
            ..whole.clone()
        };
        let stream = match s.stream.unwrap_or(JsonStream::Array) {
            JsonStream::Array => Framing::JsonArray,
            JsonStream::Ndjson => Framing::Ndjson,
            JsonStream::Sse => Framing::Sse,
        };
        Rendering {
            whole,
            line,
            stream,
        }
    }

    /// The options a message in `framing` (or a whole answer, `None`) is rendered with.
    pub(crate) fn options(&self, framing: Option<Framing>) -> &Options {
        match framing {
            Some(Framing::Ndjson | Framing::Sse) => &self.line,
            _ => &self.whole,
        }
    }
}

/// Every method's [`Rendering`].
pub(crate) type Renderings = PerMethod<Rendering>;

/// The table of `config` over `schema` (`lenient`: the schema is not loaded yet, names are
/// not checked).
pub(crate) fn renderings(
    config: &JsonConfig,
    schema: &Schema,
    lenient: bool,
) -> Result<Renderings, String> {
    PerMethod::new(
        Rendering::new(config.global),
        &config.overrides,
        schema,
        lenient,
        ".json",
        |method, service| {
            Rendering::new(
                method
                    .unwrap_or_default()
                    .over(service.unwrap_or_default())
                    .over(config.global),
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::compile(&["s.proto".to_owned()], |_| {
            Some(
                "syntax = \"proto3\"; package p; message M {} \
                 service S { rpc A(M) returns (M); rpc B(M) returns (M); } \
                 service T { rpc A(M) returns (M); }"
                    .to_owned(),
            )
        })
        .unwrap()
    }

    #[test]
    fn a_method_wins_over_its_service_which_wins_over_the_global_table() {
        let schema = schema();
        let config = JsonConfig {
            global: JsonSettings {
                indent: Some(2),
                emit_unpopulated: Some(true),
                ..JsonSettings::default()
            },
            overrides: vec![
                (
                    "p.S".to_owned(),
                    JsonSettings {
                        use_proto_names: Some(true),
                        emit_unpopulated: Some(false),
                        stream: Some(JsonStream::Ndjson),
                        ..JsonSettings::default()
                    },
                ),
                (
                    "p.S.B".to_owned(),
                    JsonSettings {
                        enums_as_ints: Some(true),
                        use_proto_names: Some(false),
                        ..JsonSettings::default()
                    },
                ),
            ],
        };
        let r = renderings(&config, &schema, false).unwrap();
        let of = |path: &str| r.of(schema.method(path).unwrap());
        let a = of("/p.S/A");
        assert!(a.whole.proto_field_names && !a.whole.emit_defaults && !a.whole.enum_numbers);
        assert_eq!((a.whole.indent, a.line.indent), (2, 0));
        assert_eq!(a.stream, Framing::Ndjson);
        let b = of("/p.S/B");
        assert!(!b.whole.proto_field_names && !b.whole.emit_defaults && b.whole.enum_numbers);
        assert_eq!(b.stream, Framing::Ndjson);
        let t = of("/p.T/A");
        assert!(t.whole.emit_defaults && !t.whole.proto_field_names);
        assert_eq!(t.stream, Framing::JsonArray);
        assert_eq!(t.options(Some(Framing::Sse)).indent, 0);
        assert_eq!(t.options(Some(Framing::JsonArray)).indent, 2);
    }

    #[test]
    fn an_override_must_name_a_service_or_method() {
        let schema = schema();
        for bad in ["p.U", "p.S.C", "p.S/A", "p", "p.SA"] {
            let config = JsonConfig {
                overrides: vec![(bad.to_owned(), JsonSettings::default())],
                ..JsonConfig::default()
            };
            let e = renderings(&config, &schema, false).err().unwrap();
            assert!(e.contains(bad), "{e}");
            assert!(renderings(&config, &schema, true).is_ok());
        }
    }
}
