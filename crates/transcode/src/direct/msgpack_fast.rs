//! MessagePack → protobuf wire bytes for the messages `direct::json_fast` takes from JSON
//! (`MsgPlan::fast_shapes`), in the same shape: one function over the bytes with the position in
//! a local and one match on the field's action (`MsgPlan::fast`) a field. Anything else — a
//! nil, a string under a header it does not read, a key it does not know, a duplicate — and
//! it gives up (`None`) on the whole message, which the general encoder (`direct::encode`
//! over `MsgpackSrc`) then converts or hands on to the reference.
//!
//! It writes what the general encoder writes: scalars go through the general encoder's own
//! reader (`msgpack_src::plain_value`), maps', arrays' and keys' headers through `MsgpackSrc`'s
//! (a cursor at the position), fields in input order, message lengths reserved and patched by
//! the same functions; the differential tests and the fuzz targets hold all three paths to one
//! answer.

use super::encode::open_len;
use super::msgpack_src::{Header, MsgpackSrc, plain_value};
use super::plan::{Fast, FieldPlan, MsgPlan, Plans, words16};
use crate::Options;
use crate::wire::patch_reserved_len;

/// Converts the MessagePack `b` as message plan `root`, appended to `out`; `None` when it
/// leaves the message to the general encoder (`out` then holds a partial message: the caller
/// truncates it).
pub(crate) fn encode(
    plans: &Plans,
    root: usize,
    b: &[u8],
    out: &mut Vec<u8>,
    opts: &Options,
) -> Option<()> {
    if opts.ignore_unknown_fields {
        return None;
    }
    let l = Loop {
        plans,
        b,
        max_depth: opts.max_depth,
    };
    (l.message(root, 0, out, 1)? == b.len()).then_some(())
}

struct Loop<'p, 'b> {
    plans: &'p Plans,
    b: &'b [u8],
    max_depth: usize,
}

impl Loop<'_, '_> {
    /// A map's (`map`) or an array's header at `p`: its entries and where they start.
    #[inline(always)]
    fn header(&self, p: usize, map: bool) -> Option<(u32, usize)> {
        let mut s = MsgpackSrc::at(self.b, p);
        match (s.header().ok()?, map) {
            (Header::Map(n), true) | (Header::Array(n), false) => Some((n, s.pos())),
            _ => None,
        }
    }

    /// The map at `p` as message plan `pi`; where it ends.
    fn message(&self, pi: usize, p: usize, out: &mut Vec<u8>, depth: usize) -> Option<usize> {
        let plan = self.plans.msgs.get(pi)?;
        if depth > self.max_depth || !plan.fast_shapes {
            return None;
        }
        let (n, mut p) = self.header(p, true)?;
        let mut seen = 0u64;
        let mut hint = 0;
        for _ in 0..n {
            let (fi, after) = self.key(plan, p, hint)?;
            // fast_shapes plans have at most 64 fields.
            let bit = 1u64 << (fi % 64);
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            hint = fi + 1;
            let (field, fast) = (plan.fields.get(fi)?, *plan.fast.get(fi)?);
            p = self.value(field, fast, after, out, depth)?;
        }
        Some(p)
    }

    /// The key at `p` as a field of `plan`: the expected one and the one after it by their
    /// words (the smallest string header, as encoders write it), any other string by name; the
    /// field and where its value starts.
    #[inline(always)]
    fn key(&self, plan: &MsgPlan, p: usize, hint: usize) -> Option<(usize, usize)> {
        let rest = self.b.get(p..)?;
        let window = rest.first_chunk::<16>().map_or([0; 2], words16);
        if let Some(f) = plan.expected_key(hint, window, |f| &f.mp_json_key_words) {
            return Some((f, p + plan.fields.get(f)?.mp_json_key_words.len));
        }
        self.key_by_name(plan, p, hint)
    }

    /// Any other key, read as `MsgpackSrc::next_key` reads it and looked up by name. Out of
    /// line: the expected key is the common case.
    #[inline(never)]
    fn key_by_name(&self, plan: &MsgPlan, p: usize, hint: usize) -> Option<(usize, usize)> {
        let mut s = MsgpackSrc::at(self.b, p);
        let len = s.str_len().ok()??;
        let key = s.take(len).ok()?;
        Some((plan.by_key(key, hint)?, s.pos()))
    }

    /// The value at `p` as `field`, written with its tag; where it ends.
    #[inline(always)]
    fn value(
        &self,
        field: &FieldPlan,
        fast: Fast,
        p: usize,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Option<usize> {
        match (fast, *self.b.get(p)?) {
            (Fast::Number | Fast::Str | Fast::Bool, _) => {
                plain_value(self.b, p, field, field.presence, out).ok()?
            }
            (Fast::Message(pm), 0x80..=0x8f | 0xde | 0xdf) => {
                let at = open_len(out, &field.tag, 1);
                let end = self.message(pm, p, out, depth + 1)?;
                patch_reserved_len(out, at, 1);
                Some(end)
            }
            (Fast::Messages(pm), 0x90..=0x9f | 0xdc | 0xdd) => {
                let (n, mut p) = self.header(p, false)?;
                // Each element reserves the length bytes the one before took, as the general
                // encoder does.
                let mut reserve = 1;
                for _ in 0..n {
                    let at = open_len(out, &field.tag, reserve);
                    p = self.message(pm, p, out, depth + 1)?;
                    reserve = patch_reserved_len(out, at, reserve);
                }
                Some(p)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode;
    use crate::direct::fast_tests::{run, schema, takes_as_reference};
    use crate::{Format, Options, Schema, reference};

    fn fast(schema: &Schema, message: &str, mp: &[u8], opts: &Options) -> Option<Vec<u8>> {
        run(encode, schema, message, mp, opts)
    }

    /// MessagePack as the renderer writes it for `json` (the workloads' shapes) is this
    /// loop's, and it writes the reference's bytes.
    #[test]
    fn takes_the_common_shapes_and_writes_the_references_bytes() {
        let schema = schema();
        let opts = Options::default();
        // 200 bytes: a str8 (longer strings come as str16, which the loop leaves).
        let long = "x".repeat(200);
        let cases = [
            (
                "bench.v1.Order",
                r#"{"orderId":"12345","userId":"-7","amount":99.99,"timestamp":"1718000000000","items":[{"skuId":"1000","quantity":1},{"skuId":"1001","quantity":2,"price":10.0}]}"#.to_owned(),
            ),
            (
                "bench.v1.LogBatch",
                r#"{"events":[{"ts":"1761350400000","level":"ERROR","status":503,"latencyMs":18.016010181088284,"hit":true,"message":"é and more than thirty-two bytes of text"}]}"#.to_owned(),
            ),
            (
                "protogate.test.v1.Plain",
                format!(
                    r#"{{"fInt32":-5,"fFloat":1.5,"fSint64":"-9","fFixed64":"18","fBool":true,"fString":"{long}","optInt32":0,"optString":"","child":{{"children":[{{}}]}},"children":[{{}},{{"fDouble":0.5}}],"fFar":7,"fFarther":"x"}}"#
                ),
            ),
            ("protogate.test.v1.Plain", "{}".to_owned()),
        ];
        for (message, json) in cases {
            let desc = schema.message(message).unwrap();
            let mut pb = Vec::new();
            reference::to_protobuf(&desc, Format::Json, json.as_bytes(), &mut pb, &opts).unwrap();
            let mut mp = Vec::new();
            schema
                .from_protobuf(&desc, Format::Msgpack, &pb, &mut mp, &opts)
                .unwrap();
            takes_as_reference(encode, &schema, message, Format::Msgpack, &mp);
        }
    }

    /// Maps and arrays under 16- and 32-bit counts, keys as str8, str16 and str32, proto names
    /// and keys too long to match by words are taken as the reference takes them.
    #[test]
    fn takes_every_header_width_and_long_keys() {
        let schema = schema();
        let message = "protogate.test.v1.Plain";
        let s8 = |k: &str| [&[0xd9, k.len() as u8][..], k.as_bytes()].concat();
        let s16 = |k: &str| [&[0xda, 0, k.len() as u8][..], k.as_bytes()].concat();
        let s32 = |k: &str| [&[0xdb, 0, 0, 0, k.len() as u8][..], k.as_bytes()].concat();
        let fix = |k: &str| [&[0xa0 | k.len() as u8][..], k.as_bytes()].concat();
        let child = [&[0xdf, 0, 0, 0, 1][..], &s16("fInt32"), &[0x03]].concat();
        for mp in [
            [
                &[0xde, 0, 3][..],
                &s16("fInt32"),
                &[0x05],
                &fix("aFieldWithALongName"),
                &[0x07],
                &s32("f_string"),
                &fix("x"),
            ]
            .concat(),
            [
                &[0x83][..],
                &s8("optString"),
                &fix(""),
                &fix("a_field_with_a_long_name"),
                &[0xff],
                &fix("children"),
                &[0xdc, 0, 2],
                &child,
                &[0x80],
            ]
            .concat(),
            [
                &[0x81][..],
                &fix("children"),
                &[0xdd, 0, 0, 0, 1],
                &[0xde, 0, 1],
                &fix("fFarther"),
                &s8("far"),
            ]
            .concat(),
        ] {
            takes_as_reference(encode, &schema, message, Format::Msgpack, &mp);
        }
    }

    /// Whatever it does not read leaves the message to the general encoder: nil, binaries,
    /// strings under str16, unknown keys, duplicates, values of another type, trailing or
    /// missing bytes, depth past the limit, unknown fields to be ignored.
    #[test]
    fn leaves_the_rest_to_the_general_encoder() {
        let schema = schema();
        let opts = Options::default();
        let plain = "protogate.test.v1.Plain";
        let key = |name: &str| {
            let mut k = Vec::new();
            rmp::encode::write_str(&mut k, name).unwrap();
            k
        };
        let one = |name: &str, value: &[u8]| [&[0x81][..], &key(name), value].concat();
        for mp in [
            one("fInt32", &[0xc0]),
            one("child", &[0xc0]),
            one("children", &[0x91, 0xc0]),
            one("fString", &[0xda, 0, 1, b'a']),
            one("fString", &[0xc4, 1, b'a']),
            one("fString", &[0xa1, 0xff]),
            one("fString", &[0x07]),
            one("fInt32", &[0xa1, b'1']),
            one("fInt32", &[0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]),
            one("fUint32", &[0xff]),
            one("fBool", &[0x01]),
            one("nope", &[0x01]),
            one("child", &[0x90]),
            one("children", &[0x80]),
            [one("fInt32", &[0x01]), vec![0x01]].concat(),
            [
                &[0x82][..],
                &key("fInt32"),
                &[0x01],
                &key("fInt32"),
                &[0x02],
            ]
            .concat(),
            vec![0x81],
            vec![0x90],
            vec![0xde, 0xff],
        ] {
            assert_eq!(fast(&schema, plain, &mp, &opts), None, "{mp:02x?}");
        }
        let deep = one("child", &one("child", &one("child", &[0x80])));
        let shallow = Options {
            max_depth: 3,
            ..Options::default()
        };
        assert_eq!(fast(&schema, plain, &deep, &shallow), None);
        assert!(fast(&schema, plain, &deep, &Options::default()).is_some());
        let ignoring = Options {
            ignore_unknown_fields: true,
            ..Options::default()
        };
        assert_eq!(fast(&schema, plain, &[0x80], &ignoring), None);
    }
}
