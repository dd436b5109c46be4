//! A structural check of protobuf wire bytes against the schema, without decoding into
//! anything: tags, wire types, lengths, UTF-8 of string fields, nesting. Pass-through bodies
//! are checked this way so a malformed one gets a 400 naming the field instead of an upstream
//! INTERNAL; the bytes that travel on are still the client's own.

use prost_reflect::{Kind, MessageDescriptor};

use crate::Error;
use crate::error::ErrorKind;
use crate::scalar::{Op, is_packable, read_scalar, read_val};
use crate::wire::{self, Reader};

pub(crate) fn message(
    desc: &MessageDescriptor,
    bytes: &[u8],
    base: usize,
    depth_left: usize,
    limit: usize,
) -> Result<(), Error> {
    if depth_left == 0 {
        return Err(Error::new(ErrorKind::TooDeep { limit }));
    }
    let mut r = Reader::new(bytes, base);
    while !r.is_empty() {
        let (number, wt) = r.tag()?;
        let Some(field) = desc.get_field(number) else {
            r.skip(number, wt, depth_left)?;
            continue;
        };
        let kind = field.kind();
        let checked = match &kind {
            Kind::Message(m) if wt == wire::LEN => {
                let (b, at) = r.len_delimited()?;
                // A map entry is not a level of its own: the renderer and the encoders count
                // the messages a map holds, not its entries, and so does this check.
                let below = if field.is_map() {
                    depth_left
                } else {
                    depth_left - 1
                };
                message(m, b, at, below, limit).map_err(|e| e.at_field(field.json_name()))?;
                true
            }
            Kind::Message(_) => false,
            k if field.is_list() && wt == wire::LEN && is_packable(k) => {
                let (b, at) = r.len_delimited()?;
                let mut packed = Reader::new(b, at);
                while !packed.is_empty() {
                    read_scalar(Op::of(k), &mut packed)
                        .map_err(|e| e.at_field(field.json_name()))?;
                }
                true
            }
            k => read_val(k, wt, &mut r)
                .map_err(|e| e.at_field(field.json_name()))?
                .is_some(),
        };
        if !checked {
            // A known number with another wire type: kept as an unknown field, as runtimes do.
            r.skip(number, wt, depth_left)?;
        }
    }
    Ok(())
}

/// Checks that `input` is well-formed protobuf wire data for message `desc` (tags, wire
/// types, lengths, UTF-8 of string fields, nesting within [`Options::max_depth`](crate::Options::max_depth)) without
/// decoding it. Unknown fields are fine: they are skipped, not judged.
pub fn validate_protobuf(
    desc: &MessageDescriptor,
    input: &[u8],
    opts: &crate::Options,
) -> Result<(), Error> {
    message(desc, input, 0, opts.max_depth, opts.max_depth)
}
