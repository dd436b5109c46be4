"""The benchmark messages of bench/README.md (proto/bench/bench.proto), as plain dicts in canonical
proto3 JSON form (lowerCamelCase keys, int64 as strings, default values omitted).  Pure Python, no
dependencies.  A copy of the shared peers harness's generator, which every gateway's figures are
measured with; this copy is what the repository runs.  The differential test
`bench_copies_agree_with_shared` (crates/transcode/tests/differential/bench_bodies.rs) checks that
both still give the same messages when the shared material is beside the repository."""
import random

RECORD_TS = "2026-08-31T10:20:30.123456+08:00"
LOG_SEED = 20261025
LEVELS = ["DEBUG", "INFO", "WARN", "ERROR"]
SERVICES = ["api-gateway", "auth", "billing", "catalog", "checkout", "inventory", "search", "shipping"]
STATUSES = [200, 201, 204, 301, 400, 404, 500, 503]
WORDS = ("request served from cache upstream timeout retry user session token refreshed order "
         "created payment accepted declined inventory reserved released shipment queued label printed "
         "search index updated query slow fast connection reset pool exhausted healthy degraded latency "
         "budget exceeded within limits record written read deleted").split()


def _drop_defaults(d):
    return {k: v for k, v in d.items() if v not in (0, 0.0, "", "0", False, None, [])}


def order():
    items = [_drop_defaults({"skuId": str(1000 + i), "quantity": i + 1, "price": 10.0 * i}) for i in range(3)]
    return _drop_defaults({"orderId": "12345", "userId": "67890", "amount": 99.99,
                           "timestamp": "1718000000000", "items": items})


def record(i):
    return _drop_defaults({"id": str(i), "name": f"record-{i}", "price": round(0.1 + i * 0.05, 2),
                           "cat": ["a", "b", "c"][i % 3], "flag": i % 2 == 1, "ts": RECORD_TS})


def record_list(n):
    return {"records": [record(i) for i in range(n)]}


def log_batch(n, seed=LOG_SEED):
    rng = random.Random(seed)
    events = []
    for i in range(n):
        ev = {
            "ts": str(1761350400000 + i * 37),
            "level": rng.choice(LEVELS),
            "service": rng.choice(SERVICES),
            "traceId": "%032x" % rng.getrandbits(128),
            "status": rng.choice(STATUSES),
            "latencyMs": rng.uniform(0.0, 250.0),
            "bytes": str(rng.randint(0, 65536)),
            "hit": rng.random() < 0.5,
        }
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
        ev["message"] = " ".join(words).capitalize() + "."
        events.append(_drop_defaults(ev))
    return {"events": events}
