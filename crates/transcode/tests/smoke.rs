//! Basic conversions of the shared benchmark schema.

use transcode::{Format, Options, Schema};

mod common;

fn bench_schema() -> Schema {
    common::compile_proto("bench", "bench.proto")
}

#[test]
fn order_json_round_trip() {
    let schema = bench_schema();
    let order = schema.message("bench.v1.Order").unwrap();
    let json = br#"{"orderId":"12345","userId":67890,"amount":99.99,"timestamp":"1718000000000","items":[{"skuId":"1000","quantity":1},{"skuId":"1001","quantity":2,"price":10.0}]}"#;
    let mut pb = Vec::new();
    schema
        .to_protobuf(&order, Format::Json, json, &mut pb, &Options::default())
        .unwrap();
    let mut back = Vec::new();
    schema
        .from_protobuf(&order, Format::Json, &pb, &mut back, &Options::default())
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&back).unwrap(),
        r#"{"orderId":"12345","userId":"67890","amount":99.99,"timestamp":"1718000000000","items":[{"skuId":"1000","quantity":1},{"skuId":"1001","quantity":2,"price":10.0}]}"#
    );
    let mut mp = Vec::new();
    schema
        .from_protobuf(&order, Format::Msgpack, &pb, &mut mp, &Options::default())
        .unwrap();
    let mut pb2 = Vec::new();
    schema
        .to_protobuf(&order, Format::Msgpack, &mp, &mut pb2, &Options::default())
        .unwrap();
    assert_eq!(pb, pb2);
}

#[test]
fn errors_name_the_path() {
    let schema = bench_schema();
    let order = schema.message("bench.v1.Order").unwrap();
    let mut pb = Vec::new();
    let err = schema
        .to_protobuf(
            &order,
            Format::Json,
            br#"{"items":[{},{},{"price":"x"}]}"#,
            &mut pb,
            &Options::default(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"items[2].price: expected number or "NaN", "Infinity", "-Infinity", got "x""#
    );
    let err = schema
        .to_protobuf(
            &order,
            Format::Json,
            b"{\"orderId\": 1,\n \"x\": }",
            &mut pb,
            &Options::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("malformed JSON at byte 21 (line 2, column 7)"),
        "{err}"
    );
}
