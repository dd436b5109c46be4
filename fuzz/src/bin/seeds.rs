//! Writes the seed corpora of every fuzz target from the test workloads: `seeds BODIES OUT`.
//!
//! - Transcoding targets: the benchmark bodies (bench/workload.py, written small into BODIES by
//!   fuzz/seeds.sh) and the differential test's generated wire messages (its generator
//!   `crates/transcode/tests/differential/gen_wire.rs`, included by path) for every message the
//!   targets name; their protobuf, JSON and MessagePack forms, under a few option bytes.
//! - stream_splitter: those messages framed as NDJSON, a JSON array, MessagePack and delimited
//!   protobuf.
//! - rest_binder: the requests of tests/tests/rest.rs and the demo's.
//! - media_types: the Content-Type and Accept values of the edge's negotiation tests.
//! - config: deploy/protogate.toml, the TOML blocks of README.md and docs/, and a few more.
//!
//! Each seed is at most 16 KiB; OUT/<target>/ is written afresh.

#[path = "../../../crates/transcode/tests/common/mod.rs"]
mod common;
#[path = "../../../crates/transcode/tests/differential/gen_wire.rs"]
#[allow(dead_code)]
mod gen_wire;
#[path = "../../../crates/transcode/tests/differential/values.rs"]
#[allow(dead_code)]
mod values;
#[path = "../../../crates/transcode/tests/differential/wire.rs"]
#[allow(dead_code)]
mod wire;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use transcode::{Format, Options, reference};

const MAX_SEED: usize = 16 * 1024;

#[derive(Default)]
struct Seeds(BTreeMap<&'static str, Vec<Vec<u8>>>);

impl Seeds {
    fn add(&mut self, target: &'static str, seed: Vec<u8>) {
        if seed.len() <= MAX_SEED {
            let v = self.0.entry(target).or_default();
            if !v.contains(&seed) {
                v.push(seed);
            }
        }
    }

    fn write(&self, out: &Path) {
        for (target, seeds) in &self.0 {
            let dir = out.join(target);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).expect("remove old seeds");
            }
            std::fs::create_dir_all(&dir).expect("create the seed directory");
            for (i, s) in seeds.iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{i:04}")), s).expect("write a seed");
            }
            println!("{target:26} {:5} seeds", seeds.len());
        }
    }
}

/// A message's protobuf form and its JSON and MessagePack renderings (default options): the
/// seeds of the three transcoding targets, under the option bytes given.
fn transcoding(
    seeds: &mut Seeds,
    msg: u8,
    wire: &[u8],
    option_bytes: &[u8],
) -> Option<(Vec<u8>, Vec<u8>)> {
    let (_, desc) = &protogate_fuzz::messages()[msg as usize];
    for &o in option_bytes {
        seeds.add("protobuf_to_json_msgpack", [&[msg, o][..], wire].concat());
    }
    let mut rendered = Vec::new();
    for f in [Format::Json, Format::Msgpack] {
        let mut out = Vec::new();
        if reference::from_protobuf(desc, f, wire, &mut out, &Options::default()).is_err() {
            return None;
        }
        let target = if f == Format::Json {
            "json_to_protobuf"
        } else {
            "msgpack_to_protobuf"
        };
        for &o in option_bytes {
            seeds.add(target, [&[msg, o][..], &out].concat());
        }
        rendered.push(out);
    }
    let msgpack = rendered.pop()?;
    Some((rendered.pop()?, msgpack))
}

/// Messages framed as a request stream, for each framing (the splitter's framing byte) under
/// two per-message limits (the limit bytes of 8 KiB and of 41 bytes).
fn streams(seeds: &mut Seeds, json: &[Vec<u8>], msgpack: &[Vec<u8>], wire: &[Vec<u8>]) {
    let ndjson: Vec<u8> = json.iter().flat_map(|j| [&j[..], b"\n"].concat()).collect();
    let array = [b"[".to_vec(), json.join(&b","[..]), b"]".to_vec()].concat();
    let mp = msgpack.concat();
    let mut delimited = Vec::new();
    for w in wire {
        wire::put_varint(&mut delimited, w.len() as u64);
        delimited.extend_from_slice(w);
    }
    for (framing, body) in [(0u8, ndjson), (1, array), (2, mp), (3, delimited)] {
        for (limit, chunks) in [(255u8, 7u8), (40, 3)] {
            seeds.add(
                "stream_splitter",
                [&[framing, limit, chunks][..], &body].concat(),
            );
        }
    }
}

const REQUESTS: &[(u8, &str, &str)] = &[
    (0, "GET /v1/shelves/1/books/2", ""),
    (0, "GET /v1/books?pageSize=2&pageToken=t", ""),
    (0, "GET /v1/shelves/7/books?requestId=r-1", ""),
    (0, "DELETE /v1/shelves/1/books/2", ""),
    (1, "POST /v1/shelves/1/books/2:archive", "{}"),
    (0, "GET /v1/echo/a%2Fb", ""),
    (0, "GET /v1/echo/a/b/c?filter.pages.min=3&ids=1&ids=2", ""),
    (0, "GET /v1/shelves/1/books/2/tags", ""),
    (0, "GET /v1/shelves/1/books/2/published", "\x0a\x03abc"),
    (
        0,
        "GET /v1/shelves/1/books/2/cover",
        "\x0a\x0atext/plain\x12\x02hi",
    ),
    (1, "PUT /v1/shelves/1/books/2/cover", "raw cover bytes"),
    (1, "POST /v1/upload", "raw"),
    (1, "POST /v1/echo", "{\"parent\":\"p\",\"pageSize\":3}"),
    (0, "GET /v1/echo/x?nope=1", ""),
    (4, "GET /v1/echo/x?utm_source=mail&pageSize=4", ""),
    (0, "GET /v1/echo/x?pageSize=ten", ""),
    (
        1,
        "POST /v1/shelves/7/books",
        "{\"name\":\"b\",\"title\":\"T\"}",
    ),
    (1, "PATCH /v1/shelves/1/books/2", "{\"title\":\"New\"}"),
    (0, "PATCH /v1/shelves/1/books/2?updateMask=title", ""),
    (1, "PUT /v1/echo/p/filter", "{\"pages\":{\"min\":3}}"),
    (1, "PUT /v1/echo/p/ids", "[\"1\",\"2\"]"),
    (0, "SEARCH /v1/echo/tok", ""),
    (0, "GET /v1/shelves/7/books:watch", ""),
    (1, "POST /v1/books:import", "{\"name\":\"x\"}"),
    (0, "POST /library.v1.Library/GetBook", ""),
    (
        1,
        "POST /library.v1.Library/GetBook",
        "{\"name\":\"shelves/1/books/2\"}",
    ),
    (3, "POST /library.v1.Library/GetBook", "\x0a\x01x"),
    (0, "GET /v1/orders/12345", ""),
    (0, "GET /v1/customers/7/orders?pageSize=2", ""),
    (
        1,
        "POST /v1/customers/7/orders",
        "{\"items\":[{\"sku\":\"a\",\"quantity\":2}]}",
    ),
    (0, "GET /v1/customers/7/orders:watch", ""),
    (
        0,
        "GET /v1/echo/x?ts=2024-01-01T00:00:00Z&d=1.5s&mask=a.b,c&w=3&flag=true&e=ONE",
        "",
    ),
];

const MEDIA: &[&str] = &[
    "",
    "*/*",
    "*/*;q=0",
    "application/*",
    "application/json ; charset=\"utf-8\"",
    "application/json charset=utf-8",
    "application/json",
    "application/json+foo",
    "application/json, application/msgpack",
    "application/json; charset",
    "application/json;q=0, */*",
    "application/json;q=0.1, */*;q=0.5",
    "application/msgpack",
    "application/msgpack, application/x-protobuf",
    "application/msgpack;q, application/x-protobuf;q=0.5",
    "application/msgpack\t;\tx=1;;",
    "application/protobuf; proto=bench.v1.Order",
    "application/vnd.msgpack",
    "application/vnd.msgpack;q=0.5, application/json;q=0.4",
    "application/vnd.x+json;q=1",
    "application/x-msgpack",
    "application/x-protobuf ; q=0.2 , application/msgpack\t;\tq=0.3",
    "application/x-protobuf",
    "application/x-protobuf;x=\"a\\\"b\"",
    "application/x-ndjson",
    "application/jsonl",
    "text/event-stream",
    "application/xml",
    "application/xml, text/*;q=0.9",
    "text/html",
    "text/plain",
];

const CONFIGS: &[&str] = &[
    include_str!("../../../deploy/protogate.toml"),
    "upstream = \"http://127.0.0.1:50051\"\ndescriptor_sets = [\"api.pb\"]\n",
    "listen = \":8080\"\nupstream = \"http://[::1]:50051\"\nprotos = [\"a.proto\"]\nincludes = [\"proto\"]\n\
     max_body_bytes = 4194304\nmax_response_bytes = 67108864\nupstream_timeout = \"1.5s\"\n\
     strict_accept = true\nlog_format = \"json\"\ndowngrade_log_interval = \"0\"\n\
     downgrade_log_max_lines = 100\nheader_read_timeout = \"500ms\"\nbody_read_timeout = \"1m\"\n\
     max_header_bytes = 16384\nmax_stream_bytes = 67108864\nworker_threads = 1\n\
     unknown_query_parameters = \"ignore\"\n",
    "upstream = \"http://127.0.0.1:50051\"\nprotos = [\"shop.proto\"]\n\
     [[http_rules]]\nselector = \"demo.shop.v1.Shop.GetOrder\"\nget = \"/v1/orders/{id}\"\n\
     [[http_rules.additional_bindings]]\npost = \"/v1/orders/{id}:fetch\"\nbody = \"*\"\n\
     [[http_rules]]\nselector = \"a.B.C\"\ncustom = { kind = \"SEARCH\", path = \"/x\" }\n\
     response_body = \"r\"\n",
    "protos = [\"a.proto\"]\n[services.\"a.B\"]\nupstream = \"https://x:1\"\n",
    "upstream = \"x\"\nprotos = [\"a.proto\"]\nupstream_timeout = \"0\"\n",
    "upstream = \"http://h:1\"\nprotos = [\"a.proto\"]\nmax_stream_bytes = 1\n",
];

/// The ```toml blocks of README.md and the docs pages that show configuration.
fn readme_configs() -> Vec<String> {
    [
        include_str!("../../../README.md"),
        include_str!("../../../docs/configuration.md"),
        include_str!("../../../docs/rest.md"),
        include_str!("../../../docs/tls.md"),
        include_str!("../../../docs/upstreams.md"),
        include_str!("../../../docs/migration.md"),
        include_str!("../../../docs/operations.md"),
    ]
    .into_iter()
    .flat_map(|doc| doc.split("```toml\n").skip(1))
    .filter_map(|b| b.split("```").next())
    .map(str::to_owned)
    .collect()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [bodies, out] = &args[..] else {
        eprintln!("usage: seeds BODIES_DIR OUT_DIR");
        std::process::exit(2);
    };
    let mut seeds = Seeds::default();

    // The workload bodies, JSON as bench/workload.py writes them.
    let mut files: Vec<PathBuf> = std::fs::read_dir(bodies)
        .expect("read the bodies")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    let (mut jsons, mut mps, mut wires) = (Vec::new(), Vec::new(), Vec::new());
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let name = format!("bench.v1.{}", stem.split('_').next().unwrap());
        let msg = protogate_fuzz::message_index(&name, false)
            .unwrap_or_else(|| panic!("{name} is one of the messages"));
        let (_, desc) = &protogate_fuzz::messages()[msg as usize];
        let json = std::fs::read(&path).expect("read a body");
        let mut wire = Vec::new();
        reference::to_protobuf(desc, Format::Json, &json, &mut wire, &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        seeds.add("json_to_protobuf", [&[msg, 0][..], &json].concat());
        if let Some((j, m)) = transcoding(&mut seeds, msg, &wire, &[0, 0x01, 0x06]) {
            jsons.push(j);
            mps.push(m);
            wires.push(wire);
        }
    }
    streams(&mut seeds, &jsons, &mps, &wires);

    // The differential test's generated messages, a few per message.
    let all = protogate_fuzz::messages();
    let ctxs = [
        gen_wire::Ctx::new(protogate_fuzz::schema_v1().pool()),
        gen_wire::Ctx::new(protogate_fuzz::schema_v2().pool()),
    ];
    let mut rng = common::Rng::new(0x5EED_F022);
    for (i, (schema, desc)) in all.iter().enumerate() {
        let ctx = &ctxs[usize::from(std::ptr::eq(*schema, protogate_fuzz::schema_v2()))];
        let (mut js, mut ms, mut ws) = (Vec::new(), Vec::new(), Vec::new());
        for case in 0..4u64 {
            let wire = gen_wire::Gen::new(rng.u64() ^ case, ctx).root(desc);
            let opts = [0u8, [0x01, 0x02, 0x04, 0x08, 0x30][rng.index(5)]];
            if let Some((j, m)) = transcoding(&mut seeds, i as u8, &wire, &opts) {
                js.push(j);
                ms.push(m);
                ws.push(wire);
            }
        }
        if i % 8 == 0 {
            streams(&mut seeds, &js, &ms, &ws);
        }
    }

    for (flags, line, body) in REQUESTS {
        let mut s = vec![*flags & 0x0f];
        s.extend_from_slice(line.as_bytes());
        s.push(b'\n');
        s.extend_from_slice(body.as_bytes());
        seeds.add("rest_binder", s.clone());
        // The answer as MessagePack.
        s[0] |= 0x10;
        seeds.add("rest_binder", s);
    }

    for (i, ct) in MEDIA.iter().enumerate() {
        let accept = MEDIA[(i * 7 + 3) % MEDIA.len()];
        for flags in [0x02u8, 0x13, 0x4a] {
            seeds.add(
                "media_types",
                [&[flags][..], ct.as_bytes(), b"\n", accept.as_bytes()].concat(),
            );
        }
    }

    for c in CONFIGS {
        seeds.add("config", c.as_bytes().to_vec());
    }
    for c in readme_configs() {
        seeds.add("config", c.into_bytes());
    }

    seeds.write(out);
}
