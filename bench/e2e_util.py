#!/usr/bin/env python3
"""Helpers of bench/e2e.sh (standard library only).

  e2e_util.py frame IN OUT             OUT = IN with the 5-byte gRPC frame prefix (uncompressed)
  e2e_util.py unframe IN OUT           OUT = the one message of the gRPC frame in IN
  e2e_util.py same-json EXPECTED GOT   exit 0 when both files hold the same JSON value: same keys,
                                       same strings and bools, numbers equal as doubles
                                       (10 == 10.0); else print the first difference, exit 1
  e2e_util.py pct LOGFILE              latency percentiles from an h2load --log-file
                                       (start_us TAB status TAB elapsed_us, one line per request):
                                       prints `n=… p50_us=… p99_us=… non2xx=…`
  e2e_util.py table TSV                the markdown tables of results.md from the runs in TSV
"""
import json
import math
import struct
import sys


def frame(src, dst):
    with open(src, "rb") as f:
        msg = f.read()
    with open(dst, "wb") as f:
        f.write(b"\x00" + struct.pack(">I", len(msg)) + msg)


def unframe(src, dst):
    with open(src, "rb") as f:
        data = f.read()
    if len(data) < 5 or data[0] != 0:
        sys.exit(f"{src}: not an uncompressed gRPC frame ({len(data)} bytes)")
    (n,) = struct.unpack(">I", data[1:5])
    if len(data) != 5 + n:
        sys.exit(f"{src}: frame says {n} bytes, {len(data) - 5} follow (one message expected)")
    with open(dst, "wb") as f:
        f.write(data[5:])


def diff(a, b, path="$"):
    """The first difference between two JSON values, or None."""
    num = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return None if (type(a) is type(b) and a == b) else f"{path}: {a!r} != {b!r}"
    if isinstance(a, num) and isinstance(b, num):
        return None if float(a) == float(b) else f"{path}: {a!r} != {b!r}"
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r:.60} != {type(b).__name__} {b!r:.60}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())} differ"
        for k in a:
            d = diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r:.60} != {b!r:.60}"


def same_json(expected, got):
    with open(expected, "rb") as f:
        e = json.load(f)
    with open(got, "rb") as f:
        try:
            g = json.load(f)
        except ValueError as err:
            print(f"{got}: not JSON: {err}")
            return 1
    d = diff(e, g)
    if d:
        print(f"expected {expected}, got {got}: {d}")
        return 1
    return 0


def pct(logfile):
    lat, non2xx = [], 0
    with open(logfile) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            if not parts[1].startswith("2"):
                non2xx += 1
            lat.append(int(parts[2]))
    lat.sort()

    def p(q):  # nearest rank
        return lat[max(0, math.ceil(q / 100 * len(lat)) - 1)] if lat else 0

    print(f"n={len(lat)} p50_us={p(50)} p99_us={p(99)} non2xx={non2xx}")


def fnum(v, digits):
    try:
        return f"{float(v):,.{digits}f}"
    except ValueError:
        return v


def flagged(row):
    return any(w in row["note"] for w in ("other processes", "exit"))


def table(tsv):
    with open(tsv) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]
    print("| workload | client | format | req/s | p50 ms | p99 ms | gateway CPU ms / 1k req "
          "| gateway CPU % | gateway peak RSS MiB | errors |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        flag = " ⚠" if flagged(r) else ""
        print(f"| {r['workload']} | {r['client']} | {r['format']} | {fnum(r['rps'], 0)}{flag} "
              f"| {fnum(r['p50_ms'], 2)} | {fnum(r['p99_ms'], 2)} | {fnum(r['gw_cpu_ms_per_1k'], 1)} "
              f"| {fnum(r['gw_cpu_pct'], 0)} | {fnum(r['gw_rss_mib'], 1)} | {r['errors']} |")
    if any(flagged(r) for r in rows):
        print()
        print("⚠: other processes used the CPU during that run, or the load tool failed (see the "
              "note below).")
    print()
    print("Per-run details (backend = bench-backend raw mode; load = wrk or h2load; CPU 0 runs "
          "both; other = task CPU on the machine not used by gateway, backend or load):")
    print()
    print("| workload | client | format | requests | seconds | backend CPU ms / 1k req | load CPU s "
          "| CPU 0 busy % | CPU 1 busy % | other CPU % | note |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['client']} | {r['format']} | {fnum(r['requests'], 0)} "
              f"| {fnum(r['wall_s'], 2)} | {fnum(r['be_cpu_ms_per_1k'], 1)} | {fnum(r['load_cpu_s'], 2)} "
              f"| {fnum(r['cpu0_pct'], 0)} | {fnum(r['cpu1_pct'], 0)} | {fnum(r['other_pct'], 0)} "
              f"| {r['note']} |")
    print()
    print("Protobuf pass-through ÷ direct gRPC (req/s; direct = h2load straight to the backend "
          "with the h2 client's settings):")
    print()
    print("| workload | direct gRPC req/s | wrk h1 protobuf ÷ direct | h2load h2 protobuf ÷ direct |")
    print("|---|---:|---:|---:|")
    by = {(r["workload"], r["client"], r["format"]): r for r in rows}
    for wl in dict.fromkeys(r["workload"] for r in rows):
        d = by.get((wl, "direct gRPC", "protobuf"))
        if not d:
            continue
        cells = []
        for client in ("wrk h1", "h2load h2"):
            g = by.get((wl, client, "protobuf"))
            try:
                cells.append(f"{float(g['rps']) / float(d['rps']):.2f}")
            except (TypeError, ValueError, ZeroDivisionError):
                cells.append("-")
        print(f"| {wl} | {fnum(d['rps'], 0)} | {cells[0]} | {cells[1]} |")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "frame":
        frame(*args)
    elif cmd == "unframe":
        unframe(*args)
    elif cmd == "same-json":
        sys.exit(same_json(*args))
    elif cmd == "pct":
        pct(*args)
    elif cmd == "table":
        table(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
