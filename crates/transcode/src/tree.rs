//! The value tree of the reference ("tree") path: JSON and MessagePack input parse into [`In`],
//! protobuf renders into [`Out`]. Obviously correct rather than fast; the direct transcoder is
//! checked against it.

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// A parsed JSON or MessagePack value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum In {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    /// A JSON integer literal beyond the 64-bit range, as the nearest double: a number for
    /// floating-point fields, out of range for every integer field. (serde_json reads such
    /// literals as doubles, and -9223372036854775809 would pass for -2^63.)
    BigInt(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<In>),
    /// Keys are strings in JSON; MessagePack may also use integers or booleans (map fields).
    Map(Vec<(In, In)>),
}

impl In {
    /// The value as a scalar conversion sees it.
    pub(crate) fn lit(&self) -> crate::scalar::Lit<'_> {
        use crate::scalar::Lit;
        match self {
            In::Null => Lit::Null,
            In::Bool(b) => Lit::Bool(*b),
            In::I64(i) => Lit::I64(*i),
            In::U64(u) => Lit::U64(*u),
            In::F64(f) => Lit::F64(*f),
            In::BigInt(f) => Lit::BigInt(*f),
            In::Str(s) => Lit::Str(s),
            In::Bytes(b) => Lit::Bytes(b),
            In::List(_) => Lit::Container("array"),
            In::Map(_) => Lit::Container("object"),
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        self.lit().type_name()
    }
}

/// A rendered value, shaped by the proto3 JSON mapping. The JSON and MessagePack writers
/// differ only in how they spell 64-bit integers, bytes and non-finite floats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Out {
    Null,
    Bool(bool),
    /// 32-bit integer kinds and enum numbers: JSON numbers.
    I32(i32),
    U32(u32),
    /// 64-bit integer kinds: JSON strings, MessagePack integers.
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Out>),
    Map(Vec<(String, Out)>),
}

/// Builds an [`In`] from any self-describing serde deserializer (serde_json, rmp-serde),
/// rejecting duplicate keys and bounding nesting.
pub(crate) struct InSeed<'a> {
    pub(crate) depth_left: usize,
    /// Set when a double with an integral value of magnitude 2^63 or more was read: with
    /// serde_json it may have been an integer literal beyond the 64-bit range (see
    /// [`In::BigInt`]).
    pub(crate) big_doubles: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for InSeed<'_> {
    type Value = In;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<In, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for InSeed<'_> {
    type Value = In;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }

    fn visit_unit<E>(self) -> Result<In, E> {
        Ok(In::Null)
    }
    fn visit_none<E>(self) -> Result<In, E> {
        Ok(In::Null)
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<In, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<In, E> {
        Ok(In::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<In, E> {
        Ok(In::I64(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<In, E> {
        Ok(if let Ok(i) = i64::try_from(v) {
            In::I64(i)
        } else {
            In::U64(v)
        })
    }
    fn visit_f32<E>(self, v: f32) -> Result<In, E> {
        Ok(In::F64(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<In, E> {
        if v.abs() >= 9_223_372_036_854_775_808.0 && v.fract() == 0.0 {
            self.big_doubles.set(true);
        }
        Ok(In::F64(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<In, E> {
        Ok(In::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<In, E> {
        Ok(In::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<In, E> {
        Ok(In::Bytes(v.to_vec()))
    }
    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<In, E> {
        Ok(In::Bytes(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<In, A::Error> {
        let child = self.child::<A::Error>()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(self.seed(child))? {
            items.push(v);
        }
        Ok(In::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<In, A::Error> {
        let child = self.child::<A::Error>()?;
        let mut entries: Vec<(In, In)> = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        // Duplicate keys are rejected, as json_format does; a set once the object grows.
        let mut seen: Option<HashSet<KeyRepr>> = None;
        while let Some(k) = map.next_key_seed(self.seed(child))? {
            let repr = KeyRepr::of(&k);
            let dup = match &mut seen {
                Some(set) => !set.insert(repr),
                None => {
                    let dup = entries.iter().any(|(e, _)| KeyRepr::of(e) == repr);
                    if entries.len() >= 16 {
                        let mut set: HashSet<KeyRepr> =
                            entries.iter().map(|(e, _)| KeyRepr::of(e)).collect();
                        set.insert(repr);
                        seen = Some(set);
                    }
                    dup
                }
            };
            if dup {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {}",
                    DisplayKey(&k)
                )));
            }
            let v = map.next_value_seed(self.seed(child))?;
            entries.push((k, v));
        }
        Ok(In::Map(entries))
    }
}

impl<'a> InSeed<'a> {
    fn seed(&self, depth_left: usize) -> InSeed<'a> {
        InSeed {
            depth_left,
            big_doubles: self.big_doubles,
        }
    }

    fn child<E: de::Error>(&self) -> Result<usize, E> {
        self.depth_left
            .checked_sub(1)
            .ok_or_else(|| E::custom("nesting too deep"))
    }
}

#[derive(PartialEq, Eq, Hash)]
enum KeyRepr {
    Str(String),
    Int(i128),
    Other(String),
}

impl KeyRepr {
    fn of(k: &In) -> KeyRepr {
        match k {
            In::Str(s) => KeyRepr::Str(s.clone()),
            In::I64(i) => KeyRepr::Int(*i as i128),
            In::U64(u) => KeyRepr::Int(*u as i128),
            other => KeyRepr::Other(format!("{other:?}")),
        }
    }
}

struct DisplayKey<'a>(&'a In);

impl fmt::Display for DisplayKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            In::Str(s) => write!(f, "{s:?}"),
            In::I64(i) => write!(f, "{i}"),
            In::U64(u) => write!(f, "{u}"),
            other => write!(f, "{other:?}"),
        }
    }
}
