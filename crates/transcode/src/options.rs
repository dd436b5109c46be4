//! [`Options`]: how a conversion reads and writes; the defaults are the canonical mapping.

/// Conversion options. The defaults are the canonical mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Output proto field names (`user_id`) instead of json_name (`userId`).
    pub proto_field_names: bool,
    /// Print implicit-presence fields at their default value (0, "", [], {}).
    pub emit_defaults: bool,
    /// Print enum values as numbers instead of names.
    pub enum_numbers: bool,
    /// On input, skip keys that name no field (and enum names the schema lacks) instead of
    /// failing; they are reported in [`Findings::ignored_keys`](crate::Findings::ignored_keys).
    pub ignore_unknown_fields: bool,
    /// JSON output indented by this many spaces per level, laid out as Python's
    /// `json.dumps(indent=…)` lays it out (what `json_format.MessageToJson` prints); 0
    /// (default): compact. MessagePack ignores it.
    pub indent: u8,
    /// Maximum message nesting, counted as json_format counts it (default 100).
    pub max_depth: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            proto_field_names: false,
            emit_defaults: false,
            enum_numbers: false,
            ignore_unknown_fields: false,
            indent: 0,
            max_depth: 100,
        }
    }
}

/// Containers (arrays and objects) allowed in a parsed input: every message level is at most
/// two (an object inside an array), so this never rejects what the message limit accepts.
pub(crate) fn max_containers(opts: &Options) -> usize {
    opts.max_depth.saturating_mul(2).saturating_add(2)
}
