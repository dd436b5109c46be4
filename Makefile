# protogate — the commands a newcomer needs. `make demo` runs the gateway on an embedded demo;
# `make test` runs every test (it sets up the Python reference oracle itself).

CARGO ?= cargo
VENV := .venv
PYTHON := $(VENV)/bin/python
ORACLE_REQ := tests/oracle/requirements.txt
DEPLOY_REQ := tests/deploy/requirements.txt

.PHONY: demo test build lint clients-env bench bench-ratios bench-codecs bench-e2e bench-ir bench-ir-transcoder bench-burst bench-rate-limit bench-scrape soak oracle-env grpcgw deploy-env deploy-check clean

demo:
	$(CARGO) run --release -p protogate -- demo

build:
	$(CARGO) build --release -p protogate

# The Python `protobuf` package (json_format) is the reference the transcoder is tested against.
$(VENV)/.installed: $(ORACLE_REQ)
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r $(ORACLE_REQ)
	touch $@

oracle-env: $(VENV)/.installed

# make deploy-check's Python tools (kubernetes-validate with its bundled schemas, yamllint,
# hadolint), in the same venv.
$(VENV)/.deploy-installed: $(DEPLOY_REQ) $(VENV)/.installed
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r $(DEPLOY_REQ)
	touch $@

deploy-env: $(VENV)/.deploy-installed

# grpc-gateway (Debian's 1.6.4, offline) for the library test service: the differential test's peer.
grpcgw:
	tests/grpcgw/build.sh

# The client tests' Node packages (@connectrpc/connect-node and what it needs), exactly as
# tests/clients/package-lock.json pins them.
tests/clients/node_modules/.package-lock.json: tests/clients/package-lock.json tests/clients/package.json
	cd tests/clients && npm ci --no-audit --no-fund --loglevel=error

clients-env: tests/clients/node_modules/.package-lock.json

test: oracle-env grpcgw clients-env
	PROTOGATE_REQUIRE_ORACLES=1 PROTOGATE_ORACLE_PYTHON=$(abspath $(PYTHON)) $(CARGO) test --workspace
	# OpenTelemetry export is a cargo feature: its config and its collector test.
	$(CARGO) test -p protogate --features otel --lib --test cli -- otel
	$(CARGO) build -p protogate
	PROTOGATE_REQUIRE_ORACLES=1 $(MAKE) deploy-check
	tests/demo.sh target/debug/protogate
	tests/readme.sh
	python3 tests/tools/module_cycles.py
	$(MAKE) fuzz-smoke

# deploy/ (the container, Kubernetes, systemd, the Grafana dashboard, the alerts) checked
# offline in a few seconds, against the debug gateway's own /metrics: tests/deploy/check.py.
# promtool and systemd-analyze come from Debian's prometheus and systemd packages (.ci/run).
deploy-check: deploy-env
	$(CARGO) build -p protogate
	$(PYTHON) tests/deploy/check.py target/debug/protogate

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Workload bodies come from bench/workload.py (bench/README.md), written to target/bench-bodies.
bench:
	python3 bench/gen_bodies.py target/bench-bodies
	$(CARGO) bench -p protogate-transcode --bench transcode
	$(CARGO) bench -p protogate-transcode --bench allocs

# The four directions as shares of the floor, timed interleaved with it (ratios that repeat on
# a machine whose speed drifts): crates/transcode/examples/ratios.rs.
bench-ratios:
	python3 bench/gen_bodies.py target/bench-bodies
	$(CARGO) run --release -q -p protogate-transcode --example ratios

# Python's codecs on the same workloads: orjson, msgpack and protobuf from and to
# Python objects, MB/s per JSON byte, to set beside `make bench`'s transcoder figures.
bench-codecs: oracle-env
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r bench/codecs-requirements.txt
	python3 bench/gen_bodies.py target/bench-bodies
	$(PYTHON) bench/codecs.py target/bench-bodies

# End to end on loopback: bench-backend (CPU 0) + the release gateway (CPU 1), loaded by wrk
# (HTTP/1.1) and h2load (HTTP/2) on CPU 0, direct gRPC as the floor; ~4 min (E2E_DURATION=1: ~1.5).
# Settings: bench/e2e.sh's header. Writes target/bench-e2e/results.md.
bench-e2e:
	bench/e2e.sh

# The gateway's work per request counted, not timed (for A/B comparisons on noisy machines):
# callgrind instructions and strace system calls per EchoOrder request, HTTP/1.1 and HTTP/2,
# JSON and protobuf; ~4 min. Settings: bench/ir.sh's header (IR_GATEWAY, IR_TLS, IR_ENDPOINTS,
# IR_AUTH, IR_RATE_LIMIT).
bench-ir:
	bench/ir.sh

# What a rate limit adds to a request's latency: no limit, per-replica budgets, budgets in a
# local redis-server; one and 16 connections (bench/rate_limit.sh; ~2 min).
bench-rate-limit:
	bench/rate_limit.sh

# What the per-client series cost a Prometheus scrape: /metrics with 10,000 clients and
# export_clients 50 against export_clients 0, interleaved (bench/scrape.py; ~1 min).
bench-scrape:
	python3 bench/scrape.py

# The transcoder's instructions per JSON byte (callgrind), floor and four directions, for A/B
# comparisons that code placement does not move (bench/transcoder_ir.sh; ~1 min).
bench-ir-transcoder:
	bench/transcoder_ir.sh

# Memory under a burst: 200 concurrent 4 MB JSON bodies over HTTP/1.1, then over
# one HTTP/2 connection; the gateway's peak RSS and RSS for 30 s after (bench/burst.py, h2load).
bench-burst:
	$(CARGO) build --release -p protogate -p protogate-tests --bin protogate --bin bench-backend
	python3 bench/burst.py
	python3 bench/burst.py --h2

# Fault and soak test: the release gateway under mixed unary and streaming load in
# every format while its upstream is killed and restarted, sent GOAWAY and hangs one call in ten;
# checks every answer, RSS and file descriptors (tests/src/bin/soak.rs). Not in `make test`.
# 20 min by default; `SOAK_SECS=60 make soak` for a short run. Writes target/soak/summary.md.
SOAK_SECS ?= 1200
soak:
	$(CARGO) build --release -p protogate
	$(CARGO) build --release -p protogate-tests --bin soak
	SOAK_SECS=$(SOAK_SECS) target/release/soak

# Fuzzing (fuzz/README.md): every cargo-fuzz target for FUZZ_SECS seconds (default 600), one
# after another; installs cargo-fuzz when missing. `fuzz-smoke` (part of `make test`): a few
# seconds each on an unoptimised build.
.PHONY: fuzz fuzz-smoke
FUZZ_SECS ?= 600
FUZZ_SMOKE_SECS ?= 3
fuzz:
	fuzz/fuzz.sh $(FUZZ_SECS)

fuzz-smoke:
	FUZZ_SMOKE=1 fuzz/fuzz.sh $(FUZZ_SMOKE_SECS)

clean:
	$(CARGO) clean
	rm -rf $(VENV)
