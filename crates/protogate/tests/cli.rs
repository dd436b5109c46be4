//! The real binary: `protogate serve` on port 0 (the address read from its log), signals and
//! the shutdown grace period, `--listen` forms, the runtime's threads, configuration errors
//! (exit 64, the file named), and `protogate convert` with its flags.
//!
//! Every child is killed when its guard drops (a failed assertion leaks no process), every
//! wait has a deadline, and no test binds a fixed port.

// Test code: a failed unwrap or expect fails the test (they are denied outside tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

mod support;
use support::*;

/// SIGHUP (systemd's ExecReload) does not end the gateway: it is logged and ignored until
/// reloading exists.
#[test]
fn sighup_reloads_and_the_gateway_serves_on() {
    let shop = shop();
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    let extra = shop_args(&shop);
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    gw.signal("-HUP");
    let line = gw.wait_for_line("configuration reloaded");
    assert!(
        line.contains("SIGHUP") && line.contains("methods added: none"),
        "{line}"
    );
    assert!(get_order(addr).starts_with("HTTP/1.1 200"));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let shop = shop();
    let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
    let extra = shop_args(&shop);
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    let r = get_order(addr);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains(r#""name":"grinder""#), "{r}");
    let r = http(addr, "GET", "/healthz", "text/plain", b"");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    gw.sigterm();
    let status = gw.wait_exit();
    assert!(status.success(), "{status:?}");
}

#[test]
fn listen_takes_host_names_ipv6_and_all_interfaces() {
    let shop = shop();
    let extra = shop_args(&shop);
    // Every address localhost has here that this host can bind (IPv6 may be off).
    let localhost: Vec<std::net::IpAddr> = {
        use std::net::ToSocketAddrs;
        let mut ips = Vec::new();
        for a in ("localhost", 0).to_socket_addrs().unwrap() {
            if !ips.contains(&a.ip()) && std::net::TcpListener::bind((a.ip(), 0)).is_ok() {
                ips.push(a.ip());
            }
        }
        ips
    };
    for (listen, connect_host, count) in [
        ("localhost:0", None, localhost.len()),
        (":0", Some("127.0.0.1"), 1),
        ("[::1]:0", None, 1),
    ] {
        let mut args = vec!["serve", "--listen", listen];
        args.extend(strs(&extra));
        if listen.starts_with('[') && std::net::TcpListener::bind("[::1]:0").is_err() {
            eprintln!("no IPv6 loopback on this host: --listen {listen} not tried");
            continue;
        }
        let mut gw = Proc::spawn(&args);
        let addrs = gw.addrs_n(count);
        if listen == "localhost:0" {
            // Every address of the name, on one port.
            let mut ips: Vec<_> = addrs.iter().map(SocketAddr::ip).collect();
            ips.sort();
            let mut want = localhost.clone();
            want.sort();
            assert_eq!(ips, want, "{addrs:?}");
            assert!(
                addrs.iter().all(|a| a.port() == addrs[0].port()),
                "{addrs:?}"
            );
        }
        for addr in &addrs {
            let addr = match connect_host {
                Some(host) => SocketAddr::new(host.parse().unwrap(), addr.port()),
                None => *addr,
            };
            let r = get_order(addr);
            assert!(
                r.starts_with("HTTP/1.1 200"),
                "--listen {listen} at {addr}: {r}"
            );
        }
        gw.sigterm();
        assert!(gw.wait_exit().success());
    }
    // What is not an address is a configuration error naming the flag.
    let out = run(
        &[
            "serve",
            "--listen",
            "localhost",
            "--upstream",
            "http://127.0.0.1:1",
            "--proto",
            "x.proto",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--listen \"localhost\""),
        "{}",
        stderr(&out)
    );
}

/// A raw HTTP/2 upstream: unary calls are answered (an empty message, status 0) only once
/// `release` is set; server streams send one empty message and never end.
struct HeldUpstream {
    addr: SocketAddr,
    calls: Arc<AtomicUsize>,
    release: tokio::sync::watch::Sender<bool>,
    _rt: tokio::runtime::Runtime,
}

fn held_upstream() -> HeldUpstream {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let counter = calls.clone();
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (counter, released) = (counter.clone(), released.clone());
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    let (counter, mut released) = (counter.clone(), released.clone());
                    tokio::spawn(async move {
                        let streaming = request.uri().path().ends_with("/Watch");
                        counter.fetch_add(1, Ordering::SeqCst);
                        if !streaming {
                            let _ = released.wait_for(|r| *r).await;
                        }
                        let head = http::Response::builder()
                            .header("content-type", "application/grpc")
                            .body(())
                            .unwrap();
                        let Ok(mut send) = respond.send_response(head, false) else {
                            return;
                        };
                        let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                        if streaming {
                            std::future::pending::<()>().await;
                        }
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                        let _ = send.send_trailers(trailers);
                    });
                }
            });
        }
    });
    HeldUpstream {
        addr,
        calls,
        release,
        _rt: rt,
    }
}

fn testsvc_gateway(upstream: SocketAddr, extra: &[&str]) -> Proc {
    let upstream = format!("http://{upstream}");
    let proto = format!("{PROTO_DIR}/test/svc/v1/testsvc.proto");
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream,
        "--proto",
        &proto,
        "-I",
        PROTO_DIR,
    ];
    args.extend_from_slice(extra);
    Proc::spawn(&args)
}

#[test]
fn sigterm_lets_a_request_in_flight_finish_and_accepts_no_more() {
    let upstream = held_upstream();
    let mut gw = testsvc_gateway(upstream.addr, &["--upstream-timeout", "60s"]);
    let addr = gw.addr();
    let request = std::thread::spawn(move || {
        http(
            addr,
            "POST",
            "/protogate.test.svc.TestService/Echo",
            "application/json",
            b"{}",
        )
    });
    let calls = &upstream.calls;
    eventually("the call to reach the upstream", || {
        (calls.load(Ordering::SeqCst) == 1).then_some(())
    })
    .expect("the call reached the upstream");
    gw.sigterm();
    // The listener closes: new connections are refused while the request is held.
    eventually("the listener to close", || {
        TcpStream::connect(addr).is_err().then_some(())
    })
    .expect("the gateway stopped accepting");
    assert!(
        gw.child.try_wait().unwrap().is_none(),
        "exited with a request in flight"
    );
    upstream.release.send_replace(true);
    let r = request.join().unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(gw.wait_exit().success());
    let log = gw.log().join("\n");
    assert!(
        log.contains("SIGTERM received") && log.contains("all connections closed"),
        "{log}"
    );
}

#[test]
fn a_connection_that_has_sent_nothing_does_not_hold_up_shutdown() {
    let shop = shop();
    let scratch = Scratch::new("idle");
    // Both the head timeout and the grace period far longer than the exit is waited for.
    let config = scratch.file(
        "idle.toml",
        &format!(
            "upstream = \"http://{}\"\nprotos = [\"{PROTO_DIR}/demo/v1/shop.proto\"]\n\
             header_read_timeout = \"120s\"\nupstream_timeout = \"120s\"\n",
            shop.addr
        ),
    );
    let mut gw = Proc::spawn(&["serve", "--listen", "127.0.0.1:0", "--config", &config]);
    let addr = gw.addr();
    let _idle = TcpStream::connect(addr).unwrap();
    // The connection is accepted (and waits for its first bytes) before the signal.
    let r = get_order(addr);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    gw.sigterm();
    let status = gw.wait_exit();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_grace_period_cuts_off_what_does_not_finish() {
    let upstream = held_upstream();
    // The grace period is --upstream-timeout; a stream has no deadline of its own.
    let mut gw = testsvc_gateway(upstream.addr, &["--upstream-timeout", "1s"]);
    let addr = gw.addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(
        b"POST /protogate.test.svc.TestService/Watch HTTP/1.1\r\nhost: x\r\n\
          content-type: application/json\r\naccept: application/x-ndjson\r\n\
          content-length: 2\r\n\r\n{}",
    )
    .unwrap();
    let mut first = [0u8; 12];
    s.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let started = Instant::now();
    gw.sigterm();
    let status = gw.wait_exit();
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let log = gw.log().join("\n");
    assert!(log.contains("grace period over"), "{log}");
    // The stream was cut: the client reads to the end of the connection.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).ends_with("0\r\n\r\n"),
        "the stream ended cleanly"
    );
}

#[cfg(target_os = "linux")] // threads counted in /proc
#[test]
fn one_worker_thread_runs_on_the_single_threaded_scheduler() {
    let shop = shop();
    let extra = shop_args(&shop);
    let scratch = Scratch::new("threads");
    let config = scratch.file(
        "one.toml",
        &format!(
            "upstream = \"http://{}\"\nprotos = [\"{PROTO_DIR}/demo/v1/shop.proto\"]\nworker_threads = 1\n",
            shop.addr
        ),
    );
    let by_flag = {
        let mut a = vec!["serve", "--listen", "127.0.0.1:0", "--worker-threads", "1"];
        a.extend(strs(&extra));
        a
    };
    let by_file = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.as_str(),
    ];
    for args in [by_flag, by_file] {
        let mut gw = Proc::spawn(&args);
        let r = get_order(gw.addr());
        assert!(r.starts_with("HTTP/1.1 200"), "{args:?}: {r}");
        // Everything runs on the main thread: no worker threads at all. The one other
        // thread is the file watcher's (notify's inotify loop, reload.rs).
        assert_eq!(gw.threads(), 1 + WATCHER, "{args:?}");
    }
    // Two workers for comparison: the main thread plus two.
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--worker-threads", "2"];
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let r = get_order(gw.addr());
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(gw.threads() >= 3 + WATCHER, "{}", gw.threads());
}

/// Threads the file watcher of hot reload adds.
#[cfg(target_os = "linux")]
const WATCHER: usize = 1;

#[test]
fn configuration_errors_exit_64_naming_the_file() {
    let scratch = Scratch::new("config");
    // Every run names --listen 127.0.0.1:0: a regression that started serving would not
    // take a fixed port from anything else.
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        run(&args, b"")
    };
    let bad_proto = scratch.file(
        "bad.proto",
        "syntax = \"proto3\";\npackage x;\nmessage M {\n  Missing field = 1;\n}\n",
    );
    let out = serve(&["--upstream", "http://127.0.0.1:1", "--proto", &bad_proto]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad.proto:4:3") && stderr(&out).contains("Missing"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("listening"), "{}", stderr(&out));

    let missing = scratch.0.join("missing.pb").display().to_string();
    let out = serve(&[
        "--upstream",
        "http://127.0.0.1:1",
        "--descriptor-set",
        &missing,
    ]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains(&missing), "{}", stderr(&out));

    let missing = scratch.0.join("missing.toml").display().to_string();
    let out = serve(&["--config", &missing]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains(&missing), "{}", stderr(&out));

    let missing = scratch.0.join("missing.proto").display().to_string();
    let out = serve(&["--upstream", "http://127.0.0.1:1", "--proto", &missing]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains(&missing), "{}", stderr(&out));

    // A key the file may not have, and a value of the wrong type: named with its line.
    let config = scratch.file(
        "c.toml",
        "upstream = \"http://127.0.0.1:1\"\nprotos = [\"bad.proto\"]\ncolour = \"blue\"\n",
    );
    let out = serve(&["--config", &config]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("colour") && err.contains("line 3") && err.contains(&config),
        "{err}"
    );
    let config = scratch.file(
        "types.toml",
        "upstream = \"http://127.0.0.1:1\"\n\nmax_body_bytes = \"lots\"\n",
    );
    let out = serve(&["--config", &config]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("max_body_bytes") && err.contains("line 3"),
        "{err}"
    );

    // An upstream for a service the schema lacks (a misspelt name) is named.
    let config = scratch.file(
        "services.toml",
        &format!(
            "upstream = \"http://127.0.0.1:1\"\nprotos = [\"{PROTO_DIR}/demo/v1/shop.proto\"]\n\
             [services.\"demo.shop.v1.Shoop\"]\nupstream = \"http://127.0.0.1:2\"\n"
        ),
    );
    let out = serve(&["--config", &config]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(
        err.contains("demo.shop.v1.Shoop") && err.contains("demo.shop.v1.Shop"),
        "{err}"
    );

    // Two HTTP rules that match the same requests: both named, before listening.
    scratch.file(
        "rules.proto",
        "syntax = \"proto3\";\npackage r;\nmessage M { string id = 1; }\n\
         service S {\n  rpc A(M) returns (M);\n  rpc B(M) returns (M);\n}\n",
    );
    let rules = scratch.file(
        "rules.toml",
        "upstream = \"http://127.0.0.1:1\"\nprotos = [\"rules.proto\"]\n\
         [[http_rules]]\nselector = \"r.S.A\"\nget = \"/v1/{id}\"\n\
         [[http_rules]]\nselector = \"r.S.B\"\nget = \"/v1/{id=*}\"\n",
    );
    let out = serve(&["--config", &rules]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("r.S.A") && err.contains("r.S.B"), "{err}");
    assert!(!err.contains("listening"), "{err}");

    // convert reads the schema the same way.
    let out = run(
        &[
            "convert",
            "--descriptor-set",
            &missing,
            "--message",
            "x.M",
            "--from",
            "json",
            "--to",
            "json",
        ],
        b"{}",
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}

#[test]
fn convert_crafts_and_reads_bodies() {
    let bench = format!("{PROTO_DIR}/bench/bench.proto");
    let convert = |args: &[&str], input: &[u8]| {
        let mut all = vec!["convert", "--proto", &bench, "--message", "bench.v1.Order"];
        all.extend_from_slice(args);
        run(&all, input)
    };
    let json =
        br#"{"orderId": 12345, "amount": 99.99, "items": [{"skuId": "1000", "quantity": 1}]}"#;
    let pb = convert(&["--from", "json", "--to", "protobuf"], json);
    assert!(pb.status.success(), "{}", stderr(&pb));
    let mp = convert(&["--from", "protobuf", "--to", "msgpack"], &pb.stdout);
    assert!(mp.status.success());
    let back = convert(&["--from", "msgpack", "--to", "json"], &mp.stdout);
    assert_eq!(
        String::from_utf8_lossy(&back.stdout),
        "{\"orderId\":\"12345\",\"amount\":99.99,\"items\":[{\"skuId\":\"1000\",\"quantity\":1}]}\n"
    );
    let bad = convert(
        &["--from", "json", "--to", "protobuf"],
        br#"{"items": [{"quantity": "lots"}]}"#,
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("items[0].quantity"),
        "{}",
        stderr(&bad)
    );
    let unknown = convert(&["--from", "protobuf", "--to", "json"], &[0xb8, 0x3e, 0x01]);
    assert!(unknown.status.success());
    assert!(stderr(&unknown).contains("#999 at (root)"));

    // --proto-field-names: proto names out.
    let out = convert(
        &["--from", "protobuf", "--to", "json", "--proto-field-names"],
        &pb.stdout,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"order_id\":\"12345\"") && text.contains("\"sku_id\""),
        "{text}"
    );
    // --emit-defaults: fields at their default value printed too.
    let out = convert(
        &["--from", "json", "--to", "json", "--emit-defaults"],
        br#"{"orderId": 1}"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"amount\":0") && text.contains("\"items\":[]"),
        "{text}"
    );
    let out = convert(&["--from", "json", "--to", "json"], br#"{"orderId": 1}"#);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"orderId\":\"1\"}\n"
    );
    // --ignore-unknown-fields: an unknown key is skipped and reported, not an error.
    let input = br#"{"orderId": 1, "colour": "blue"}"#;
    let out = convert(&["--from", "json", "--to", "json"], input);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("colour"), "{}", stderr(&out));
    let out = convert(
        &["--from", "json", "--to", "json", "--ignore-unknown-fields"],
        input,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"orderId\":\"1\"}\n"
    );
    assert!(
        stderr(&out).contains("ignored unknown key colour"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let bench = format!("{PROTO_DIR}/bench/bench.proto");
    let mut gw = Proc::spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:1",
        "--proto",
        &bench,
        "--log-format",
        "json",
    ]);
    let line = gw.wait_for_line("listening on http://");
    assert!(line.starts_with('{') && line.ends_with('}'), "{line}");
    assert!(
        line.contains(r#""level":"INFO""#) && line.contains(r#""methods":4"#),
        "{line}"
    );
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// Out of file descriptors, the accept loop backs off and says so once a second at most (it
/// logged each of its 20 retries a second), with the count of failures not logged.
#[test]
fn running_out_of_file_descriptors_is_logged_once_a_second() {
    let bench = format!("{PROTO_DIR}/bench/bench.proto");
    // 48 descriptors: a handful for the runtime and the listener, the rest for connections.
    let mut gw = Proc::spawn_with(Command::new("sh").args([
        "-c",
        "ulimit -n 48 && exec \"$0\" \"$@\"",
        BIN,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:1",
        "--proto",
        &bench,
    ]));
    let addr = gw.addr();
    // Connections that send nothing are held (until the 10 s head timeout): 80 of them use up
    // the descriptors.
    let held: Vec<std::net::TcpStream> = (0..80)
        .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
        .collect();
    gw.wait_for_line("accept failed");
    let first = Instant::now();
    let failures = || {
        gw.log()
            .iter()
            .filter(|l| l.contains("accept failed"))
            .cloned()
            .collect::<Vec<_>>()
    };
    // Two lines: a second one comes a second after the first, with what was held back.
    let lines = eventually("a second accept-failed line", || {
        let lines = failures();
        (lines.len() >= 2).then_some(lines)
    })
    .unwrap_or_else(|| panic!("one accept-failed line only; log:\n{}", gw.log().join("\n")));
    let window = first.elapsed();
    assert!(
        lines[1].contains("more_since_last") && !lines[1].contains("more_since_last=0"),
        "{}",
        lines[1]
    );
    // Never more than one a second (plus the first), however long the test took to look.
    let lines = failures();
    let seconds = first.elapsed().as_secs_f64().ceil() as usize;
    assert!(
        lines.len() <= seconds + 2,
        "{} accept-failed lines in {:?} (second seen after {window:?})",
        lines.len(),
        first.elapsed()
    );
    drop(held);
}

/// What one keep-alive client saw while the gateway drained.
#[derive(Default)]
struct Seen {
    answered: usize,
    /// Answers that said `Connection: close`.
    told_to_close: usize,
    /// Requests written whose answer never came (must stay 0).
    lost: Vec<String>,
}

/// Sends GetOrder over keep-alive HTTP/1.1 connections until a new connection is refused (the
/// listener closed) or `stop` is set; a connection the gateway closes after telling it to is
/// replaced.
fn keep_alive_client(addr: SocketAddr, stop: &std::sync::atomic::AtomicBool) -> Seen {
    let body = br#"{"id": "2"}"#;
    let request = format!(
        "POST /demo.shop.v1.Shop/GetOrder HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
        body.len(),
        String::from_utf8_lossy(body)
    );
    let mut seen = Seen::default();
    'connections: while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, DEADLINE) else {
            return seen;
        };
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        loop {
            if stop.load(Ordering::Relaxed) {
                return seen;
            }
            if s.write_all(request.as_bytes()).is_err() {
                // The gateway closed an idle kept-alive connection (at the end of the drain)
                // before this request reached it: nothing was sent, nothing lost.
                continue 'connections;
            }
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            let head_and_body = loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                let text = String::from_utf8_lossy(&got).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: ")?.parse().ok())
                        .unwrap_or(0);
                    if got.len() >= end + 4 + length {
                        break Some(text);
                    }
                }
            };
            match head_and_body {
                Some(text) => {
                    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
                    seen.answered += 1;
                    if text.contains("connection: close") {
                        seen.told_to_close += 1;
                        continue 'connections;
                    }
                }
                // Closed with nothing read: the request may have crossed the gateway closing
                // an idle connection; any byte of an answer and then a close is a loss.
                None if got.is_empty() => continue 'connections,
                None => {
                    seen.lost.push(String::from_utf8_lossy(&got).into_owned());
                    continue 'connections;
                }
            }
        }
    }
    seen
}

/// SIGTERM under load: /readyz turns 503 at once while requests are still answered for
/// drain_delay (kept-alive connections told to close by their next answer), then the
/// listener closes, no request that reached the gateway is lost, and the exit code is 0. A
/// second SIGTERM ends a drain at once.
#[test]
fn sigterm_drains_then_stops_without_losing_a_request() {
    let shop = shop();
    let scratch = Scratch::new("drain");
    let config = scratch.file("protogate.toml", "drain_delay = \"2s\"\n");
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--config", &config];
    let extra = shop_args(&shop);
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || keep_alive_client(addr, &stop))
        })
        .collect();
    let ready = |addr| http(addr, "GET", "/readyz", "text/plain", b"");
    assert!(ready(addr).starts_with("HTTP/1.1 200"), "{}", ready(addr));
    gw.sigterm();
    let draining_since = Instant::now();
    let r = eventually("/readyz to answer 503", || {
        let r = ready(addr);
        r.starts_with("HTTP/1.1 503").then_some(r)
    })
    .expect("/readyz turned 503");
    assert!(r.contains("shutting down"), "{r}");
    let status = gw.wait_exit();
    assert!(status.success(), "{status:?}");
    assert!(
        draining_since.elapsed() >= Duration::from_secs(2),
        "exited before drain_delay"
    );
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let lost: Vec<&String> = seen.iter().flat_map(|s| &s.lost).collect();
    assert!(lost.is_empty(), "answers cut short: {lost:?}");
    assert!(seen.iter().map(|s| s.answered).sum::<usize>() > 0);
    assert!(
        seen.iter().map(|s| s.told_to_close).sum::<usize>() > 0,
        "no answer said Connection: close during the drain"
    );

    // Still serving while draining, and a second SIGTERM ends a drain at once. The drain is
    // an hour long and the test ends it, so the request is made while draining however slow
    // the machine (with 2 s, a slow one could only check it when it came in time).
    let config = scratch.file("long.toml", "drain_delay = \"1h\"\n");
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--config", &config];
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    gw.sigterm();
    eventually("/readyz to answer 503", || {
        ready(addr).starts_with("HTTP/1.1 503").then_some(())
    })
    .expect("/readyz turned 503");
    let during = get_order(addr);
    assert!(during.starts_with("HTTP/1.1 200"), "{during}");
    assert!(
        gw.child.try_wait().unwrap().is_none(),
        "exited while draining"
    );
    gw.sigterm();
    let status = gw.wait_exit();
    assert_eq!(status.code(), Some(1), "{status:?}");
}

/// `--admin-listen`: /healthz, /readyz and /metrics there, not on the main port.
#[test]
fn admin_listen_moves_the_admin_endpoints() {
    let shop = shop();
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ];
    let extra = shop_args(&shop);
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    let line = gw.wait_for_line("admin endpoints");
    let admin: SocketAddr = line
        .split("on http://")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| c.is_whitespace() || c == '"').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no admin address in {line}"));
    for path in ["/healthz", "/readyz", "/metrics"] {
        let r = http(admin, "GET", path, "text/plain", b"");
        assert!(r.starts_with("HTTP/1.1 200"), "admin {path}: {r}");
        let r = http(addr, "GET", path, "text/plain", b"");
        assert!(r.starts_with("HTTP/1.1 404"), "main {path}: {r}");
    }
    assert!(get_order(addr).starts_with("HTTP/1.1 200"));
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// `access_log = true`: one JSON line per request with its fields, and never a header's
/// secret.
#[test]
fn the_access_log_has_a_line_per_request() {
    let shop = shop();
    let scratch = Scratch::new("access");
    let config = scratch.file("protogate.toml", "access_log = true\n");
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        &config,
        "--log-format",
        "json",
    ];
    let extra = shop_args(&shop);
    args.extend(strs(&extra));
    let mut gw = Proc::spawn(&args);
    let addr = gw.addr();
    let body = br#"{"id": "2"}"#;
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let peer = s.local_addr().unwrap().to_string();
    let head = format!(
        "POST /demo.shop.v1.Shop/GetOrder HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         user-agent: okhttp/4.12.0\r\nx-client-id: mobile-app\r\nx-request-id: req-7\r\n\
         authorization: Bearer s3cr3t\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer_body_len = answer.split("\r\n\r\n").nth(1).unwrap().len() as u64;
    let line = gw.wait_for_line(r#""target":"protogate::access""#);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["level"], "INFO", "{line}");
    let f = &v; // the log format flattens the event's fields
    assert_eq!(f["message"], "access", "{line}");
    assert_eq!(f["http_method"], "POST", "{line}");
    assert_eq!(f["path"], "/demo.shop.v1.Shop/GetOrder", "{line}");
    assert_eq!(f["route"], "demo.shop.v1.Shop/GetOrder", "{line}");
    assert_eq!(f["request_format"], "json", "{line}");
    assert_eq!(f["response_format"], "json", "{line}");
    assert_eq!(f["status"], 200, "{line}");
    assert_eq!(f["grpc_code"], "OK", "{line}");
    assert_eq!(f["bytes_in"], body.len() as u64, "{line}");
    assert_eq!(f["bytes_out"], answer_body_len, "{line}");
    assert!(f["duration_us"].as_u64().is_some(), "{line}");
    assert!(
        f["upstream_us"].as_u64().unwrap() <= f["duration_us"].as_u64().unwrap(),
        "{line}"
    );
    assert_eq!(f["request_id"], "req-7", "{line}");
    assert_eq!(f["user_agent"], "okhttp/4.12.0", "{line}");
    assert_eq!(f["client_id"], "mobile-app", "{line}");
    // The request's downgrades: JSON asked for, and the demo's unknown fields dropped.
    assert_eq!(f["downgrade"], "json_requested,unknown_fields", "{line}");
    assert_eq!(v["span"]["peer"], peer.as_str(), "{line}");
    assert!(!line.contains("s3cr3t"), "{line}");
    assert!(
        !gw.log().iter().any(|l| l.contains("s3cr3t")),
        "a secret in the log"
    );
    gw.sigterm();
    assert!(gw.wait_exit().success());
}

/// OpenTelemetry export (`--features otel`): a request's server span, child of the client's
/// `traceparent`, and its upstream call's client span reach an OTLP/gRPC receiver on port 0,
/// with the semantic conventions' attributes; the upstream is sent the call span's context.
#[cfg(feature = "otel")]
#[test]
fn otel_spans_reach_the_collector_and_the_trace_context_the_upstream() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use opentelemetry_proto::tonic::trace::v1::Span;

    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Receiver(Arc<Mutex<Vec<Span>>>);

    #[tonic::async_trait]
    impl TraceService for Receiver {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            let spans = request
                .into_inner()
                .resource_spans
                .into_iter()
                .flat_map(|r| r.scope_spans)
                .flat_map(|s| s.spans);
            self.0.lock().unwrap().extend(spans);
            Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
        }
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    // The collector.
    let receiver = Receiver::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let collector = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(receiver.clone());
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    // An upstream that keeps the traceparent it was sent and answers an empty Order.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let upstream = listener.local_addr().unwrap();
    let keep = seen.clone();
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let keep = keep.clone();
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    if let Some(tp) = request.headers().get("traceparent") {
                        keep.lock().unwrap().push(tp.to_str().unwrap().to_owned());
                    }
                    let head = http::Response::builder()
                        .header("content-type", "application/grpc")
                        .body(())
                        .unwrap();
                    let Ok(mut send) = respond.send_response(head, false) else {
                        return;
                    };
                    let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    let _ = send.send_trailers(trailers);
                }
            });
        }
    });

    let scratch = Scratch::new("otel");
    let config = scratch.file(
        "protogate.toml",
        &format!("[otel]\nendpoint = \"http://{collector}\"\nservice_name = \"edge-under-test\"\n"),
    );
    let upstream_url = format!("http://{upstream}");
    let proto = format!("{PROTO_DIR}/demo/v1/shop.proto");
    let mut gw = Proc::spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        &config,
        "--upstream",
        &upstream_url,
        "--proto",
        &proto,
    ]);
    let addr = gw.addr();
    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const PARENT: &str = "b7ad6b7169203331";
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let body = br#"{"id": "2"}"#;
    let head = format!(
        "POST /demo.shop.v1.Shop/GetOrder HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         traceparent: 00-{TRACE}-{PARENT}-01\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The batch goes out at the latest when the gateway stops.
    gw.sigterm();
    assert!(gw.wait_exit().success(), "{}", gw.log().join("\n"));
    let spans = eventually("the spans at the collector", || {
        let spans = receiver.0.lock().unwrap().clone();
        (spans.len() >= 2).then_some(spans)
    })
    .unwrap_or_else(|| panic!("no spans; log:\n{}", gw.log().join("\n")));
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let attr = |span: &Span, key: &str| {
        span.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.clone())
    };
    let string = |s: &str| Some(Value::StringValue(s.into()));
    let server = spans.iter().find(|s| s.kind == 2).expect("a server span");
    let client = spans.iter().find(|s| s.kind == 3).expect("a client span");
    assert_eq!(hex(&server.trace_id), TRACE);
    assert_eq!(hex(&server.parent_span_id), PARENT);
    assert_eq!(server.name, "POST demo.shop.v1.Shop/GetOrder");
    assert_eq!(attr(server, "http.request.method"), string("POST"));
    assert_eq!(
        attr(server, "url.path"),
        string("/demo.shop.v1.Shop/GetOrder")
    );
    assert_eq!(
        attr(server, "http.response.status_code"),
        Some(Value::IntValue(200))
    );
    assert_eq!(attr(server, "rpc.service"), string("demo.shop.v1.Shop"));
    assert_eq!(attr(server, "rpc.method"), string("GetOrder"));
    assert_eq!(
        attr(server, "rpc.grpc.status_code"),
        Some(Value::IntValue(0))
    );
    assert_eq!(hex(&client.trace_id), TRACE);
    assert_eq!(client.parent_span_id, server.span_id);
    assert_eq!(client.name, "demo.shop.v1.Shop/GetOrder");
    assert_eq!(attr(client, "rpc.system"), string("grpc"));
    assert_eq!(attr(client, "server.address"), string("127.0.0.1"));
    assert_eq!(
        attr(client, "server.port"),
        Some(Value::IntValue(i64::from(upstream.port())))
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [format!("00-{TRACE}-{}-01", hex(&client.span_id))]
    );
}
