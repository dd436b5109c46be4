//! The report the renderings' tests render: two methods of a shop over 20 hours, a client
//! whose name and version are markup, JSON answers with a dropped field and their cost, and a
//! sunset rule that has the first method deprecated, with a brownout to come.

use std::sync::Arc;
use std::time::SystemTime;

use transcode::{Format, UnknownField};

use crate::migration::{
    ClientId, Finished, SunsetPolicy, SunsetRule, Tracker, parse_brownout, parse_time,
};

pub(super) fn t(s: &str) -> SystemTime {
    parse_time(s).unwrap()
}

pub(super) fn scripted() -> (Tracker, SunsetPolicy) {
    let tracker = Tracker::new(100);
    let get: Arc<str> = Arc::from("demo.shop.v1.Shop/GetOrder");
    let list: Arc<str> = Arc::from("demo.shop.v1.Shop/ListOrders");
    let start = t("2027-03-01T00:00:00Z");
    let dropped = [UnknownField {
        path: "items[0]".into(),
        number: 7,
    }];
    for i in 0..300u64 {
        let now = start + std::time::Duration::from_secs(i * 240);
        let (name, version, req, resp) = match i % 3 {
            0 => (
                "<script>alert(1)</script>",
                "1.0\"><b>",
                Format::Json,
                Format::Json,
            ),
            1 => ("ios", "2.1", Format::Protobuf, Format::Protobuf),
            _ => (
                "web",
                "5.0",
                Format::Json,
                if i < 150 {
                    Format::Json
                } else {
                    Format::Protobuf
                },
            ),
        };
        let mut f = Finished::new(req, resp);
        if resp == Format::Json {
            f.dropped = &dropped;
            f.answer_conversion = Some(crate::migration::Conversion {
                format: Format::Json,
                protobuf_bytes: 100,
                format_bytes: 250,
                elapsed: std::time::Duration::from_micros(12),
            });
        }
        tracker.record(&get, &ClientId::new(name, Some(version)), &f, now);
    }
    tracker.record(
        &list,
        &ClientId::new("ios", None),
        &Finished::new(Format::Protobuf, Format::Protobuf),
        start,
    );
    let policy = SunsetPolicy::new(vec![SunsetRule {
        selector: "demo.shop.v1.Shop.GetOrder".into(),
        deprecation: Some(t("2027-01-01T00:00:00Z")),
        sunset: Some(t("2027-06-30T00:00:00Z")),
        link: Some("https://wiki.example/migrate?a=1&b=2".into()),
        brownouts: vec![parse_brownout("2027-05-01T10:00:00Z/PT1H").unwrap()],
        exempt_clients: vec!["legacy-billing".into()],
        exempt_unverified: false,
    }])
    .unwrap();
    (tracker, policy)
}
