//! The direct transcoder really handles the common shapes itself (the differential tests
//! prove it agrees with the reference; this proves it is not handing everything over).

use transcode::{Format, Options};

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
