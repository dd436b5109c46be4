//! The direct transcoder really handles the common shapes itself (the differential tests
//! prove it agrees with the reference; this proves it is not handing everything over).

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use transcode::{Format, MessageDescriptor, Options, Schema};

mod common;

use common::compile_proto as schema;

#[test]
fn plain_messages_take_the_direct_path_in_every_direction() {
    let s = schema("bench", "bench.proto");
    let opts = Options::default();
    let cases: &[(&str, &str)] = &[
        (
            "bench.v1.Order",
            r#"{"orderId":"12345","userId":"67890","amount":99.99,"timestamp":"1718000000000","items":[{"skuId":"1000","quantity":1},{"skuId":"1001","quantity":2,"price":10.0}]}"#,
        ),
        (
            "bench.v1.RecordList",
            r#"{"records":[{"id":"1","name":"record-1","price":0.15,"cat":"b","flag":true,"ts":"2026-08-31T10:20:30.123456+08:00"},{"name":"é \"q\" \\ \n"}]}"#,
        ),
        (
            "bench.v1.LogBatch",
            r#"{"events":[{"ts":"1761350400000","level":"INFO","service":"auth","traceId":"0f","status":200,"latencyMs":1e-3,"bytes":"65536","hit":true,"message":"Ok."}]}"#,
        ),
    ];
    for (name, json) in cases {
        let desc = s.message(name).unwrap();
        let pb = s
            .direct_only(
                &desc,
                Format::Json,
                Format::Protobuf,
                json.as_bytes(),
                &opts,
            )
            .expect("direct JSON in");
        let back = s
            .direct_only(&desc, Format::Protobuf, Format::Json, &pb, &opts)
            .expect("direct JSON out");
        let mp = s
            .direct_only(&desc, Format::Protobuf, Format::Msgpack, &pb, &opts)
            .expect("direct msgpack out");
        let pb2 = s
            .direct_only(&desc, Format::Msgpack, Format::Protobuf, &mp, &opts)
            .expect("direct msgpack in");
        assert_eq!(pb, pb2, "{name}");
        let mut reference = Vec::new();
        transcode::reference::from_protobuf(&desc, Format::Json, &pb, &mut reference, &opts)
            .unwrap();
        assert_eq!(back, reference, "{name}");
    }
}

#[test]
fn well_known_types_and_maps_stay_on_the_direct_path_around_them() {
    let s = schema("test", "kitchen_sink.proto");
    let desc = s.message("protogate.test.v1.KitchenSink").unwrap();
    let opts = Options::default();
    // Keys in field-number order, as encoders write fields (the renderer hands any other wire
    // order to the reference, which sorts).
    let json = br#"{"fInt32":-5,"fEnum":"COLOR_BLUE","repNested":[{"a":1,"ids":["1","2"]}],"oneofString":"o","mapStringString":{"a":"b"},"wTimestamp":"2020-01-01T00:00:00Z","wStruct":{"k":[1,"x",null]}}"#;
    let pb = s
        .direct_only(&desc, Format::Json, Format::Protobuf, json, &opts)
        .expect("direct JSON in");
    let back = s
        .direct_only(&desc, Format::Protobuf, Format::Json, &pb, &opts)
        .expect("direct JSON out");
    let mut reference = Vec::new();
    transcode::reference::from_protobuf(&desc, Format::Json, &pb, &mut reference, &opts).unwrap();
    assert_eq!(
        String::from_utf8(back).unwrap(),
        String::from_utf8(reference).unwrap()
    );
    // Unknown fields are reported by the direct path too (the v2-behind-v1 case).
    let mut with_unknown = pb.clone();
    with_unknown.extend_from_slice(&[0xb8, 0x3e, 0x01]);
    assert!(
        s.direct_only(&desc, Format::Protobuf, Format::Json, &with_unknown, &opts)
            .is_some()
    );
    let mut out = Vec::new();
    let findings = s
        .from_protobuf(&desc, Format::Json, &with_unknown, &mut out, &opts)
        .unwrap();
    assert_eq!(findings.unknown_fields.len(), 1);
    assert_eq!(findings.unknown_fields[0].number, 999);
}

#[test]
fn a_flat_message_the_short_loop_leaves_midway_is_rendered_whole_by_the_general_one() {
    let s = schema("bench", "bench.proto");
    let desc = s.message("bench.v1.Record").unwrap();
    // id = 7, name = "n", then what the short loop hands over after writing two fields: an
    // unknown field (number 9), a field out of order (price after cat), a two-byte tag (an
    // unknown field 16).
    let head: &[u8] = &[0x08, 0x07, 0x12, 0x01, b'n'];
    let price = [&[0x19u8][..], &2.5f64.to_le_bytes()].concat();
    let tails: [(&str, Vec<u8>, Option<u32>); 3] = [
        ("unknown field", vec![0x48, 0x01, 0x22, 0x01, b'c'], Some(9)),
        (
            "out of order",
            [&[0x22u8, 0x01, b'c'][..], &price].concat(),
            None,
        ),
        ("two-byte tag", vec![0x80, 0x01, 0x05], Some(16)),
    ];
    for (what, tail, unknown) in tails {
        let pb = [head, &tail].concat();
        // Unknown fields keep it on the direct path (the general loop skips and reports
        // them); a field out of order goes to the reference, which sorts.
        let numbers = renders_as_the_reference(&s, &desc, &pb, unknown.is_some(), what);
        assert_eq!(numbers, Vec::from_iter(unknown), "{what}");
    }
}

/// `pb` rendered as JSON and as MessagePack: the reference's bytes and findings, and, if
/// `direct`, answered by the direct path itself (not handed over). The unknown fields'
/// numbers as reported.
fn renders_as_the_reference(
    s: &Schema,
    desc: &MessageDescriptor,
    pb: &[u8],
    direct: bool,
    what: &str,
) -> Vec<u32> {
    let opts = Options::default();
    let mut numbers = Vec::new();
    for to in [Format::Json, Format::Msgpack] {
        let mut out = Vec::new();
        let findings = s.from_protobuf(desc, to, pb, &mut out, &opts).unwrap();
        let mut want = Vec::new();
        let want_findings =
            transcode::reference::from_protobuf(desc, to, pb, &mut want, &opts).unwrap();
        assert_eq!(out, want, "{what}, {to:?}");
        assert_eq!(findings, want_findings, "{what}, {to:?}");
        if direct {
            let answer = s.direct_only(desc, Format::Protobuf, to, pb, &opts);
            assert_eq!(answer, Some(want), "{what}, {to:?}: handed over");
        }
        numbers = findings.unknown_fields.iter().map(|u| u.number).collect();
    }
    numbers
}

/// A flat message with a repeated message field (`Order`, its `items`) leaves its short loop
/// after the list, whose elements reported unknown fields and may themselves have left
/// theirs: the general loop renders it again from the start, each unknown field reported
/// once, in the reference's order, the answer the reference's.
#[test]
fn a_flat_message_that_leaves_after_its_list_reports_each_unknown_field_once() {
    let s = schema("bench", "bench.proto");
    let desc = s.message("bench.v1.Order").unwrap();
    // Items: sku_id = 1 and an unknown field 9; sku_id = 2, quantity = 3 out of order after
    // an unknown field 10 (the item's own short loop leaves, then its general loop).
    let item = |b: &[u8]| [&[0x2a, b.len() as u8][..], b].concat();
    let items = [
        item(&[0x08, 0x01, 0x48, 0x05]),
        item(&[0x08, 0x02, 0x50, 0x06, 0x10, 0x03]),
    ]
    .concat();
    let order_id = [0x08u8, 0x07];
    // What follows the list, the unknown fields reported, and whether the direct path
    // answers (a field out of order goes to the reference, which sorts).
    let tails: [(&str, Vec<u8>, Vec<u32>, bool); 3] = [
        (
            "after the list, an unknown field",
            vec![0x58, 0x01],
            vec![11, 9, 10],
            true,
        ),
        (
            "after the list, a field out of order",
            vec![0x10, 0x04],
            vec![9, 10],
            false,
        ),
        ("nothing after the list", vec![], vec![9, 10], true),
    ];
    for (what, tail, unknown, direct) in tails {
        let pb = [&order_id[..], &items, &tail].concat();
        let numbers = renders_as_the_reference(&s, &desc, &pb, direct, what);
        assert_eq!(numbers, unknown, "{what}");
    }
}

/// A message holding lists of itself, nested 90 deep, an unknown field after each list: every
/// level's short loop leaves after its elements. Rendered once more each by the general loop,
/// nested short loops would double the work at every level (2^90); one at a time, the answer
/// (the reference's, every unknown field reported) comes at once — waited for under a generous
/// deadline, in a thread of its own.
#[test]
fn nested_short_loops_that_leave_cost_no_more_than_twice() {
    let s = schema("test", "tree.proto");
    let desc = s.message("protogate.test.v1.Tree").unwrap();
    // From the innermost out: value = 1, the child (kids), then unknown field 9.
    let mut pb: Vec<u8> = vec![0x08, 0x01];
    for _ in 0..90 {
        let mut parent = vec![0x08, 0x01, 0x12];
        prost::encoding::encode_varint(pb.len() as u64, &mut parent);
        parent.extend_from_slice(&pb);
        parent.extend_from_slice(&[0x48, 0x01]);
        pb = parent;
    }
    let (done, answer) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let numbers = renders_as_the_reference(&s, &desc, &pb, true, "a tree 90 deep");
        assert_eq!(numbers, vec![9; 90]);
        let _ = done.send(());
    });
    let finished = answer.recv_timeout(std::time::Duration::from_secs(120));
    assert!(
        finished.is_ok() || worker.is_finished(),
        "not rendered within 120 s: the nested short loops' work grows with 2^depth"
    );
    worker.join().unwrap();
}
