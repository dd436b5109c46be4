//! [`Format`]: the wire formats protogate speaks.

/// A wire format protogate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Json,
    Msgpack,
    Protobuf,
}

impl Format {
    /// The name used in logs, metrics and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Msgpack => "msgpack",
            Format::Protobuf => "protobuf",
        }
    }
}
