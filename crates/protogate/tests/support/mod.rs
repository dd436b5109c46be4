//! What the binary's tests share: the binary under test as a child process killed when
//! dropped ([`Proc`]), polling under a deadline, raw HTTP/1.1 requests, scratch directories,
//! and the demo shop as an upstream.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_protogate");
pub const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto");
/// The gateway's line for each address it listens on, before its URL.
const LISTENING: &str = "listening on http";
/// Generous: CI machines are slow and busy. Only a failing test waits this long.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A child process that is killed when dropped; its stderr lines are collected.
pub struct Proc {
    pub child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_with(Command::new(BIN).args(args))
    }

    pub fn spawn_with(command: &mut Command) -> Proc {
        let mut child = command
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("protogate starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let pipe = child.stderr.take().expect("stderr");
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        Proc { child, stderr }
    }

    /// The stderr lines so far.
    pub fn log(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for a stderr line containing `needle`.
    pub fn wait_for_line(&mut self, needle: &str) -> String {
        let line = eventually(&format!("a log line with {needle:?}"), || {
            self.log().into_iter().find(|l| l.contains(needle))
        });
        line.unwrap_or_else(|| {
            let status = self.child.try_wait().ok().flatten();
            panic!(
                "no {needle:?} (exit: {status:?}); log:\n{}",
                self.log().join("\n")
            )
        })
    }

    /// Every address the gateway logged it listens on (`http://` or `https://`), once it has
    /// logged `count` of them.
    pub fn addrs_n(&mut self, count: usize) -> Vec<SocketAddr> {
        let log = eventually("every listening address", || {
            let log = self.log();
            (log.iter().filter(|l| l.contains(LISTENING)).count() >= count).then_some(log)
        })
        .unwrap_or_else(|| {
            panic!(
                "fewer than {count} addresses; log:\n{}",
                self.log().join("\n")
            )
        });
        log.iter()
            .filter_map(|l| l.split(LISTENING).nth(1))
            .filter_map(|rest| rest.split("://").nth(1))
            .map(|rest| {
                rest.split(|c: char| c.is_whitespace() || c == '"')
                    .next()
                    .unwrap_or("")
                    .parse()
                    .expect("a socket address")
            })
            .collect()
    }

    pub fn addr(&mut self) -> SocketAddr {
        self.addrs_n(1)[0]
    }

    pub fn sigterm(&self) {
        self.signal("-TERM");
    }

    pub fn signal(&self, which: &str) {
        let status = Command::new("kill")
            .args([which, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = &mut self.child;
        eventually("protogate to exit", || child.try_wait().expect("wait"))
            .unwrap_or_else(|| panic!("protogate did not exit within {DEADLINE:?}"))
    }

    /// The number of threads the process runs (Linux).
    pub fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
            .expect("/proc")
            .count()
    }
}

/// Polls `check` every 10 ms until it gives `Some`, for at most [`DEADLINE`].
pub fn eventually<T>(_what: &str, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs protogate to its end with `input` on stdin; killed (and the test failed) if it takes
/// longer than [`DEADLINE`].
pub fn run(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protogate starts");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.read_to_end(&mut out);
            out
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let status = eventually("protogate to finish", || child.try_wait().expect("wait"));
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("protogate {args:?} did not finish within {DEADLINE:?}");
    };
    let _ = writer.join();
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One HTTP/1.1 request on a fresh connection; the whole raw response (empty if the
/// connection closed without one).
pub fn http(addr: SocketAddr, method: &str, path: &str, content_type: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.set_write_timeout(Some(DEADLINE)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes `text` to `path` as cert-manager, editors and Kubernetes do: a new file renamed
/// over the old one.
pub fn replace(path: &str, text: &str) {
    let next = format!("{path}.next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// A scratch directory for one test, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("protogate-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The demo shop's gRPC service on 127.0.0.1:0, in a runtime of its own.
pub struct Shop {
    pub addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

pub fn shop() -> Shop {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(protogate::demo::serve_shop(
        listener,
        std::future::pending(),
    ));
    Shop { addr, _rt: rt }
}

pub fn shop_args(shop: &Shop) -> Vec<String> {
    vec![
        "--upstream".into(),
        format!("http://{}", shop.addr),
        "--proto".into(),
        format!("{PROTO_DIR}/demo/v1/shop.proto"),
    ]
}

pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

pub fn get_order(addr: SocketAddr) -> String {
    http(
        addr,
        "POST",
        "/demo.shop.v1.Shop/GetOrder",
        "application/json",
        br#"{"id": "2"}"#,
    )
}

/// One HTTP/1.1 request with `headers` on a fresh connection: the status, the head and the
/// body (not decoded; binary bodies stay intact).
pub fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.set_write_timeout(Some(DEADLINE)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head: {:?}", String::from_utf8_lossy(&out)));
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head}"));
    (status, head, out[split + 4..].to_vec())
}

/// The first line of the gateway's `/metrics` that starts with `prefix`.
pub fn metric(addr: SocketAddr, prefix: &str) -> Option<String> {
    let (_, _, body) = exchange(addr, "GET", "/metrics", &[], b"");
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(str::to_owned)
}

/// Whether `answer` holds a whole HTTP/1.1 answer with a content-length.
pub fn complete(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(usize::MAX))
        })
        .unwrap_or(0);
    body.len() >= length
}

/// The headless browsers the page tests look for on `PATH`, in this order.
pub const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The first browser of [`BROWSERS`] that runs.
pub fn browser() -> Option<&'static str> {
    BROWSERS.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// `url` in headless `chromium` with its profile in `profile` and `extra` switches: what
/// it printed on stdout (`--dump-dom`: the DOM), within [`DEADLINE`].
pub fn headless(chromium: &str, profile: &std::path::Path, extra: &[&str], url: &str) -> String {
    let mut args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push(url.to_owned());
    let mut child = Command::new(chromium)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let status = eventually("chromium to finish", || child.try_wait().unwrap());
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("chromium did not finish within {DEADLINE:?}");
    }
    reader.join().unwrap()
}

/// The oracle tests' decision on a missing tool (crates/transcode/tests/external): a
/// failure when `PROTOGATE_REQUIRE_ORACLES` is set to anything but empty or `0`, else one
/// `SKIPPED:` line written straight to stderr (the harness captures and hides what a passing
/// test prints with `eprintln!`).
pub fn oracle_missing(why: &str) {
    let required = std::env::var("PROTOGATE_REQUIRE_ORACLES")
        .ok()
        .is_some_and(|v| !v.is_empty() && v != "0");
    if required {
        panic!("{why} (PROTOGATE_REQUIRE_ORACLES is set: a missing oracle fails the test)");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}
