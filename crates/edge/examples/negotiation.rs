//! Content negotiation in a loop, for instruction counts (BENCHMARKS.md, the history entry
//! 2026-12-01 (3e48c09..5a94c6a): negotiation by the RFC 9110 grammar):
//!
//! ```sh
//! cargo build --release -p protogate-edge --example negotiation
//! valgrind --tool=callgrind target/release/examples/negotiation bare 100000   # minus N = 0
//! valgrind --tool=callgrind target/release/examples/negotiation mixed 10000
//! ```
//!
//! `bare`: `application/json` with no Accept and with `application/x-protobuf` (3 calls per
//! iteration); `mixed`: two Content-Types (bare, `; charset=utf-8`) × three Accepts (none,
//! bare, a list with q-values) (8 calls).

// A measuring example, not the gateway: a failed unwrap or expect stops the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use http::HeaderValue;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mode, n) = match (
        args.next(),
        args.next().and_then(|n| n.parse::<usize>().ok()),
    ) {
        (Some(mode), Some(n)) => (mode, n),
        _ => {
            eprintln!("usage: negotiation bare|mixed ITERATIONS");
            std::process::exit(2);
        }
    };
    let bare = mode == "bare";
    let content_types: &[HeaderValue] = if bare {
        &[HeaderValue::from_static("application/json")]
    } else {
        &[
            HeaderValue::from_static("application/json"),
            HeaderValue::from_static("application/json; charset=utf-8"),
        ]
    };
    let mut accepts = vec![
        None,
        Some(HeaderValue::from_static("application/x-protobuf")),
    ];
    if !bare {
        accepts.push(Some(HeaderValue::from_static(
            "application/json, application/msgpack;q=0.9, */*;q=0.1",
        )));
    }
    let mut sum = 0usize;
    for _ in 0..n {
        for ct in content_types {
            let request = edge::negotiate::request_format(black_box(Some(ct))).unwrap();
            for accept in &accepts {
                let (format, fallback) = edge::negotiate::response_format(
                    request,
                    black_box(accept.as_ref()),
                    false,
                    true,
                )
                .unwrap();
                sum += format as usize + fallback as usize;
            }
        }
    }
    println!("{sum}");
}
