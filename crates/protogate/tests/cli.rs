//! The real binary: `protogate serve` on 127.0.0.1:0 (the address read from its log), signals,
//! configuration errors, and `protogate convert`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_protogate");
const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");

/// Starts `protogate serve` and returns it with the address it logged.
fn serve(args: &[&str]) -> (Child, SocketAddr) {
    let (child, addr, _) = serve_with_line(args);
    (child, addr)
}

/// As [`serve`], also returning the log line that named the address.
fn serve_with_line(args: &[&str]) -> (Child, SocketAddr, String) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protogate starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let addr = rest
                    .split(|c: char| c.is_whitespace() || c == '"')
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let _ = tx.send((addr, line.clone()));
            }
        }
    });
    let (addr, line) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("protogate logs its address");
    (child, addr.parse().expect("a socket address"), line)
}

/// One HTTP/1.1 request on a fresh connection; returns the whole raw response.
fn http(addr: SocketAddr, method: &str, path: &str, content_type: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("response");
    String::from_utf8_lossy(&out).into_owned()
}

fn sigterm(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("protogate did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let backend = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let backend_addr = backend.local_addr().unwrap();
    rt.spawn(protogate::demo::serve_shop(backend, std::future::pending()));
    let (mut child, addr) = serve(&[
        "--upstream",
        &format!("http://{backend_addr}"),
        "--proto",
        &format!("{PROTO_DIR}/demo/v1/shop.proto"),
    ]);
    let r = http(
        addr,
        "POST",
        "/demo.shop.v1.Shop/GetOrder",
        "application/json",
        br#"{"id": "2"}"#,
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains(r#""name":"grinder""#), "{r}");
    let r = http(addr, "GET", "/healthz", "text/plain", b"");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_broken_proto_is_reported_with_file_and_line_before_listening() {
    let dir = std::env::temp_dir().join(format!("protogate-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.proto"),
        "syntax = \"proto3\";\npackage x;\nmessage M {\n  Missing field = 1;\n}\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:1",
            "--proto",
        ])
        .arg(dir.join("bad.proto"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.proto:4:3") && err.contains("Missing"),
        "{err}"
    );
    assert!(!err.contains("listening"), "{err}");

    std::fs::write(
        dir.join("c.toml"),
        "upstream = \"http://127.0.0.1:1\"\nprotos = [\"bad.proto\"]\ncolour = \"blue\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(dir.join("c.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("colour"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Two HTTP rules that match the same requests: both named, before listening.
    std::fs::write(
        dir.join("rules.proto"),
        "syntax = \"proto3\";\npackage r;\nmessage M { string id = 1; }\n\
         service S {\n  rpc A(M) returns (M);\n  rpc B(M) returns (M);\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("rules.toml"),
        "upstream = \"http://127.0.0.1:1\"\nprotos = [\"rules.proto\"]\n\
         [[http_rules]]\nselector = \"r.S.A\"\nget = \"/v1/{id}\"\n\
         [[http_rules]]\nselector = \"r.S.B\"\nget = \"/v1/{id=*}\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(dir.join("rules.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("r.S.A") && err.contains("r.S.B"), "{err}");
    assert!(!err.contains("listening"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_crafts_and_reads_bodies() {
    let run = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(BIN)
            .arg("convert")
            .args([
                "--proto",
                &format!("{PROTO_DIR}/bench/bench.proto"),
                "--message",
                "bench.v1.Order",
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let json =
        br#"{"orderId": 12345, "amount": 99.99, "items": [{"skuId": "1000", "quantity": 1}]}"#;
    let pb = run(&["--from", "json", "--to", "protobuf"], json);
    assert!(
        pb.status.success(),
        "{}",
        String::from_utf8_lossy(&pb.stderr)
    );
    let mp = run(&["--from", "protobuf", "--to", "msgpack"], &pb.stdout);
    assert!(mp.status.success());
    let back = run(&["--from", "msgpack", "--to", "json"], &mp.stdout);
    assert_eq!(
        String::from_utf8_lossy(&back.stdout),
        "{\"orderId\":\"12345\",\"amount\":99.99,\"items\":[{\"skuId\":\"1000\",\"quantity\":1}]}\n"
    );
    let bad = run(
        &["--from", "json", "--to", "protobuf"],
        br#"{"items": [{"quantity": "lots"}]}"#,
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("items[0].quantity"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let unknown = run(&["--from", "protobuf", "--to", "json"], &[0xb8, 0x3e, 0x01]);
    assert!(unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("#999 at (root)"));
}

#[test]
fn json_logs_are_one_object_per_line() {
    let (mut child, _, line) = serve_with_line(&[
        "--upstream",
        "http://127.0.0.1:1",
        "--proto",
        &format!("{PROTO_DIR}/bench/bench.proto"),
        "--log-format",
        "json",
    ]);
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    assert!(
        line.contains(r#""level":"INFO""#) && line.contains(r#""methods":4"#),
        "{line}"
    );
    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
}
