//! Scalar values of the JSON mapping, shared by the reference and the direct paths so both
//! accept, convert and reject exactly alike: one JSON/MessagePack scalar ([`Lit`]) in, one
//! protobuf scalar ([`Scalar`]) out, and the wire encoding and reading of scalars.

use prost_reflect::Kind;

use crate::Error;
use crate::error::ErrorKind;
use crate::wire::{self, Reader, put_tag, put_varint};

/// A JSON or MessagePack value as a scalar conversion sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lit<'v> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    /// An integer literal beyond the 64-bit range, as the nearest double.
    BigInt(f64),
    Str(&'v str),
    Bytes(&'v [u8]),
    /// An array or an object where a scalar was expected: its type name.
    Container(&'static str),
}

impl Lit<'_> {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Lit::Null => "null",
            Lit::Bool(_) => "boolean",
            Lit::I64(_) | Lit::U64(_) | Lit::BigInt(_) => "integer",
            Lit::F64(_) => "number",
            Lit::Str(_) => "string",
            Lit::Bytes(_) => "binary",
            Lit::Container(name) => name,
        }
    }
}

/// One protobuf scalar value, strings and bytes borrowed: what a JSON or MessagePack value
/// converts to and the wire writers take ([`convert`], [`put_field`]), and what the wire
/// readers give both renderers ([`read_scalar`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar<'v> {
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(&'v str),
    Bytes(&'v [u8]),
    /// An enum's number: encoded as an `int32` is, rendered as its name.
    Enum(i32),
}

pub(crate) enum Converted<'v> {
    Value(Scalar<'v>),
    OwnedBytes(Vec<u8>),
    /// An enum name the schema lacks, skipped because unknown fields are ignored.
    Skip,
}

/// A field's kind as a plain tag (`Kind` carries descriptors): what the wire readers and the
/// direct encoder dispatch on. The direct encoder writes the common values of the scalar ones
/// without the general conversion.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Op {
    Double,
    Float,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Bool,
    Str,
    Bytes,
    Enum,
    Message,
}

impl Op {
    /// Every Op, in declaration order (`op as usize` indexes it).
    const ALL: [Op; 17] = [
        Op::Double,
        Op::Float,
        Op::Int32,
        Op::Int64,
        Op::Uint32,
        Op::Uint64,
        Op::Sint32,
        Op::Sint64,
        Op::Fixed32,
        Op::Fixed64,
        Op::Sfixed32,
        Op::Sfixed64,
        Op::Bool,
        Op::Str,
        Op::Bytes,
        Op::Enum,
        Op::Message,
    ];

    pub(crate) fn of(kind: &Kind) -> Op {
        match kind {
            Kind::Double => Op::Double,
            Kind::Float => Op::Float,
            Kind::Int32 => Op::Int32,
            Kind::Int64 => Op::Int64,
            Kind::Uint32 => Op::Uint32,
            Kind::Uint64 => Op::Uint64,
            Kind::Sint32 => Op::Sint32,
            Kind::Sint64 => Op::Sint64,
            Kind::Fixed32 => Op::Fixed32,
            Kind::Fixed64 => Op::Fixed64,
            Kind::Sfixed32 => Op::Sfixed32,
            Kind::Sfixed64 => Op::Sfixed64,
            Kind::Bool => Op::Bool,
            Kind::String => Op::Str,
            Kind::Bytes => Op::Bytes,
            Kind::Enum(_) => Op::Enum,
            Kind::Message(_) => Op::Message,
        }
    }

    /// The wire type one value is written with (unpacked): one load from a table.
    #[inline]
    pub(crate) fn wire_type(self) -> u8 {
        const fn of(op: Op) -> u8 {
            match op {
                Op::Double | Op::Fixed64 | Op::Sfixed64 => wire::I64,
                Op::Float | Op::Fixed32 | Op::Sfixed32 => wire::I32,
                Op::Str | Op::Bytes | Op::Message => wire::LEN,
                _ => wire::VARINT,
            }
        }
        const TABLE: [u8; 17] = {
            let mut t = [0u8; 17];
            let mut i = 0;
            while i < 17 {
                t[i] = of(Op::ALL[i]);
                i += 1;
            }
            t
        };
        TABLE[self as usize]
    }

    /// Whether a repeated field of this kind may be packed.
    #[inline]
    pub(crate) fn is_packable(self) -> bool {
        !matches!(self, Op::Str | Op::Bytes | Op::Message)
    }
}

/// The smallest double that rounds to infinity as a float32: float32's maximum plus half an ULP.
const FLOAT_ROUNDS_TO_INFINITY: f64 = 3.4028235677973366e38;

/// A double as a float field's value, `None` if it is finite but rounds to infinity as a
/// float32 (values that round to a finite float32 are accepted: the shortest form of
/// float32's maximum, 3.4028235e38, lies just above it).
#[inline]
pub(crate) fn to_f32(f: f64) -> Option<f32> {
    (!f.is_finite() || f.abs() < FLOAT_ROUNDS_TO_INFINITY).then_some(f as f32)
}

/// Converts a scalar for a field of `kind` (not a message kind).
pub(crate) fn convert<'v>(
    kind: &Kind,
    v: &Lit<'v>,
    ignore_unknown: bool,
) -> Result<Converted<'v>, Error> {
    Ok(Converted::Value(match kind {
        Kind::Double => Scalar::F64(float_value(v)?),
        Kind::Float => Scalar::F32(
            to_f32(float_value(v)?)
                .ok_or_else(|| Error::invalid("number within the float range", number_text(v)))?,
        ),
        Kind::Bool => match v {
            Lit::Bool(b) => Scalar::Bool(*b),
            other => return Err(Error::wrong_type("boolean", other.type_name())),
        },
        Kind::String => match v {
            Lit::Str(s) => Scalar::Str(s),
            Lit::Bytes(_) => return Err(Error::new(ErrorKind::InvalidUtf8)),
            other => return Err(Error::wrong_type("string", other.type_name())),
        },
        Kind::Bytes => match v {
            Lit::Bytes(b) => Scalar::Bytes(b),
            Lit::Str(s) => return Ok(Converted::OwnedBytes(decode_base64(s)?)),
            other => return Err(Error::wrong_type("base64 string", other.type_name())),
        },
        Kind::Enum(e) => match v {
            // NullValue's JSON form is null (a singular null is handled by the caller).
            Lit::Null if e.full_name() == "google.protobuf.NullValue" => Scalar::Enum(0),
            Lit::Str(s) => {
                if let Some(ev) = e.get_value_by_name(s) {
                    Scalar::Enum(ev.number())
                } else if looks_like_integer(s) {
                    Scalar::Enum(enum_number(integer_value(v)?, v)?)
                } else if ignore_unknown {
                    return Ok(Converted::Skip);
                } else {
                    return Err(Error::invalid(
                        "enum value name or number",
                        format!("{} (not a value of {})", quoted(s), e.full_name()),
                    ));
                }
            }
            Lit::I64(_) | Lit::U64(_) | Lit::F64(_) | Lit::BigInt(_) => {
                Scalar::Enum(enum_number(integer_value(v)?, v)?)
            }
            other => return Err(Error::wrong_type("enum name or number", other.type_name())),
        },
        Kind::Message(_) => unreachable!("messages are handled by the caller"),
        k => integer_scalar(k, v)?,
    }))
}

/// Converts a map key (JSON keys are strings; MessagePack may use integers or booleans).
pub(crate) fn map_key<'v>(key_kind: &Kind, k: &Lit<'v>) -> Result<Scalar<'v>, Error> {
    Ok(match (key_kind, k) {
        (Kind::String, Lit::Str(s)) => Scalar::Str(s),
        (Kind::String, _) => return Err(Error::wrong_type("string map key", k.type_name())),
        (Kind::Bool, Lit::Str(s)) => match *s {
            "true" => Scalar::Bool(true),
            "false" => Scalar::Bool(false),
            _ => return Err(Error::invalid("map key \"true\" or \"false\"", quoted(s))),
        },
        (Kind::Bool, Lit::Bool(b)) => Scalar::Bool(*b),
        (kind, Lit::Str(_) | Lit::I64(_) | Lit::U64(_)) => integer_scalar(kind, k)?,
        (_, other) => return Err(Error::wrong_type("integer map key", other.type_name())),
    })
}

/// A map key as error paths spell it.
pub(crate) fn map_key_text(k: &Lit<'_>) -> String {
    match k {
        Lit::Str(s) => (*s).to_owned(),
        Lit::I64(i) => i.to_string(),
        Lit::U64(u) => u.to_string(),
        Lit::Bool(b) => b.to_string(),
        other => other.type_name().to_owned(),
    }
}

/// Implicit-presence fields at these values are not written (nor rendered, unless
/// `emit_defaults`).
pub(crate) fn is_default(s: Scalar<'_>) -> bool {
    match s {
        Scalar::I32(v) | Scalar::Enum(v) => v == 0,
        Scalar::I64(v) => v == 0,
        Scalar::U32(v) => v == 0,
        Scalar::U64(v) => v == 0,
        // -0.0 is not the default: it is written and printed, as the reference runtimes do.
        Scalar::F32(v) => v.to_bits() == 0,
        Scalar::F64(v) => v.to_bits() == 0,
        Scalar::Bool(v) => !v,
        Scalar::Str(v) => v.is_empty(),
        Scalar::Bytes(v) => v.is_empty(),
    }
}

/// The wire type a scalar of `kind` is written with (unpacked).
pub(crate) fn wire_type(kind: &Kind) -> u8 {
    Op::of(kind).wire_type()
}

/// Tag and value, unless `!always` and the value is the default.
pub(crate) fn put_field(out: &mut Vec<u8>, number: u32, kind: &Kind, s: Scalar<'_>, always: bool) {
    if !always && is_default(s) {
        return;
    }
    put_tag(out, number, wire_type(kind));
    put_untagged(out, kind, s);
}

/// [`put_field`] with the tag already encoded (the direct path keeps it in its plan).
#[inline(always)]
pub(crate) fn put_tagged(out: &mut Vec<u8>, tag: &[u8], kind: &Kind, s: Scalar<'_>, always: bool) {
    if !always && is_default(s) {
        return;
    }
    out.extend_from_slice(tag);
    put_untagged(out, kind, s);
}

#[inline]
fn put_untagged(out: &mut Vec<u8>, kind: &Kind, s: Scalar<'_>) {
    if wire_type(kind) == wire::LEN {
        let b = match s {
            Scalar::Str(v) => v.as_bytes(),
            Scalar::Bytes(v) => v,
            _ => unreachable!("strings and bytes only"),
        };
        put_varint(out, b.len() as u64);
        out.extend_from_slice(b);
    } else {
        put_value(out, Op::of(kind), s);
    }
}

/// A numeric scalar's value without tag (also the element of a packed list), as field kind
/// `op` encodes it.
pub(crate) fn put_value(out: &mut Vec<u8>, op: Op, s: Scalar<'_>) {
    match (op, s) {
        (Op::Sint32, Scalar::I32(v)) => put_varint(out, wire::zigzag32(v)),
        (Op::Sint64, Scalar::I64(v)) => put_varint(out, wire::zigzag64(v)),
        (Op::Fixed32, Scalar::U32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Op::Sfixed32, Scalar::I32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Op::Fixed64, Scalar::U64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Op::Sfixed64, Scalar::I64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (_, Scalar::I32(v) | Scalar::Enum(v)) => put_varint(out, v as i64 as u64),
        (_, Scalar::I64(v)) => put_varint(out, v as u64),
        (_, Scalar::U32(v)) => put_varint(out, v as u64),
        (_, Scalar::U64(v)) => put_varint(out, v),
        (_, Scalar::F32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (_, Scalar::F64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (_, Scalar::Bool(v)) => put_varint(out, v as u64),
        (_, Scalar::Str(_) | Scalar::Bytes(_)) => unreachable!("not packable"),
    }
}

pub(crate) fn is_packable(kind: &Kind) -> bool {
    Op::of(kind).is_packable()
}

/// Reads one scalar of `kind`; `None` (nothing consumed) when the wire type does not fit.
pub(crate) fn read_val<'b>(
    kind: &Kind,
    wt: u8,
    r: &mut Reader<'b>,
) -> Result<Option<Scalar<'b>>, Error> {
    let op = Op::of(kind);
    if wt != op.wire_type() {
        return Ok(None);
    }
    read_scalar(op, r).map(Some)
}

/// Reads one value of the scalar kind `op` (its wire type already checked): the one table of
/// wire readings, for the reference renderer and the direct one.
#[inline(always)]
pub(crate) fn read_scalar<'b>(op: Op, r: &mut Reader<'b>) -> Result<Scalar<'b>, Error> {
    Ok(match op {
        Op::Int32 => Scalar::I32(r.varint()? as i32),
        Op::Int64 => Scalar::I64(r.varint()? as i64),
        Op::Uint32 => Scalar::U32(r.varint()? as u32),
        Op::Uint64 => Scalar::U64(r.varint()?),
        Op::Sint32 => Scalar::I32(wire::unzigzag32(r.varint()? as u32)),
        Op::Sint64 => Scalar::I64(wire::unzigzag64(r.varint()?)),
        Op::Bool => Scalar::Bool(r.varint()? != 0),
        Op::Enum => Scalar::Enum(r.varint()? as i32),
        Op::Fixed32 => Scalar::U32(r.fixed32()?),
        Op::Sfixed32 => Scalar::I32(r.fixed32()? as i32),
        Op::Float => Scalar::F32(f32::from_bits(r.fixed32()?)),
        Op::Fixed64 => Scalar::U64(r.fixed64()?),
        Op::Sfixed64 => Scalar::I64(r.fixed64()? as i64),
        Op::Double => Scalar::F64(f64::from_bits(r.fixed64()?)),
        Op::Str => {
            let (b, at) = r.len_delimited()?;
            Scalar::Str(std::str::from_utf8(b).map_err(|e| {
                Error::malformed_protobuf(at + e.valid_up_to(), "invalid UTF-8 in a string field")
            })?)
        }
        Op::Bytes => Scalar::Bytes(r.len_delimited()?.0),
        Op::Message => unreachable!("messages are scanned by the caller"),
    })
}

pub(crate) fn quoted(s: &str) -> String {
    let mut q = format!("{s:?}");
    if q.len() > 80 {
        q.truncate(q.floor_char_boundary(76));
        q.push_str("...\"");
    }
    q
}

fn number_text(v: &Lit<'_>) -> String {
    match v {
        Lit::I64(i) => i.to_string(),
        Lit::U64(u) => u.to_string(),
        Lit::F64(f) => f.to_string(),
        Lit::BigInt(_) => "an integer beyond the 64-bit range".to_owned(),
        Lit::Str(s) => quoted(s),
        other => other.type_name().to_owned(),
    }
}

/// Strict JSON number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
pub(crate) fn is_json_number(s: &str) -> bool {
    json_number_len(s.as_bytes()).is_some_and(|(len, _)| len == s.len())
}

/// The length of the JSON number at the start of `b` (the grammar of [`is_json_number`]) and
/// whether it is integral (no fraction, no exponent); `None` if `b` does not start with one.
#[inline]
pub(crate) fn json_number_len(b: &[u8]) -> Option<(usize, bool)> {
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_start = usize::from(b.first() == Some(&b'-'));
    let mut i = digits(int_start);
    let int_len = i - int_start;
    if int_len == 0 || (int_len > 1 && b[int_start] == b'0') {
        return None;
    }
    let mut integral = true;
    if b.get(i) == Some(&b'.') {
        integral = false;
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        integral = false;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some((i, integral))
}

fn looks_like_integer(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
}

fn float_value(v: &Lit<'_>) -> Result<f64, Error> {
    match v {
        Lit::F64(f) | Lit::BigInt(f) => Ok(*f),
        Lit::I64(i) => Ok(*i as f64),
        Lit::U64(u) => Ok(*u as f64),
        Lit::Str(s) => match *s {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ if is_json_number(s) => {
                let f: f64 = s.parse().map_err(|_| Error::invalid("number", quoted(s)))?;
                if f.is_infinite() {
                    return Err(Error::invalid("number within the double range", quoted(s)));
                }
                Ok(f)
            }
            _ => Err(Error::invalid(
                "number or \"NaN\", \"Infinity\", \"-Infinity\"",
                quoted(s),
            )),
        },
        other => Err(Error::wrong_type("number", other.type_name())),
    }
}

/// An integer from a JSON number (integral), a decimal string, or an exponent form that
/// denotes an integer (`"1e3"`), as the proto3 JSON mapping allows.
fn integer_value(v: &Lit<'_>) -> Result<i128, Error> {
    match v {
        Lit::I64(i) => Ok(*i as i128),
        Lit::U64(u) => Ok(*u as i128),
        Lit::F64(f) => float_to_integer(*f).ok_or_else(|| Error::invalid("integer", f.to_string())),
        Lit::BigInt(_) => Err(Error::invalid(
            "integer in the 64-bit range",
            number_text(v),
        )),
        Lit::Str(s) => {
            if looks_like_integer(s) {
                // Up to 18 digits always fit an i64: the common case, without i128 arithmetic.
                if s.len() <= 18 {
                    return s
                        .parse::<i64>()
                        .map(i128::from)
                        .map_err(|_| Error::invalid("integer", quoted(s)));
                }
                if s.trim_start_matches('-').len() > 30 {
                    return Err(Error::invalid("integer in range", quoted(s)));
                }
                return s
                    .parse::<i128>()
                    .map_err(|_| Error::invalid("integer", quoted(s)));
            }
            if is_json_number(s) {
                let f: f64 = s
                    .parse()
                    .map_err(|_| Error::invalid("integer", quoted(s)))?;
                return float_to_integer(f).ok_or_else(|| Error::invalid("integer", quoted(s)));
            }
            Err(Error::invalid("integer", quoted(s)))
        }
        other => Err(Error::wrong_type("integer", other.type_name())),
    }
}

fn float_to_integer(f: f64) -> Option<i128> {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 {
        Some(f as i128)
    } else {
        None
    }
}

fn enum_number(n: i128, v: &Lit<'_>) -> Result<i32, Error> {
    i32::try_from(n).map_err(|_| Error::invalid("enum number in the int32 range", number_text(v)))
}

fn integer_scalar<'v>(kind: &Kind, v: &Lit<'_>) -> Result<Scalar<'v>, Error> {
    let n = integer_value(v)?;
    let op = Op::of(kind);
    int_scalar(op, n).ok_or_else(|| {
        let range = match op {
            Op::Int32 | Op::Sint32 | Op::Sfixed32 => "integer in the int32 range",
            Op::Int64 | Op::Sint64 | Op::Sfixed64 => "integer in the int64 range",
            Op::Uint32 | Op::Fixed32 => "integer in the uint32 range",
            _ => "integer in the uint64 range",
        };
        Error::invalid(range, number_text(v))
    })
}

/// An integer as the scalar of integer field kind `op`; `None` outside its range.
fn int_scalar(op: Op, n: i128) -> Option<Scalar<'static>> {
    Some(match op {
        Op::Int32 | Op::Sint32 | Op::Sfixed32 => Scalar::I32(i32::try_from(n).ok()?),
        Op::Int64 | Op::Sint64 | Op::Sfixed64 => Scalar::I64(i64::try_from(n).ok()?),
        Op::Uint32 | Op::Fixed32 => Scalar::U32(u32::try_from(n).ok()?),
        Op::Uint64 | Op::Fixed64 => Scalar::U64(u64::try_from(n).ok()?),
        _ => return None,
    })
}

/// Standard or URL-safe base64, with or without padding.
pub(crate) fn decode_base64(s: &str) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    decode_base64_into(s, &mut out)?;
    Ok(out)
}

/// [`decode_base64`] into a reusable buffer (cleared first).
pub(crate) fn decode_base64_into(s: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, CONFIG);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, CONFIG);
    let engine = if s.contains(['-', '_']) {
        &URL_SAFE
    } else {
        &STANDARD
    };
    out.clear();
    engine
        .decode_vec(s, out)
        .map_err(|e| Error::invalid("base64 string", format!("{} ({e})", quoted(s))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_table_is_in_declaration_order_and_wire_types_match_the_kinds() {
        for (i, op) in Op::ALL.into_iter().enumerate() {
            assert_eq!(op as usize, i, "{op:?}");
        }
        let expect = |op: Op| match op {
            Op::Double | Op::Fixed64 | Op::Sfixed64 => wire::I64,
            Op::Float | Op::Fixed32 | Op::Sfixed32 => wire::I32,
            Op::Str | Op::Bytes | Op::Message => wire::LEN,
            _ => wire::VARINT,
        };
        for op in Op::ALL {
            assert_eq!(op.wire_type(), expect(op), "{op:?}");
        }
    }
}
