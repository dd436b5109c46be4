#!/usr/bin/env python3
"""Memory under a burst of large bodies (BENCHMARKS.md, "Memory under a burst"), for
`make bench-burst`.

Starts bench-backend and the release gateway on 127.0.0.1, sends N concurrent ~4 MB JSON
EchoRecords bodies (h2load: N HTTP/1.1 connections, or one HTTP/2 connection with N streams),
samples the gateway's VmRSS every 20 ms during the burst and every second after it, and prints
one line per run: the answers by status, peak RSS, RSS 15 s and 30 s after, and how long RSS
took to fall under 64 MiB. Gateway flags after `--`; the environment passes through (e.g.
MALLOC_ARENA_MAX=2).

    bench/burst.py [--gateway target/release/protogate] [--requests 200] [--h2] [-- flags...]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_for_line(path, pattern, proc, limit=60):
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{proc.args[0]} exited: {open(path).read()}")
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m.group(1)
        time.sleep(0.05)
    sys.exit(f"no {pattern!r} in {path} within {limit}s")


def body_file(directory):
    """A RecordList JSON body of just under 4 MB (the default max_body_bytes is 4 MiB): the
    records of bench/workload.py's RecordList_10000, repeated."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import workload  # noqa: E402

    one = workload.record_list(10000)
    records = []
    while len(json.dumps({"records": records + one["records"]})) < 3_950_000:
        records += one["records"]
    step = 100
    while len(json.dumps({"records": records + one["records"][:step]})) < 3_990_000:
        records += one["records"][:step]
    path = os.path.join(directory, "burst.json")
    with open(path, "w") as f:
        json.dump({"records": records}, f)
    return path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gateway", default=os.path.join(ROOT, "target/release/protogate"))
    p.add_argument("--backend", default=os.path.join(ROOT, "target/release/bench-backend"))
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--h2", action="store_true", help="one HTTP/2 connection, N streams")
    p.add_argument("--after", type=int, default=30, help="seconds to watch RSS after")
    p.add_argument("flags", nargs="*", help="gateway flags (after --)")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="burst-")
    body = body_file(tmp)
    size = os.path.getsize(body)
    procs = []
    try:
        be_out = os.path.join(tmp, "backend.out")
        backend = subprocess.Popen([a.backend, "--listen", "127.0.0.1:0"],
                                   stdout=open(be_out, "w"), stderr=subprocess.DEVNULL)
        procs.append(backend)
        be_addr = wait_for_line(be_out, r"listening on ([0-9.]+:[0-9]+)", backend)
        gw_log = os.path.join(tmp, "gateway.log")
        gateway = subprocess.Popen(
            [a.gateway, "serve", "--proto", os.path.join(ROOT, "proto/bench/bench.proto"),
             "-I", os.path.join(ROOT, "proto/bench"), "--upstream", f"http://{be_addr}",
             "--listen", "127.0.0.1:0", "--downgrade-log-interval", "60s", *a.flags],
            stdout=subprocess.DEVNULL, stderr=open(gw_log, "w"))
        procs.append(gateway)
        gw_addr = wait_for_line(gw_log, r"listening on http://([0-9.]+:[0-9]+)", gateway)
        idle = rss_kib(gateway.pid)

        peak = [idle]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kib(gateway.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        n = a.requests
        cmd = ["h2load", "-n", str(n), "-m", str(n) if a.h2 else "1",
               "-c", "1" if a.h2 else str(n), "-d", body,
               "-H", "content-type: application/json",
               f"http://{gw_addr}/bench.v1.BenchService/EchoRecords"]
        if not a.h2:
            cmd.insert(1, "--h1")
        started = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
        burst_s = time.time() - started
        done.set()
        sampler.join()
        codes = re.search(r"status codes: (.*)", out)
        codes = codes.group(1) if codes else out[-300:]
        failed = re.search(r"requests: .*", out)
        codes = f"{failed.group(0) if failed else ''}; {codes}"
        after = {}
        under_64 = None
        t0 = time.time()
        while time.time() - t0 < a.after:
            time.sleep(1)
            s = round(time.time() - t0)
            rss = rss_kib(gateway.pid)
            after[s] = rss
            if under_64 is None and rss < 64 * 1024:
                under_64 = s
        mib = lambda k: f"{k / 1024:.0f}"
        near = lambda s: after[min(after, key=lambda k: abs(k - s))] if after else 0
        print(f"{'h2 1 conn' if a.h2 else 'h1'} {n} x {size / 1e6:.1f} MB {' '.join(a.flags) or '(defaults)'}"
              f" MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '-')}: {codes.strip()};"
              f" burst {burst_s:.1f} s; RSS idle {mib(idle)} MiB, peak {mib(peak[0])},"
              f" +15 s {mib(near(15))}, +30 s {mib(near(30))};"
              f" under 64 MiB after {under_64 if under_64 is not None else f'>{a.after}'} s")
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
