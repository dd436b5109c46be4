//! The direct transcoder: schema-driven, no intermediate tree. JSON or MessagePack is
//! converted to wire bytes straight from the input's scan, and wire bytes to JSON or
//! MessagePack straight from a scan of the bytes, with per-message plans built once when the
//! schema loads.
//!
//! It is an optimistic fast path: whatever it does not handle (errors, non-canonical wire
//! order, options it does not implement) it gives up on with [`Bail`], and the caller runs the
//! reference path (`crate::reference`) on the whole message. The differential tests hold the
//! two to identical output.

pub(crate) mod digits;
pub(crate) mod encode;
pub(crate) mod json_fast;
pub(crate) mod json_src;
pub(crate) mod msgpack_fast;
pub(crate) mod msgpack_src;
pub(crate) mod plan;
pub(crate) mod render;
pub(crate) mod sink;
pub(crate) mod source;

/// "Let the reference path do this one."
#[derive(Debug)]
pub(crate) struct Bail;

use crate::{Findings, Format, Options};
use plan::Plans;

/// JSON or MessagePack `input` to protobuf bytes of message plan `plan`, appended to `out`.
pub(crate) fn to_protobuf(
    plans: &Plans,
    plan: usize,
    from: Format,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
) -> Result<(), Bail> {
    match from {
        Format::Json => {
            // Valid UTF-8 once for the whole text: both loops then slice strings out of it.
            let text = simdutf8::basic::from_utf8(input).map_err(|_| Bail)?;
            let start = out.len();
            if json_fast::encode(plans, plan, input, out, opts).is_some() {
                return Ok(());
            }
            out.truncate(start);
            encode::encode(plans, plan, json_src::JsonSrc::new(text), out, opts)
        }
        Format::Msgpack => {
            let start = out.len();
            if msgpack_fast::encode(plans, plan, input, out, opts).is_some() {
                return Ok(());
            }
            out.truncate(start);
            encode::encode(plans, plan, msgpack_src::MsgpackSrc::new(input), out, opts)
        }
        Format::Protobuf => Err(Bail),
    }
}

/// Protobuf `input` of message plan `plan` rendered as `to`, appended to `out`. Inlined into
/// `Schema::traced_from_protobuf`: left a call of its own, it cost 15 instructions per
/// conversion (0.4 % of an Order).
#[inline]
pub(crate) fn from_protobuf(
    plans: &Plans,
    plan: usize,
    to: Format,
    input: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
    findings: &mut Findings,
) -> Result<(), Bail> {
    match to {
        Format::Json => render::render(sink::Json, plans, plan, input, out, opts, findings),
        Format::Msgpack => render::render(sink::Msgpack, plans, plan, input, out, opts, findings),
        Format::Protobuf => Err(Bail),
    }
}

/// FNV-1a, to remember map keys without keeping them (duplicate checks of both directions).
pub(crate) fn fnv(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in b {
        h = (h ^ c as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// True if the first `len` bytes of `window` are UTF-8: ASCII strings of up to 32 bytes (with
/// 32 bytes at hand) by one look at the chunk, others by `simdutf8`.
#[inline(always)]
pub(crate) fn utf8(window: &[u8], len: usize) -> bool {
    if len <= 32
        && let Some(w) = window.first_chunk::<32>()
        && crate::special::ascii(w, len)
    {
        return true;
    }
    simdutf8::basic::from_utf8(&window[..len]).is_ok()
}

/// What the fast loops' tests share (`json_fast`, `msgpack_fast`).
#[cfg(test)]
pub(crate) mod fast_tests {
    use super::plan::Plans;
    use crate::{Format, Options, Schema, reference};

    /// A fast loop's entry (`json_fast::encode`, `msgpack_fast::encode`).
    pub(crate) type Loop = fn(&Plans, usize, &[u8], &mut Vec<u8>, &Options) -> Option<()>;

    /// The schemas they convert: the benchmark's and `proto/test/plain.proto`.
    pub(crate) fn schema() -> Schema {
        Schema::compile(
            &["bench.proto".to_owned(), "plain.proto".to_owned()],
            |name| {
                match name {
                    "bench.proto" => Some(include_str!("../../../../proto/bench/bench.proto")),
                    "plain.proto" => Some(include_str!("../../../../proto/test/plain.proto")),
                    _ => None,
                }
                .map(str::to_owned)
            },
        )
        .unwrap()
    }

    /// What the loop `encode` makes of `input` as `message`, or `None` where it leaves the
    /// message; it must not touch what `out` held before.
    pub(crate) fn run(
        encode: Loop,
        schema: &Schema,
        message: &str,
        input: &[u8],
        opts: &Options,
    ) -> Option<Vec<u8>> {
        let desc = schema.message(message).unwrap();
        let plan = schema.plans().index(&desc).unwrap();
        let mut out = vec![7];
        encode(schema.plans(), plan, input, &mut out, opts)?;
        assert_eq!(out[0], 7, "{input:02x?}: wrote before its start");
        Some(out.split_off(1))
    }

    /// The loop `encode` takes `input` (in format `from`) as `message`, with the default
    /// options, and writes the reference's bytes.
    pub(crate) fn takes_as_reference(
        encode: Loop,
        schema: &Schema,
        message: &str,
        from: Format,
        input: &[u8],
    ) {
        let shown = String::from_utf8_lossy(input);
        let desc = schema.message(message).unwrap();
        let opts = Options::default();
        let mut want = Vec::new();
        reference::to_protobuf(&desc, from, input, &mut want, &opts)
            .unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(
            run(encode, schema, message, input, &opts),
            Some(want),
            "{shown}"
        );
    }
}
