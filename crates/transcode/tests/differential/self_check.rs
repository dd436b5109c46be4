//! The harness checked: its comparator sees every kind of difference, a sabotaged production
//! path is caught in both directions, and a direct path that always bails fails the floors.

use std::time::Instant;

use transcode::{Error, Findings, Format, MessageDescriptor, Options, Schema, reference};

use crate::common::compile_proto;
use crate::gen_json::name_aliases;
use crate::gen_wire::Ctx;
use crate::harness::{Harness, Outcome, PREFIX, diff, ref_from, ref_to, run_wire_case};
use crate::random_messages::{KITCHEN_SINK_FLOORS, case_seed};
use crate::wire::{VARINT, put_varint};

/// A KitchenSink with `f_enum = COLOR_RED` and unknown field 900.
fn enum_message() -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, (16 << 3) | VARINT as u64);
    put_varint(&mut b, 1);
    put_varint(&mut b, (900 << 3) | VARINT as u64);
    put_varint(&mut b, 5);
    b
}

/// The comparator itself: it must see every kind of difference.
#[test]
fn comparator_reports_differences() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let wire = enum_message();
    let names = Options::default();
    let numbers = Options {
        enum_numbers: true,
        ..Options::default()
    };
    for fmt in [Format::Json, Format::Msgpack] {
        let a = Outcome::run(|o| reference::from_protobuf(&desc, fmt, &wire, o, &names));
        let b = Outcome::run(|o| reference::from_protobuf(&desc, fmt, &wire, o, &numbers));
        let a2 = Outcome::run(|o| reference::from_protobuf(&desc, fmt, &wire, o, &names));
        assert!(a.res.as_ref().is_ok_and(|f| f.unknown_fields.len() == 1));
        assert_eq!(diff(&a, &a2), None);
        assert_eq!(diff(&a, &b), Some("output bytes differ"), "{a:?} {b:?}");
    }
    let ok = Outcome {
        out: PREFIX.to_vec(),
        res: Ok(Findings::default()),
    };
    let mut other_findings = ok.clone();
    other_findings.res = Ok(Findings {
        ignored_keys: vec!["x".to_owned()],
        ..Findings::default()
    });
    let err = |m: &str| Outcome {
        out: PREFIX.to_vec(),
        res: Err(m.to_owned()),
    };
    assert_eq!(diff(&ok, &other_findings), Some("findings differ"));
    assert_eq!(
        diff(&ok, &err("x")),
        Some("production succeeded, reference failed")
    );
    assert_eq!(
        diff(&err("x"), &ok),
        Some("production failed, reference succeeded")
    );
    assert_eq!(diff(&err("x"), &err("y")), Some("error messages differ"));
    assert_eq!(diff(&err("x"), &err("x")), None);
    // Clobbering what was in the buffer is a difference too.
    let mut clobbered = ok.clone();
    clobbered.out.clear();
    assert_eq!(diff(&clobbered, &ok), Some("output bytes differ"));
}

fn sabotaged_from(
    _: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    let flipped = Options {
        enum_numbers: !opts.enum_numbers,
        ..opts.clone()
    };
    reference::from_protobuf(d, f, i, o, &flipped)
}

fn sabotaged_to(
    _: &Schema,
    d: &MessageDescriptor,
    f: Format,
    i: &[u8],
    o: &mut Vec<u8>,
    opts: &Options,
) -> Result<Findings, Error> {
    let flipped = Options {
        ignore_unknown_fields: !opts.ignore_unknown_fields,
        ..opts.clone()
    };
    reference::to_protobuf(d, f, i, o, &flipped)
}

/// End to end: a production path with a subtle bug in each direction must be caught.
#[test]
fn harness_catches_a_sabotaged_production_path() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let ctx = Ctx::new(schema.pool());
    let aliases = name_aliases(schema.pool());
    let mut h = Harness::with_paths(&schema, sabotaged_from, sabotaged_to, None);
    for case in 0..40 {
        h.case = case.to_string();
        run_wire_case(&mut h, &ctx, &aliases, &desc, case_seed(7, 0, case));
    }
    let bad = |dir: &str| {
        h.table
            .iter()
            .filter(|(k, _)| k.starts_with(dir))
            .map(|(_, v)| v[2])
            .sum::<u64>()
    };
    assert!(
        bad("from") > 0,
        "{}",
        h.summary("sabotaged", Instant::now())
    );
    assert!(bad("to") > 0, "{}", h.summary("sabotaged", Instant::now()));
    assert!(!h.failures.is_empty());
    // And the real production path passes the same cases.
    let mut h = Harness::new(&schema);
    for case in 0..40 {
        h.case = case.to_string();
        run_wire_case(&mut h, &ctx, &aliases, &desc, case_seed(7, 0, case));
    }
    h.finish(
        "production on the sabotage cases",
        Instant::now(),
        KITCHEN_SINK_FLOORS,
    );
}

fn never_direct(
    _: &Schema,
    _: &MessageDescriptor,
    _: Format,
    _: Format,
    _: &[u8],
    _: &Options,
) -> Option<Vec<u8>> {
    None
}

/// A direct path that bails on every message agrees with the reference perfectly (`Schema`
/// then answers with the reference alone): only the floors catch it.
#[test]
fn harness_catches_a_direct_path_that_always_bails() {
    let schema = compile_proto("test", "kitchen_sink.proto");
    let desc = schema.message("protogate.test.v1.KitchenSink").unwrap();
    let ctx = Ctx::new(schema.pool());
    let aliases = name_aliases(schema.pool());
    let mut h = Harness::with_paths(&schema, ref_from, ref_to, Some(never_direct));
    for case in 0..40 {
        h.case = case.to_string();
        run_wire_case(&mut h, &ctx, &aliases, &desc, case_seed(7, 0, case));
    }
    let summary = h.summary("always bails", Instant::now());
    assert_eq!(h.mismatches, 0, "{summary}");
    assert!(h.comparisons > 0, "{summary}");
    let below = h.below_floors(KITCHEN_SINK_FLOORS);
    assert_eq!(below.len(), 2, "{summary}");
    assert!(below[0].starts_with("from: the direct path answered 0 of "));
    assert!(below[1].starts_with("to: the direct path answered 0 of "));
}
