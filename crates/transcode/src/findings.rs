//! [`Findings`]: what a successful conversion noticed without failing (returned, never
//! logged: the caller decides what to count and log).

/// A field the schema does not know, dropped by a JSON or MessagePack rendering.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnknownField {
    /// Path of the message that held it (`items[0]`; empty for the root).
    pub path: String,
    pub number: u32,
}

/// An `Any` whose type the schema lacks, rendered with its payload as base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedAny {
    pub path: String,
    pub type_url: String,
}

/// What a successful conversion noticed without failing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Unknown fields dropped while rendering protobuf as JSON or MessagePack.
    pub unknown_fields: Vec<UnknownField>,
    /// `Any` payloads of types the schema lacks.
    pub unresolved_any: Vec<UnresolvedAny>,
    /// Input keys skipped under [`Options::ignore_unknown_fields`](crate::Options::ignore_unknown_fields), by path.
    pub ignored_keys: Vec<String>,
}

impl Findings {
    /// True when the rendering lost information: unknown fields or unresolved `Any` payloads.
    pub fn dropped_data(&self) -> bool {
        !self.unknown_fields.is_empty() || !self.unresolved_any.is_empty()
    }

    /// How many of each finding there are, to [`truncate`](Findings::truncate) back to.
    pub(crate) fn lens(&self) -> [usize; 3] {
        [
            self.unknown_fields.len(),
            self.unresolved_any.len(),
            self.ignored_keys.len(),
        ]
    }

    /// Drops the findings made since [`lens`](Findings::lens) gave `lens`.
    pub(crate) fn truncate(&mut self, [unknown, any, ignored]: [usize; 3]) {
        self.unknown_fields.truncate(unknown);
        self.unresolved_any.truncate(any);
        self.ignored_keys.truncate(ignored);
    }
}
