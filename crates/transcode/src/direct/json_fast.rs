//! JSON → protobuf wire bytes for messages whose every field has a common shape (numbers,
//! strings, bools, messages and lists of them, in no oneof: `MsgPlan::fast_shapes`), in one
//! function over the bytes with the position in a local and one match on the field's
//! action (`MsgPlan::fast`) a field. Anything else — a null, an escape in a string or a
//! key, a number or string it does not read, a duplicate, a key it does not know — and it gives
//! up (`None`) on the whole message, which the general encoder (`direct::encode`) then
//! converts or hands on to the reference.
//!
//! Why a second loop beside the general one: the general encoder reaches every shape through
//! the `Source` trait, its `Result`s and two matches a value; a probe written in this shape
//! took Order in 15.2 instructions a byte where the general encoder takes 22.7 (BENCHMARKS.md,
//! 2026-12-04 (228d4a7..8398e69)). It writes what the general encoder writes, byte for byte:
//! the values go through the same functions (`short_number`, `integer_run`, `put_plain`,
//! `put_int_field`, `put_str_field`), fields in input order, message lengths patched the same
//! way; the differential tests and the fuzz targets hold all three paths to one answer.

use super::digits::integer_run;
use super::encode::{open_len, put_int_field, put_plain, put_str_field, put_tag_bytes};
use super::json_src::short_number;
use super::plan::{Fast, FieldPlan, MsgPlan, Plans, words16};
use crate::Options;
use crate::scalar::Op;
use crate::special::json_special;
use crate::wire::patch_reserved_len;

/// Converts the JSON `b` (valid UTF-8) as message plan `root`, appended to `out`; `None` when
/// it leaves the message to the general encoder (`out` then holds a partial message: the
/// caller truncates it).
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
    let e = Loop {
        plans,
        b,
        max_depth: opts.max_depth,
    };
    let p = e.ws(0);
    let p = e.message(root, p, out, 1)?;
    (e.ws(p) == b.len()).then_some(())
}

struct Loop<'p, 'b> {
    plans: &'p Plans,
    b: &'b [u8],
    max_depth: usize,
}

impl Loop<'_, '_> {
    /// Past any whitespace at `p`; one compare when there is none (every byte up to the space).
    #[inline(always)]
    fn ws(&self, mut p: usize) -> usize {
        if self.b.get(p).is_some_and(|&c| c <= b' ') {
            while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(p) {
                p += 1;
            }
        }
        p
    }

    /// The 16 bytes at `p` as two words, zero-padded past the end.
    #[inline(always)]
    fn window(&self, p: usize) -> [u64; 2] {
        let rest = self.b.get(p..).unwrap_or_default();
        match rest.first_chunk::<16>() {
            Some(w) => words16(w),
            None => {
                let mut w = [0u8; 16];
                w[..rest.len()].copy_from_slice(rest);
                words16(&w)
            }
        }
    }

    /// The object at `p` as message plan `pi`; where it ends.
    fn message(&self, pi: usize, mut p: usize, out: &mut Vec<u8>, depth: usize) -> Option<usize> {
        let plan = self.plans.msgs.get(pi)?;
        if depth > self.max_depth || !plan.fast_shapes || self.b.get(p) != Some(&b'{') {
            return None;
        }
        p = self.ws(p + 1);
        if self.b.get(p) == Some(&b'}') {
            return Some(p + 1);
        }
        let mut seen = 0u64;
        let mut hint = 0;
        loop {
            let (fi, after) = self.key(plan, p, hint)?;
            // json_fast plans have at most 64 fields.
            let bit = 1u64 << (fi % 64);
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            hint = fi + 1;
            let (field, fast) = (plan.fields.get(fi)?, *plan.fast.get(fi)?);
            p = self.value(field, fast, self.ws(after), out, depth)?;
            p = self.ws(p);
            match self.b.get(p) {
                Some(b',') => p = self.ws(p + 1),
                Some(b'}') => return Some(p + 1),
                _ => return None,
            }
        }
    }

    /// The key at `p` (and its colon) as a field of `plan`: the expected one and the one after
    /// it by their words, any other by name; the field and where its value may start.
    #[inline(always)]
    fn key(&self, plan: &MsgPlan, p: usize, hint: usize) -> Option<(usize, usize)> {
        if let Some(f) = plan.expected_key(hint, self.window(p), |f| &f.json_key_words) {
            return Some((f, p + plan.fields.get(f)?.json_key_words.len));
        }
        // Any other key without escapes, looked up by name.
        if self.b.get(p) != Some(&b'"') {
            return None;
        }
        let rest = self.b.get(p + 1..)?;
        let len = json_special(rest);
        if rest.get(len) != Some(&b'"') {
            return None;
        }
        let f = plan.by_key(&rest[..len], hint)?;
        let colon = self.ws(p + len + 2);
        (self.b.get(colon) == Some(&b':')).then_some((f, colon + 1))
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
        let b = self.b;
        let c = *b.get(p)?;
        let always = field.presence;
        // The scalar arms repeat `JsonSrc::plain_field`'s (through the same functions): read
        // through one shared reader instead, this loop counted the same instructions but ran
        // 10-15 % slower (BENCHMARKS.md, 2026-12-04 (228d4a7..8398e69), its review).
        match (fast, c) {
            (Fast::Number, b'"') => {
                // An integer field's value as a string of digits.
                if matches!(field.op, Op::Double | Op::Float) {
                    return None;
                }
                let (v, end) = integer_run(b, p + 1)?;
                if b.get(end) != Some(&b'"') {
                    return None;
                }
                put_int_field(out, &field.tag, field.op, v, always).ok()?;
                Some(end + 1)
            }
            (Fast::Number, b'-' | b'0'..=b'9') => {
                let (lit, end) = short_number(b, p)?;
                put_plain(out, &field.tag, field.op, &lit, always)
                    .ok()?
                    .then_some(end)
            }
            (Fast::Str, b'"') => {
                let rest = b.get(p + 1..)?;
                let len = json_special(rest);
                if rest.get(len) != Some(&b'"') {
                    return None;
                }
                if always || len != 0 {
                    put_str_field(out, &field.tag, rest, len);
                }
                Some(p + len + 2)
            }
            (Fast::Bool, b't' | b'f') => {
                let v = c == b't';
                let word: &[u8] = if v { b"true" } else { b"false" };
                if !b.get(p..)?.starts_with(word) {
                    return None;
                }
                if always || v {
                    put_tag_bytes(out, &field.tag);
                    out.push(u8::from(v));
                }
                Some(p + word.len())
            }
            (Fast::Message(m), b'{') => {
                let at = open_len(out, &field.tag, 1);
                let end = self.message(m, p, out, depth + 1)?;
                patch_reserved_len(out, at, 1);
                Some(end)
            }
            (Fast::Messages(m), b'[') => self.messages(field, m, p, out, depth),
            _ => None,
        }
    }

    /// A list of messages of plan `m` at `p` (its `[`); where it ends. Each element reserves
    /// the length bytes the one before took, as the general encoder does.
    fn messages(
        &self,
        field: &FieldPlan,
        m: usize,
        p: usize,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Option<usize> {
        let mut p = self.ws(p + 1);
        if self.b.get(p) == Some(&b']') {
            return Some(p + 1);
        }
        let mut reserve = 1;
        loop {
            let at = open_len(out, &field.tag, reserve);
            p = self.message(m, p, out, depth + 1)?;
            reserve = patch_reserved_len(out, at, reserve);
            p = self.ws(p);
            match self.b.get(p) {
                Some(b',') => p = self.ws(p + 1),
                Some(b']') => return Some(p + 1),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode;
    use crate::direct::fast_tests::{run, schema, takes_as_reference};
    use crate::{Format, Options, Schema};

    fn fast(schema: &Schema, message: &str, json: &str, opts: &Options) -> Option<Vec<u8>> {
        run(encode, schema, message, json.as_bytes(), opts)
    }

    /// The workloads' shapes (compact, spaced, keys out of order, nested, empty lists and
    /// objects, two- and three-byte tags, a message of 128 bytes or more) are this loop's, and
    /// it writes the reference's bytes.
    #[test]
    fn takes_the_common_shapes_and_writes_the_references_bytes() {
        let schema = schema();
        let event = r#"{"ts":"1761350400000","level":"ERROR","service":"search","traceId":"ad225f813222f88139901e66c7c964b6","status":503,"latencyMs":18.016010181088284,"bytes":"53610","hit":true,"message":"Session cache label fast index record upstream printed, and then some more words."}"#;
        let cases = [
            (
                "bench.v1.Order",
                r#"{"orderId":"12345","userId":"67890","amount":99.99,"timestamp":"1718000000000","items":[{"skuId":"1000","quantity":1},{"skuId":"1001","quantity":2,"price":10.0}]}"#.to_owned(),
            ),
            (
                "bench.v1.Order",
                " {\n \"items\" : [ ] , \"userId\" :\t\"-7\" ,\"amount\":-0.5 } \n".to_owned(),
            ),
            (
                "bench.v1.RecordList",
                r#"{"records":[{"name":"record-0","price":0.1,"cat":"a","ts":"x"},{"id":"1","name":"é","flag":true}]}"#
                    .to_owned(),
            ),
            ("bench.v1.LogBatch", format!(r#"{{"events":[{event},{event}]}}"#)),
            (
                "protogate.test.v1.Plain",
                r#"{"fString":"","child":{"fBool":false,"children":[{}]},"fInt32":-5,"optInt32":0,"optString":"","optBool":false,"fFar":7,"fFarther":"x","fSint64":"-9","fFloat":1.5,"fFixed64":"18","children":[{},{"fDouble":0}]}"#.to_owned(),
            ),
            ("protogate.test.v1.Plain", "{}".to_owned()),
        ];
        for (message, json) in cases {
            takes_as_reference(encode, &schema, message, Format::Json, json.as_bytes());
        }
    }

    /// Only messages whose every message below is one the loops take are theirs: one holding
    /// a well-known type, or a message with an enum, even deep down, is not (it would be
    /// converted in part, then given up, on every call).
    #[test]
    fn takes_no_message_that_holds_one_it_would_leave() {
        let proto = r#"
            syntax = "proto3";
            package t.v1;
            import "google/protobuf/timestamp.proto";
            enum Color { COLOR_UNSPECIFIED = 0; }
            message Leaf { Color c = 1; }
            message Middle { repeated Leaf leaves = 1; int32 n = 2; }
            message Top { Middle middle = 1; string s = 2; }
            message Timed { google.protobuf.Timestamp at = 1; }
            message Fine { string s = 1; repeated Fine more = 2; Timed2 t = 3; }
            message Timed2 { int64 seconds = 1; }
        "#;
        let schema = Schema::compile(&["t.proto".to_owned()], move |name| {
            (name == "t.proto").then(|| proto.to_owned())
        })
        .unwrap();
        let taken = |name: &str| {
            let desc = schema.message(name).unwrap();
            let plans = schema.plans();
            plans.msgs[plans.index(&desc).unwrap()].fast_shapes
        };
        for name in ["t.v1.Leaf", "t.v1.Middle", "t.v1.Top", "t.v1.Timed"] {
            assert!(!taken(name), "{name}");
        }
        for name in ["t.v1.Fine", "t.v1.Timed2"] {
            assert!(taken(name), "{name}");
        }
    }

    /// Keys by their proto names, keys too long to match by words (looked up by name), in any
    /// order and nested, are taken as the reference takes them; a field named twice, once by
    /// each name, and stray commas are left.
    #[test]
    fn takes_proto_names_and_long_keys() {
        let schema = schema();
        let opts = Options::default();
        let message = "protogate.test.v1.Plain";
        for json in [
            r#"{"aFieldWithALongName":7,"f_int32":5,"opt_string":"x"}"#,
            r#"{"children":[{"a_field_with_a_long_name":1},{"aFieldWithALongName":-2,"fInt32":3}],"a_field_with_a_long_name":0}"#,
            r#"{ "aFieldWithALongName" : 9 , "f_farther" : "far" }"#,
        ] {
            takes_as_reference(encode, &schema, message, Format::Json, json.as_bytes());
        }
        for json in [
            r#"{"fInt32":1,"f_int32":2}"#,
            r#"{"aFieldWithALongName":1,"a_field_with_a_long_name":2}"#,
            r#"{"children":[{},]}"#,
            r#"{,"fInt32":1}"#,
            r#"{"fInt32":1,}"#,
        ] {
            assert_eq!(fast(&schema, message, json, &opts), None, "{json}");
        }
    }

    /// Whatever it does not read leaves the message to the general encoder (which converts it
    /// or hands it on): nulls, escapes, duplicates, unknown keys, numbers and strings it does
    /// not read, values out of range, trailing bytes, depth past the limit, unknown fields to
    /// be ignored.
    #[test]
    fn leaves_the_rest_to_the_general_encoder() {
        let schema = schema();
        let opts = Options::default();
        for json in [
            r#"{"fInt32":null}"#,
            r#"{"child":null}"#,
            r#"{"children":[null]}"#,
            r#"{"children":null}"#,
            r#"{"fString":"a\"b"}"#,
            r#"{"f\u0049nt32":1}"#,
            r#"{"fInt32":1,"fInt32":2}"#,
            r#"{"nope":1}"#,
            r#"{"fDouble":"1.5"}"#,
            r#"{"fDouble":1e3}"#,
            r#"{"fInt32":-0}"#,
            r#"{"fInt32":1.0}"#,
            r#"{"fInt32":"1.0"}"#,
            r#"{"fInt32":2147483648}"#,
            r#"{"fUint32":-1}"#,
            r#"{"fBool":"true"}"#,
            r#"{"fString":7}"#,
            r#"{"child":[]}"#,
            r#"{"children":{}}"#,
            r#"{"fInt32":1} x"#,
            r#"{"fInt32":1"#,
            r#"{"fInt32" 1}"#,
            r#"[]"#,
        ] {
            assert_eq!(
                fast(&schema, "protogate.test.v1.Plain", json, &opts),
                None,
                "{json}"
            );
        }
        let deep = r#"{"child":{"child":{"child":{}}}}"#;
        let shallow = Options {
            max_depth: 3,
            ..Options::default()
        };
        assert_eq!(
            fast(&schema, "protogate.test.v1.Plain", deep, &shallow),
            None
        );
        assert!(
            fast(
                &schema,
                "protogate.test.v1.Plain",
                deep,
                &Options::default()
            )
            .is_some()
        );
        let ignoring = Options {
            ignore_unknown_fields: true,
            ..Options::default()
        };
        assert_eq!(
            fast(&schema, "protogate.test.v1.Plain", "{}", &ignoring),
            None
        );
    }
}
