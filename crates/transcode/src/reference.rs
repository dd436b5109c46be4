//! The reference ("tree") path: parse into a value tree, walk it against the schema, render
//! through a tree. Obviously correct rather than fast; the direct transcoder behind
//! [`Schema::to_protobuf`](crate::Schema::to_protobuf) and
//! [`Schema::from_protobuf`](crate::Schema::from_protobuf) is tested against it.

use crate::{Error, Findings, Format, MessageDescriptor, Options};

/// Converts `input` in format `from` to protobuf wire bytes of message `desc`, appended to
/// `out`. Protobuf input is copied unchanged (pass-through never re-encodes).
pub fn to_protobuf(
    desc: &MessageDescriptor,
    from: Format,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    let tree = match from {
        Format::Protobuf => {
            out.extend_from_slice(input);
            return Ok(Findings::default());
        }
        Format::Json => crate::json::parse(input, crate::max_containers(opts))?,
        Format::Msgpack => crate::msgpack::parse(input, crate::max_containers(opts))?,
    };
    let mut findings = Findings::default();
    let start = out.len();
    let r = crate::encode::Encoder::new(opts, &mut findings).message(desc, &tree, out);
    if r.is_err() {
        out.truncate(start);
    }
    r.map(|()| findings)
}

/// Renders protobuf wire bytes of message `desc` as `to`, appended to `out`. Protobuf output
/// is the input unchanged.
pub fn from_protobuf(
    desc: &MessageDescriptor,
    to: Format,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    if to == Format::Protobuf {
        out.extend_from_slice(input);
        return Ok(Findings::default());
    }
    let mut findings = Findings::default();
    let tree = crate::decode::Renderer::new(opts, &mut findings).message(desc, input, 0)?;
    match to {
        Format::Json if opts.indent > 0 => crate::json::write_indented(&tree, out, opts.indent, 0),
        Format::Json => crate::json::write(&tree, out),
        Format::Msgpack => crate::msgpack::write(&tree, out),
        Format::Protobuf => unreachable!(),
    }
    Ok(findings)
}
