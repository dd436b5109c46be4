#!/usr/bin/env python3
"""bench/scrape.py (make bench-scrape) — what the per-client series cost a Prometheus scrape.

The release gateway (one worker thread) in front of the demo shop (`protogate demo
--backend-only`): CLIENTS client ids (default 10,000) each call GetOrder and ListOrders once
and the 50 busiest a few more times, answered in JSON, MessagePack and protobuf (Accept), so
each method's 50 exported clients and `other` have a series per answer format. Then /metrics
is fetched SCRAPES times (default 200) on one kept-alive connection, with
`[migration] export_clients` at 50 and at 0 (the baseline: the same report, no client
series), interleaved; prints a markdown table of the median and p90 time per scrape, the
body's size and its lines, and the ratio to the baseline.

Settings: SCRAPE_CLIENTS, SCRAPE_SCRAPES, SCRAPE_BUILD=0 to skip `cargo build`,
SCRAPE_GATEWAY (default target/release/protogate).
"""
import http.client
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATEWAY = os.environ.get("SCRAPE_GATEWAY", os.path.join(ROOT, "target/release/protogate"))
CLIENTS = int(os.environ.get("SCRAPE_CLIENTS", "10000"))
SCRAPES = int(os.environ.get("SCRAPE_SCRAPES", "200"))
ACCEPTS = ["application/json", "application/msgpack", "application/x-protobuf"]
CALLS = [("/demo.shop.v1.Shop/GetOrder", b'{"id": "1"}'), ("/demo.shop.v1.Shop/ListOrders", b"{}")]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_line(proc, log, pattern):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(log) as f:
            m = re.search(pattern, f.read())
        if m:
            return m.group(1)
        if proc.poll() is not None:
            sys.exit(f"bench-scrape: process ended: {open(log).read()[-500:]}")
        time.sleep(0.05)
    sys.exit(f"bench-scrape: no {pattern!r} in {log}")


def gateway(work, backend, export_clients):
    config = os.path.join(work, f"gw{export_clients}.toml")
    with open(config, "w") as f:
        f.write(f"drain_delay = \"0s\"\n[migration]\nmax_clients = {CLIENTS * 3}\n"
                f"export_clients = {export_clients}\n")
    log = os.path.join(work, f"gw{export_clients}.log")
    proc = subprocess.Popen(
        ["taskset", "-c", "1", GATEWAY, "serve", "--listen", "127.0.0.1:0", "--worker-threads", "1",
         "--upstream", f"http://{backend}", "--proto", "proto/demo/v1/shop.proto", "-I", "proto",
         "--config", config],
        cwd=ROOT, stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    addr = wait_line(proc, log, r"listening on http://([0-9.]+:[0-9]+)")
    return proc, addr


def load(addr):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port))
    for i in range(CLIENTS):
        # The 50 busiest send a few more, so the top is what it is, not ties.
        for _ in range(1 + (3 if i < 50 else 0)):
            for path, body in CALLS:
                c.request("POST", path, body, {"content-type": "application/json",
                                               "accept": ACCEPTS[i % 3], "x-client-id": f"client-{i}"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    sys.exit(f"bench-scrape: {path} answered {r.status}")
    c.close()


def scrape(addr):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port))
    times, size, lines = [], 0, 0
    for _ in range(SCRAPES):
        t = time.perf_counter()
        c.request("GET", "/metrics")
        body = c.getresponse().read()
        times.append(time.perf_counter() - t)
        size, lines = len(body), body.count(b"\n")
        series = len(re.findall(rb"^protogate_client_", body, re.M))
    c.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)], size, lines, series


def main():
    if os.environ.get("SCRAPE_BUILD", "1") != "0":
        subprocess.run(["cargo", "build", "--release", "-p", "protogate"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as work:
        port = free_port()
        blog = os.path.join(work, "backend.log")
        backend = subprocess.Popen(
            ["taskset", "-c", "0", GATEWAY, "demo", "--backend-only", "--listen", f"127.0.0.1:{port}"],
            cwd=ROOT, stderr=open(blog, "w"), stdout=subprocess.DEVNULL)
        procs = [backend]
        try:
            deadline = time.monotonic() + 60
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                if time.monotonic() > deadline or backend.poll() is not None:
                    sys.exit(f"bench-scrape: the demo backend did not start: {open(blog).read()[-500:]}")
                time.sleep(0.05)
            gws = {}
            for export in (50, 0):
                proc, addr = gateway(work, f"127.0.0.1:{port}", export)
                procs.append(proc)
                load(addr)
                gws[export] = addr
            # Interleaved rounds, so a drift of the machine's speed falls on both.
            results = {50: [], 0: []}
            for _ in range(3):
                for export, addr in gws.items():
                    results[export].append(scrape(addr))
            best = {e: min(r, key=lambda x: x[0]) for e, r in results.items()}
            print(f"{CLIENTS:,} clients × 2 methods, answers in 3 formats; {SCRAPES} scrapes × 3 rounds, best round")
            print()
            print("| export_clients | client series | /metrics bytes | lines | median ms | p90 ms | median vs 0 |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            for export in (0, 50):
                med, p90, size, lines, series = best[export]
                print(f"| {export} | {series} | {size:,} | {lines:,} | {med * 1e3:.2f} | {p90 * 1e3:.2f} | "
                      f"{med / best[0][0]:.2f}× |")
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
