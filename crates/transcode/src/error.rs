//! Conversion errors: what went wrong and where (`items[2].price`).

use std::fmt;

/// One step of the path from the root message to the value that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    /// A field, by the name the input used (or the json_name on output).
    Field(String),
    /// An element of a repeated field.
    Index(usize),
    /// An entry of a map field, by its JSON key.
    Key(String),
}

/// Formats a path the way error messages and downgrade findings spell it:
/// `items[2].price`, `labels[env]`; the root message is the empty string.
pub fn format_path(segs: &[PathSeg]) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            PathSeg::Field(name) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(name);
            }
            PathSeg::Index(i) => {
                s.push('[');
                s.push_str(itoa::Buffer::new().format(*i));
                s.push(']');
            }
            PathSeg::Key(k) => {
                s.push('[');
                s.push_str(k);
                s.push(']');
            }
        }
    }
    s
}

/// A conversion error: the kind of failure plus the path of the value that caused it.
/// Boxed, so that results on the hot path stay two words wide.
#[derive(Debug, Clone, PartialEq)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone, PartialEq)]
struct Inner {
    /// Path segments, innermost first (they are pushed while the error unwinds).
    rev_path: Vec<PathSeg>,
    kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    /// The input is not well-formed JSON.
    MalformedJson {
        offset: usize,
        line: usize,
        column: usize,
        message: String,
    },
    /// The input is not well-formed MessagePack.
    MalformedMsgpack { offset: usize, message: String },
    /// The input is not well-formed protobuf wire data.
    MalformedProtobuf { offset: usize, message: String },
    /// A value of the wrong JSON/msgpack type.
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
    /// A value of the right type that is not acceptable (range, syntax of a string form).
    InvalidValue {
        expected: &'static str,
        found: String,
    },
    /// A key that names no field of the message.
    UnknownField { message: String },
    /// The same field twice in one object.
    DuplicateField,
    /// Two members of one oneof in one object.
    DuplicateOneof { oneof: String, first: String },
    /// A string that is not valid UTF-8.
    InvalidUtf8,
    /// Nesting deeper than the configured limit.
    TooDeep { limit: usize },
    /// A message that cannot be rendered in the JSON mapping (e.g. a Timestamp out of range).
    Unrenderable { message: String },
    /// An HTTP request that does not map onto the method's request message under its HTTP
    /// rule: a bad path variable or query parameter, a body where the rule takes none.
    Request { message: String },
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Error(Box::new(Inner {
            rev_path: Vec::new(),
            kind,
        }))
    }

    pub(crate) fn wrong_type(expected: &'static str, found: &'static str) -> Self {
        Error::new(ErrorKind::WrongType { expected, found })
    }

    pub(crate) fn invalid(expected: &'static str, found: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidValue {
            expected,
            found: found.into(),
        })
    }

    pub(crate) fn malformed_protobuf(offset: usize, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::MalformedProtobuf {
            offset,
            message: message.into(),
        })
    }

    pub(crate) fn request(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Request {
            message: message.into(),
        })
    }

    pub(crate) fn unrenderable(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Unrenderable {
            message: message.into(),
        })
    }

    /// Adds the enclosing path step while the error unwinds.
    pub(crate) fn at(mut self, seg: PathSeg) -> Self {
        self.0.rev_path.push(seg);
        self
    }

    pub(crate) fn at_field(self, name: &str) -> Self {
        self.at(PathSeg::Field(name.to_owned()))
    }

    pub(crate) fn at_index(self, i: usize) -> Self {
        self.at(PathSeg::Index(i))
    }

    /// The kind of failure.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The path of the failing value, e.g. `items[2].price`; empty for the root.
    pub fn path(&self) -> String {
        let segs: Vec<PathSeg> = self.0.rev_path.iter().rev().cloned().collect();
        format_path(&segs)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        if !path.is_empty() {
            write!(f, "{path}: ")?;
        }
        self.0.kind.fmt(f)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::MalformedJson {
                offset,
                line,
                column,
                message,
            } => {
                write!(
                    f,
                    "malformed JSON at byte {offset} (line {line}, column {column}): {message}"
                )
            }
            ErrorKind::MalformedMsgpack { offset, message } => {
                write!(f, "malformed MessagePack at byte {offset}: {message}")
            }
            ErrorKind::MalformedProtobuf { offset, message } => {
                write!(f, "malformed protobuf at byte {offset}: {message}")
            }
            ErrorKind::WrongType { expected, found } => {
                write!(f, "expected {expected}, got {found}")
            }
            ErrorKind::InvalidValue { expected, found } => {
                write!(f, "expected {expected}, got {found}")
            }
            ErrorKind::UnknownField { message } => {
                write!(f, "unknown field (message {message} has no such field)")
            }
            ErrorKind::DuplicateField => f.write_str("field given more than once"),
            ErrorKind::DuplicateOneof { oneof, first } => {
                write!(f, "oneof {oneof} already set by field {first}")
            }
            ErrorKind::InvalidUtf8 => f.write_str("invalid UTF-8 in string"),
            ErrorKind::TooDeep { limit } => write!(f, "nesting deeper than {limit} levels"),
            ErrorKind::Unrenderable { message } | ErrorKind::Request { message } => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for Error {}

/// 1-based line and column of a byte offset into source text, as messages name a place in
/// it (malformed JSON input, a `.proto` file that does not compile).
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}
