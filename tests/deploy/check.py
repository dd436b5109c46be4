#!/usr/bin/env python3
"""`make deploy-check`: deploy/ checked offline, in seconds.

- kubernetes: `kubectl kustomize` renders the base and the example overlay (without kubectl,
  said loudly: each file on its own, and the overlay's references); every object is validated
  against the Kubernetes OpenAPI schemas bundled by kubernetes-validate (strict: unknown
  fields are errors), the ServiceMonitor (a CRD they lack) against the fields of its CRD this
  file lists; then the objects against each other (selectors, ports, the ConfigMap's keys and
  the config's paths, the grace period against the drain, the NetworkPolicy against the
  upstreams).
- yamllint on deploy/ and tests/deploy/.
- gateway: the real binary serves the overlay's protogate.toml and schema, laid out as the pod
  mounts them, in front of `protogate demo --backend-only`; requests in every format, one shed
  (a second gateway on the same files, max_concurrent_requests = 1) and one to a stopped
  upstream; /metrics scraped; then SIGHUP, which the gateway must live through if the
  systemd unit has ExecReload (kill -HUP), and may only die of if it has not.
- observability: the Grafana JSON parses and hangs together; every metric name, label and
  label value the dashboard and alerts.yaml use is in that /metrics output; promtool parses
  every query and runs the alert rules' unit tests (tests/deploy/alerts_*test.yaml).
- systemd: `systemd-analyze verify` and `security --offline` on the unit; its stop timeout
  against the drain; its hardening.
- docker: hadolint, and the Dockerfile's stages, user, stop signal, port, command, labels and
  revision; .dockerignore keeps what the build reads (a copy of the context resolves the
  workspace with `cargo tree --locked --offline`).

A tool that is missing (promtool, systemd-analyze, yamllint, hadolint) is a loud skip, or a
failure with PROTOGATE_REQUIRE_ORACLES=1 (make test). Talks only to 127.0.0.1; stops only the
processes it started, by PID.

Usage: tests/deploy/check.py [path/to/protogate]   (default target/debug/protogate)
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
BASE = KUBE / "base"
OVERLAY = KUBE / "overlays" / "example"
EXAMPLES = KUBE / "examples"
UNIT = DEPLOY / "systemd" / "protogate.service"
DOCKERFILE = DEPLOY / "Dockerfile"
DASHBOARD = DEPLOY / "grafana" / "protogate.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yaml"
HERE = ROOT / "tests" / "deploy"

REQUIRE = os.environ.get("PROTOGATE_REQUIRE_ORACLES") == "1"
# Kubernetes 1.30 (the manifests' newest fields, matchLabelKeys and
# unhealthyPodEvictionPolicy, are on by default since 1.27) and the newest kubernetes-validate
# bundles.
KUBE_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]
# Labels Prometheus adds to every scraped series (the Operator: namespace, pod, service, …).
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
# Series Prometheus makes itself, not the gateway.
PROMETHEUS_SERIES = {"up"}
DEADLINE = 20.0  # seconds for a process to say it is listening, or to exit

results = {"passed": 0, "failed": 0, "skipped": 0}


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def check(name):
    """Runs the decorated function as one named check: ok, FAIL with its reason, or skip."""

    def wrap(fn):
        def runner(*args):
            t = time.monotonic()
            try:
                fn(*args)
            except Skip as e:
                if REQUIRE:
                    results["failed"] += 1
                    print(f"FAIL {name}: {e} (PROTOGATE_REQUIRE_ORACLES=1: no skipping)")
                else:
                    results["skipped"] += 1
                    print(f"SKIP {name}: {e}")
                return
            except Fail as e:
                results["failed"] += 1
                print(f"FAIL {name}: {e}")
                return
            except Exception:
                results["failed"] += 1
                print(f"FAIL {name}: unexpected error")
                traceback.print_exc()
                return
            results["passed"] += 1
            print(f"ok   {name} ({time.monotonic() - t:.2f} s)")

        return runner

    return wrap


def wait_until(condition, what):
    """Polls `condition` (every 10 ms) until it returns something true, for at most DEADLINE;
    fails naming `what` when the deadline passes. Returns what `condition` returned."""
    deadline = time.monotonic() + DEADLINE
    while True:
        value = condition()
        if value:
            return value
        require(time.monotonic() < deadline, f"{what}: not within {DEADLINE:g} s")
        time.sleep(0.01)


def require(cond, why):
    if not cond:
        raise Fail(why)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def duration_s(text):
    """A protogate duration (`500ms`, `2s`, `1.5m`, `1h`, a bare number of seconds)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s|m|h)?\s*", str(text))
    require(m, f"not a duration: {text!r}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def readme_default(key):
    """A TOML key's default, from the configuration reference table (docs/configuration.md)."""
    for line in (ROOT / "docs" / "configuration.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[2] == f"`{key}`":
            return cells[3].strip("`")
    raise Fail(f"docs/configuration.md's configuration reference has no row for {key}")


# --- Kubernetes -----------------------------------------------------------------------------

# The ServiceMonitor fields these manifests may use (monitoring.coreos.com/v1, the Prometheus
# Operator's CRD); anything else is a typo here.
DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": LABELS,
                "annotations": LABELS,
            },
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "targetLabels": {"type": "array", "items": {"type": "string"}},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "sampleLimit": {"type": "integer", "minimum": 0},
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array"}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "targetPort": {"type": ["string", "integer"]},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                            "honorLabels": {"type": "boolean"},
                            "honorTimestamps": {"type": "boolean"},
                            "relabelings": {"type": "array"},
                            "metricRelabelings": {"type": "array"},
                            "params": {"type": "object"},
                        },
                    },
                },
            },
        },
    },
}


def load_docs(text, where):
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise Fail(f"{where}: {e}")


def validate_object(obj, where):
    kind = obj.get("kind")
    if kind == "ServiceMonitor":
        try:
            jsonschema.validate(obj, SERVICE_MONITOR)
        except jsonschema.ValidationError as e:
            raise Fail(f"{where}: ServiceMonitor: {e.message} at {list(e.absolute_path)}")
        return
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = "/".join(str(p) for p in e.path)
            raise Fail(f"{where}: {kind} {obj['metadata'].get('name')} (Kubernetes {version}): {e.message} at {path}")
        except kubernetes_validate.SchemaNotFoundError:
            raise Fail(f"{where}: no Kubernetes {version} schema for {obj.get('apiVersion')} {kind}")


def kustomize_build(directory):
    """`kubectl kustomize DIR`, or None when there is no kubectl."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    r = run([kubectl, "kustomize", str(directory)])
    require(r.returncode == 0, f"kubectl kustomize {directory.relative_to(ROOT)}: {r.stderr.strip()}")
    return load_docs(r.stdout, f"kubectl kustomize {directory.relative_to(ROOT)}")


def kustomization(directory):
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def fallback_build(directory):
    """Without kubectl: the kustomization's own files validated one by one, every reference
    checked to resolve, and the objects put together as far as is safe without kustomize (the
    generated ConfigMap from its files, the overlay's namespace; patches are not applied)."""
    k = kustomization(directory)
    objects = []
    for res in k.get("resources", []):
        path = (directory / res).resolve()
        require(path.exists(), f"{directory.relative_to(ROOT)}: resource {res} does not exist")
        if path.is_dir():
            require((path / "kustomization.yaml").exists(), f"{res}: a directory without kustomization.yaml")
            objects += fallback_build(path)
        else:
            for obj in load_docs(path.read_text(), str(path.relative_to(ROOT))):
                validate_object(obj, str(path.relative_to(ROOT)))
                objects.append(obj)
    for gen in k.get("configMapGenerator", []):
        data = {}
        for f in gen.get("files", []):
            require((directory / f).exists(), f"{directory.relative_to(ROOT)}: configMapGenerator file {f} does not exist")
            data[f] = (directory / f).read_text()
        existing = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == gen["name"]]
        if gen.get("behavior") == "merge":
            require(existing, f"{directory.relative_to(ROOT)}: merges into ConfigMap {gen['name']}, which the base lacks")
            existing[0]["data"].update(data)
        else:
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data}
            validate_object(cm, f"{directory.relative_to(ROOT)} configMapGenerator")
            objects.append(cm)
    for p in k.get("patches", []):
        path = directory / p["path"]
        require(path.exists(), f"{directory.relative_to(ROOT)}: patch {p['path']} does not exist")
        for patch in load_docs(path.read_text(), str(path.relative_to(ROOT))):
            target = [o for o in objects if o["kind"] == patch["kind"] and o["metadata"]["name"] == patch["metadata"]["name"]]
            require(target, f"{path.relative_to(ROOT)}: patches {patch['kind']} {patch['metadata']['name']}, which the base lacks")
    for image in k.get("images", []):
        used = [c["image"] for o in objects if o["kind"] == "Deployment" for c in o["spec"]["template"]["spec"]["containers"]]
        require(image["name"] in used, f"{directory.relative_to(ROOT)}: images: {image['name']} names no container's image")
    if "namespace" in k:
        for o in objects:
            if o["kind"] != "Namespace":
                o["metadata"]["namespace"] = k["namespace"]
    return objects


def one(objects, kind, where):
    found = [o for o in objects if o["kind"] == kind]
    require(len(found) == 1, f"{where}: {len(found)} {kind} objects, expected one")
    return found[0]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def config_files(objects, where):
    """The files the pod sees under /etc/protogate: the ConfigMap's keys at their items' paths."""
    dep = one(objects, "Deployment", where)
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mount = [m for m in container["volumeMounts"] if m["mountPath"] == "/etc/protogate"]
    require(mount, f"{where}: nothing mounted at /etc/protogate, where the image's command reads its config")
    volume = [v for v in pod["volumes"] if v["name"] == mount[0]["name"]][0]
    cms = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]]
    require(cms, f"{where}: volume {volume['name']} names ConfigMap {volume['configMap']['name']}, which is not there")
    data = cms[0].get("data", {})
    items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
    files = {}
    for item in items:
        require(item["key"] in data, f"{where}: the volume mounts key {item['key']}, which the ConfigMap lacks")
        files[item["path"]] = data[item["key"]]
    require("protogate.toml" in files, f"{where}: no protogate.toml in /etc/protogate")
    return files


def check_objects(objects, where):
    """The objects against each other and against the issue's requirements."""
    dep = one(objects, "Deployment", where)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    require(matches(dep["spec"]["selector"]["matchLabels"], pod_labels), f"{where}: the Deployment's selector misses its pods")
    require(dep["spec"].get("replicas") == 3, f"{where}: the Deployment should run 3 replicas")
    pod = dep["spec"]["template"]["spec"]
    require(len(pod["containers"]) == 1, f"{where}: one container expected")
    c = pod["containers"][0]
    require(c.get("args", [])[:3] == ["serve", "--config", "/etc/protogate/protogate.toml"] or "args" not in c,
            f"{where}: the container's args are not the image's serve --config /etc/protogate/protogate.toml")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    require(ports.get("http") == 8080, f"{where}: the main port should be containerPort 8080 named http")
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    require(psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, f"{where}: runAsNonRoot is not set")
    require(csc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem is not set")
    require(csc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation is not false")
    require(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: capabilities are not all dropped")
    seccomp = csc.get("seccompProfile") or psc.get("seccompProfile") or {}
    require(seccomp.get("type") == "RuntimeDefault", f"{where}: seccomp is not RuntimeDefault")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        require(get.get("path") == path and get.get("port") in ("http", 8080), f"{where}: {probe} should GET {path} on the main port")
    res = c.get("resources", {})
    for k in ("cpu", "memory"):
        require(k in res.get("requests", {}) and k in res.get("limits", {}), f"{where}: {k} request and limit expected")
    spread = [t for t in pod.get("topologySpreadConstraints", []) if t["topologyKey"] == "kubernetes.io/hostname"]
    require(spread and matches(spread[0]["labelSelector"]["matchLabels"], pod_labels),
            f"{where}: no topology spread across nodes (kubernetes.io/hostname) selecting the pods")

    # The drain fits in the grace period: on SIGTERM the gateway serves on for drain_delay,
    # then lets requests in flight finish for up to upstream_timeout.
    files = config_files(objects, where)
    try:
        config = tomllib.loads(files["protogate.toml"])
    except tomllib.TOMLDecodeError as e:
        raise Fail(f"{where}: protogate.toml: {e}")
    drain = duration_s(config.get("drain_delay", readme_default("drain_delay")))
    upstream_timeout = duration_s(config.get("upstream_timeout", readme_default("upstream_timeout")))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    require(grace > drain + upstream_timeout,
            f"{where}: terminationGracePeriodSeconds {grace} does not exceed drain_delay {drain:g} s + upstream_timeout {upstream_timeout:g} s")
    for p in config.get("protos", []) + config.get("descriptor_sets", []):
        require(p in files, f"{where}: protogate.toml names {p}, which is not mounted beside it")
    require(str(config.get("listen", "")).endswith(":8080") and not str(config["listen"]).startswith("127."),
            f"{where}: protogate.toml must listen on every interface's port 8080 (listen = \":8080\"), not {config.get('listen')!r}")

    svc = one(objects, "Service", where)
    require(matches(svc["spec"]["selector"], pod_labels), f"{where}: the Service's selector misses the pods")
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    for p in svc_ports.values():
        require(p["targetPort"] in ports or p["targetPort"] in ports.values(), f"{where}: Service port {p['name']} targets no container port")

    pdb = one(objects, "PodDisruptionBudget", where)
    require(matches(pdb["spec"]["selector"]["matchLabels"], pod_labels), f"{where}: the PodDisruptionBudget selects no pod")
    hpa = one(objects, "HorizontalPodAutoscaler", where)
    ref = hpa["spec"]["scaleTargetRef"]
    require((ref["kind"], ref["name"]) == ("Deployment", dep["metadata"]["name"]), f"{where}: the HPA scales something else")
    require(hpa["spec"]["minReplicas"] >= 3 and hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"], f"{where}: HPA bounds")
    require(any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]), f"{where}: the HPA does not scale on CPU")

    for sm in (o for o in objects if o["kind"] == "ServiceMonitor"):
        require(matches(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]), f"{where}: the ServiceMonitor selects no Service")
        for e in sm["spec"]["endpoints"]:
            require(e["port"] in svc_ports, f"{where}: the ServiceMonitor scrapes port {e['port']}, which the Service lacks")
            require(e.get("path") == "/metrics", f"{where}: the ServiceMonitor should scrape /metrics")
    for np in (o for o in objects if o["kind"] == "NetworkPolicy"):
        require(matches(np["spec"]["podSelector"]["matchLabels"], pod_labels), f"{where}: the NetworkPolicy selects no pod")
        ingress_ports = {p["port"] for rule in np["spec"].get("ingress", []) for p in rule.get("ports", [])}
        require(ingress_ports == {8080}, f"{where}: the NetworkPolicy should let in port 8080 only, not {sorted(ingress_ports)}")
        egress_ports = {(p.get("protocol", "TCP"), p["port"]) for rule in np["spec"].get("egress", []) for p in rule.get("ports", [])}
        upstreams = [config.get("upstream")] + [s.get("upstream") for s in config.get("services", {}).values()]
        for u in filter(None, upstreams):
            m = re.match(r"^http://[^/:]+:(\d+)", u)
            require(m, f"{where}: upstream {u} has no port")
            require(("TCP", int(m.group(1))) in egress_ports, f"{where}: the NetworkPolicy lets no traffic out to upstream {u}")
        require({("UDP", 53), ("TCP", 53)} <= egress_ports, f"{where}: the NetworkPolicy does not let DNS out")
    return files


@check("kubernetes: base and overlay render, validate and agree")
def check_kubernetes(state):
    require((BASE / "shop.proto").read_text() == (ROOT / "proto/demo/v1/shop.proto").read_text(),
            "deploy/kubernetes/base/shop.proto is not a copy of proto/demo/v1/shop.proto: cp proto/demo/v1/shop.proto deploy/kubernetes/base/")
    rendered = {}
    for directory in (BASE, OVERLAY):
        where = str(directory.relative_to(ROOT))
        objects = kustomize_build(directory)
        if objects is None:
            state["no_kubectl"] = True
            objects = fallback_build(directory)
        else:
            for obj in objects:
                validate_object(obj, f"{where} (rendered)")
        rendered[directory] = objects
        state.setdefault("configs", {})[where] = check_objects(objects, where)
    overlay = rendered[OVERLAY]
    kinds = sorted(o["kind"] for o in overlay)
    for kind in ("ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Namespace", "NetworkPolicy",
                 "PodDisruptionBudget", "Service", "ServiceMonitor"):
        require(kind in kinds, f"the overlay renders no {kind}")
    ns = kustomization(OVERLAY)["namespace"]
    require(all(o["metadata"].get("namespace") == ns for o in overlay if o["kind"] != "Namespace"),
            f"the overlay leaves objects outside namespace {ns}")
    if not state.get("no_kubectl"):
        image = one(overlay, "Deployment", "overlay")["spec"]["template"]["spec"]["containers"][0]["image"]
        want = kustomization(OVERLAY)["images"][0]
        require(image == f"{want['newName']}:{want['newTag']}", f"the overlay's image is {image}")

    # The examples: the requests-per-second HPA, and the adapter rule that makes its metric.
    hpa = load_docs((EXAMPLES / "horizontalpodautoscaler-requests.yaml").read_text(), "examples")[0]
    validate_object(hpa, "deploy/kubernetes/examples/horizontalpodautoscaler-requests.yaml")
    wanted = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    values = yaml.safe_load((EXAMPLES / "prometheus-adapter-values.yaml").read_text())
    made = {r["name"]["as"] for r in values["rules"]["custom"]}
    require(wanted and wanted <= made, f"the example HPA wants {sorted(wanted)}, the adapter rule makes {sorted(made)}")
    state["adapter_queries"] = [r["seriesQuery"] for r in values["rules"]["custom"]]
    if state.get("no_kubectl"):
        # kubectl is on this project's machines; elsewhere there is no registry to get a
        # current one from (Debian's is 1.20), so this is said loudly, not failed.
        print("NOTE kubernetes: no kubectl: the base's and the overlay's files were validated one by one and their "
              "references checked, but the overlay was not rendered (its patches not applied)")


@check("yamllint deploy/ tests/deploy/")
def check_yamllint(state):
    exe = Path(sys.executable).parent / "yamllint"
    if not exe.exists():
        raise Skip("yamllint is not installed (make deploy-env)")
    r = run([str(exe), "--strict", "-c", str(HERE / "yamllint.yaml"), str(DEPLOY), str(HERE)])
    require(r.returncode == 0, "\n" + r.stdout + r.stderr)


# --- The gateway's /metrics -----------------------------------------------------------------

class Proc:
    """A child process whose stderr goes to a file; stopped by PID."""

    def __init__(self, args, work, name):
        self.err_path = work / f"{name}.err"
        self.err = open(self.err_path, "w")
        self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL, cwd=work)
        self.name = name

    def wait_listening(self):
        def listening():
            m = re.search(r"listening on http://(127\.0\.0\.1:\d+)", self.err_path.read_text())
            if not m and self.p.poll() is not None:
                raise Fail(f"{self.name} exited ({self.p.returncode}) before listening: {self.err_path.read_text()[-2000:]}")
            return m and m.group(1)
        return wait_until(listening, f"{self.name} saying it listens")

    def wait_exit(self, seconds):
        try:
            return self.p.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, kill=False):
        """SIGTERM (a gateway then drains for drain_delay), or with kill=True SIGKILL."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            if self.wait_exit(DEADLINE) is None:
                self.p.kill()
                self.p.wait()
        self.err.close()


def http(addr, path, body=None, content_type=None):
    req = urllib.request.Request(f"http://{addr}{path}", data=body, method="POST" if body is not None else "GET")
    if content_type:
        req.add_header("content-type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def parse_metrics(text):
    """Series names a query can use (counters with _total, histograms as _bucket, _sum and
    _count, from the # TYPE lines) and, per series name, the labels and values seen."""
    names, seen = set(), {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            family, kind = m.groups()
            names |= {
                "counter": {family + "_total"},
                "histogram": {family + s for s in ("_bucket", "_sum", "_count")},
            }.get(kind, {family})
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+", line)
        if m and not line.startswith("#"):
            labels = seen.setdefault(m.group(1), {})
            for k, v in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""):
                labels.setdefault(k, set()).add(v)
    return names, seen


@check("gateway: the base's and the overlay's config served by the real binary, /metrics scraped")
def check_gateway(state, binary):
    require(binary.exists(), f"{binary} does not exist (cargo build -p protogate)")
    files = state.get("configs", {}).get(str(OVERLAY.relative_to(ROOT)))
    require(files, "the overlay's config files were not found (see the kubernetes check)")
    work = Path(tempfile.mkdtemp(prefix="protogate-deploy-check-"))
    procs = []
    try:
        def lay_out(name, files):
            etc = work / name  # as the pod's /etc/protogate
            for path, text in files.items():
                (etc / path).parent.mkdir(parents=True, exist_ok=True)
                (etc / path).write_text(text)
            return etc

        backend = Proc([str(binary), "demo", "--backend-only", "--listen", "127.0.0.1:0"], work, "backend")
        procs.append(backend)
        upstream = backend.wait_listening()
        # The base's config starts (the binary accepts every key) and is ready.
        base_files = state.get("configs", {}).get(str(BASE.relative_to(ROOT)))
        require(base_files, "the base's config files were not found (see the kubernetes check)")
        base = Proc([str(binary), "serve", "--config", str(lay_out("base", base_files) / "protogate.toml"),
                     "--listen", "127.0.0.1:0", "--upstream", f"http://{upstream}"], work, "base")
        procs.append(base)
        require(http(base.wait_listening(), "/readyz")[0] == 200, "the base's config: /readyz is not 200")
        base.stop(kill=True)
        # The overlay's, in full.
        etc = lay_out("overlay", files)
        gateway = Proc([str(binary), "serve", "--config", str(etc / "protogate.toml"),
                        "--listen", "127.0.0.1:0", "--upstream", f"http://{upstream}"], work, "gateway")
        procs.append(gateway)
        addr = gateway.wait_listening()
        require(http(addr, "/healthz")[0] == 200, "/healthz is not 200")
        require(http(addr, "/readyz")[0] == 200, "/readyz is not 200 with the upstream up")
        method = "/demo.shop.v1.Shop/GetOrder"
        for body, ctype in ((b'{"id": "1"}', "application/json"), (b"\x81\xa2id\x01", "application/msgpack"),
                            (b"\x08\x01", "application/x-protobuf")):
            status, answer = http(addr, method, body, ctype)
            require(status == 200, f"{ctype} GetOrder answered {status}: {answer[:300]!r}")

        # Shedding, which nothing here brings the overlay's limits to: a second gateway on the
        # same files with max_concurrent_requests = 1 (a top-level key, so put first), one
        # request held in flight (its head sent, its body not; /metrics, which is not admitted,
        # tells when it is in), and one more, which is shed.
        shed_toml = etc / "protogate-shed.toml"
        shed_toml.write_text("max_concurrent_requests = 1\n" + files["protogate.toml"])
        shedder = Proc([str(binary), "serve", "--config", str(shed_toml), "--listen", "127.0.0.1:0",
                        "--upstream", f"http://{upstream}"], work, "shedder")
        procs.append(shedder)
        shed_addr = shedder.wait_listening()
        host, port = shed_addr.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as held:
            held.sendall(f"POST {method} HTTP/1.1\r\nHost: {shed_addr}\r\ncontent-type: application/json\r\n"
                         "content-length: 11\r\n\r\n".encode())
            wait_until(lambda: "\nprotogate_requests_in_flight 1\n" in http(shed_addr, "/metrics")[1].decode(),
                       "the held request in flight")
            status, answer = http(shed_addr, method, b'{"id": "1"}', "application/json")
            require(status == 503, f"a request over max_concurrent_requests answered {status}: {answer[:300]!r}")
        deadline = time.monotonic() + DEADLINE
        while (status := http(shed_addr, "/metrics"))[0] != 200:
            require(time.monotonic() < deadline, f"/metrics answered {status[0]} after the held request left")
        shed_text = status[1].decode()
        shed_metrics = parse_metrics(shed_text)
        shedder.stop(kill=True)

        backend.stop()
        status, answer = http(addr, method, b'{"id": "1"}', "application/json")
        require(status == 503, f"GetOrder with the upstream stopped answered {status}, not 503: {answer[:300]!r}")
        status, text = http(addr, "/metrics")
        require(status == 200, f"/metrics answered {status}")
        names, seen = parse_metrics(text.decode())
        for series, labels in shed_metrics[1].items():
            for label, values in labels.items():
                seen.setdefault(series, {}).setdefault(label, set()).update(values)
        state["metrics"] = (names | shed_metrics[0], seen)
        # Every reason's series is there from the start, at 0; the one request over the limit
        # counted under concurrency alone.
        shed = dict(re.findall(r'^protogate_shed_total\{reason="(\w+)"\} (\d+)', shed_text, re.M))
        require(shed == {"concurrency": "1", "upstream_concurrency": "0", "memory": "0", "connections": "0"},
                f"the shed request was not counted as one concurrency refusal: {shed}")

        # SIGHUP: the systemd unit's ExecReload (kill -HUP) must match what the binary does
        # with it: end (no handler: then `systemctl reload` would stop the gateway) or live on.
        gateway.p.send_signal(signal.SIGHUP)
        wait_until(lambda: gateway.p.poll() is not None or "SIGHUP" in gateway.err_path.read_text(),
                   "SIGHUP ending protogate or being logged")
        survived = gateway.p.poll() is None and http(addr, "/healthz")[0] == 200 and gateway.p.poll() is None
        reload_enabled = re.search(r"(?m)^ExecReload=.*-HUP", UNIT.read_text()) is not None
        if survived:
            require(reload_enabled, "protogate lives on after SIGHUP: deploy/systemd/protogate.service can have "
                                    "ExecReload=/bin/kill -HUP $MAINPID (enable it, and rewrite its comment)")
        else:
            require(not reload_enabled, f"SIGHUP ends protogate (exit {gateway.p.returncode}), yet "
                                        "deploy/systemd/protogate.service has ExecReload=kill -HUP: `systemctl reload` "
                                        "would stop the gateway")
    finally:
        for p in reversed(procs):
            p.stop(kill=p.name != "backend")
        shutil.rmtree(work, ignore_errors=True)


# --- Dashboard and alerts -------------------------------------------------------------------

SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def check_queries(exprs, names, seen, where):
    """Every metric name, label and (exact) label value the queries use is the gateway's."""
    all_labels = set(TARGET_LABELS) | {label for labels in seen.values() for label in labels}
    used = set()
    for expr in exprs:
        for metric in set(re.findall(r"\bprotogate_[a-zA-Z0-9_]+\b", expr)):
            require(metric in names, f"{where}: {metric} is not in the gateway's /metrics ({expr})")
            used.add(metric)
        for metric, body in SELECTOR.findall(expr):
            if metric in PROMETHEUS_SERIES:
                continue
            labels = seen.get(metric)
            for label, op, value in MATCHER.findall(body):
                if label in TARGET_LABELS:
                    continue
                if labels is None:
                    require(label in all_labels, f"{where}: label {label} is on no gateway series ({expr})")
                    continue
                require(label in labels, f"{where}: {metric} has no label {label} ({expr})")
                if op in ("=", "!=") and "$" not in value:
                    require(value in labels[label], f"{where}: {metric}{{{label}=\"{value}\"}}: the gateway gave {label} only "
                                                    f"{sorted(labels[label])} here ({expr})")
        for group in GROUPING.findall(expr):
            for label in filter(None, (g.strip() for g in group.split(","))):
                require(label in all_labels | {"le"}, f"{where}: grouping by {label}, a label no series has ({expr})")
    return used


def promtool():
    exe = shutil.which("promtool")
    if not exe:
        raise Skip("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    return exe


@check("dashboard: deploy/grafana/protogate.json parses, hangs together, uses the gateway's metrics")
def check_dashboard(state):
    try:
        dash = json.loads(DASHBOARD.read_text())
    except json.JSONDecodeError as e:
        raise Fail(f"{DASHBOARD.relative_to(ROOT)}: {e}")
    require(dash.get("uid") and dash.get("title") and isinstance(dash.get("panels"), list), "uid, title and panels expected")
    variables = {v["name"] for v in dash["templating"]["list"]}
    ids, queries = set(), []
    for p in dash["panels"]:
        require(p["id"] not in ids, f"panel id {p['id']} twice")
        ids.add(p["id"])
        g = p["gridPos"]
        require(0 <= g["x"] and g["x"] + g["w"] <= 24, f"panel {p['title']!r} is outside the 24-column grid")
        if p["type"] == "row":
            continue
        require(p["datasource"]["uid"] == "${datasource}", f"panel {p['title']!r} does not use the datasource variable")
        require(p.get("targets"), f"panel {p['title']!r} has no query")
        queries += [t["expr"] for t in p["targets"]]
    if "metrics" not in state:
        raise Fail("no /metrics to compare with (the gateway check failed)")
    names, seen = state["metrics"]
    all_labels = {label for labels in seen.values() for label in labels} | TARGET_LABELS
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.*), (\w+)\)", v["definition"])
            require(m, f"variable {v['name']}: label_values(selector, label) expected")
            require(m.group(2) in all_labels, f"variable {v['name']}: label {m.group(2)} is on no series")
            queries.append(m.group(1))
    for q in queries:
        for var in re.findall(r"\$(\w+)", q):
            require(var.startswith("__") or var in variables, f"query uses ${var}, which is not a dashboard variable: {q}")
    used = check_queries(queries + state.get("adapter_queries", []), names, seen, "dashboard")
    for wanted in ("protogate_requests_total", "protogate_request_duration_seconds_bucket",
                   "protogate_upstream_request_duration_seconds_bucket", "protogate_downgrades_total",
                   "protogate_shed_total", "protogate_connections", "protogate_requests_in_flight"):
        require(wanted in used, f"the dashboard shows no {wanted}")
    # Every query parses as PromQL: promtool checks them as recording rules, with Grafana's
    # variables given values.
    exe = promtool()
    concrete = [re.sub(r"\$(\w+)", ".*", q.replace("$__rate_interval", "5m")) for q in queries]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query{i}", "expr": q} for i, q in enumerate(concrete)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(rules, f)
        f.flush()
        r = run([exe, "check", "rules", f.name])
    require(r.returncode == 0, f"a dashboard query is not PromQL:\n{r.stdout}{r.stderr}")


@check("alerts: deploy/prometheus/alerts.yaml checked and unit-tested by promtool, on the gateway's metrics")
def check_alerts(state):
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    names = {r["alert"] for r in rules}
    for wanted in ("ProtogateHighErrorRatio", "ProtogateUpstreamUnavailable", "ProtogateHighLatency",
                   "ProtogateDowngradesRising", "ProtogateShedding"):
        require(wanted in names, f"no alert {wanted}")
    if "metrics" not in state:
        raise Fail("no /metrics to compare with (the gateway check failed)")
    metrics, seen = state["metrics"]
    check_queries([r["expr"] for r in rules], metrics, seen, "alerts.yaml")
    exe = promtool()
    r = run([exe, "check", "rules", str(ALERTS)])
    require(r.returncode == 0, r.stdout + r.stderr)
    tests = sorted(HERE.glob("alerts_*test.yaml"))
    r = run([exe, "test", "rules", *[t.name for t in tests]], cwd=HERE)
    require(r.returncode == 0, r.stdout + r.stderr)
    tested = {a for t in tests for a in re.findall(r"alertname: (\w+)", t.read_text())}
    require(names <= tested, f"alerts without a unit test: {sorted(names - tested)}")


# --- systemd --------------------------------------------------------------------------------

@check("systemd: deploy/systemd/protogate.service verified, hardened, its stop timeout fits the drain")
def check_systemd(state, binary):
    unit = UNIT.read_text()
    directives = {}
    for line in unit.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            directives.setdefault(m.group(1), []).append(m.group(2))
    for key, value in (("DynamicUser", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("PrivateTmp", "yes"),
                       ("NoNewPrivileges", "yes"), ("CapabilityBoundingSet", ""), ("Restart", "on-failure"),
                       ("KillSignal", "SIGTERM")):
        require(value in directives.get(key, []), f"{key}={value} expected")
    require("@system-service" in directives.get("SystemCallFilter", []), "SystemCallFilter=@system-service expected")
    require(directives.get("RestrictAddressFamilies"), "RestrictAddressFamilies expected")
    exec_start = directives["ExecStart"][0]
    require(exec_start.endswith(" serve --config /etc/protogate/protogate.toml"), f"ExecStart={exec_start}")
    stop = duration_s(directives["TimeoutStopSec"][0])
    drain = duration_s(readme_default("drain_delay"))
    upstream_timeout = duration_s(readme_default("upstream_timeout"))
    require(stop > drain + upstream_timeout, f"TimeoutStopSec {stop:g} s does not exceed drain_delay + upstream_timeout ({drain + upstream_timeout:g} s)")

    analyze = shutil.which("systemd-analyze")
    if not analyze:
        raise Skip("systemd-analyze is not installed (Debian's systemd package): the unit was checked by its text only")
    # verify insists that ExecStart's binary exists: the copy names the one under test.
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / UNIT.name
        copy.write_text(unit.replace(f"ExecStart={exec_start.split()[0]}", f"ExecStart={binary.resolve()}"))
        r = run([analyze, "verify", "--man=no", str(copy)])
        require(r.returncode == 0 and not (r.stdout + r.stderr).strip(), f"systemd-analyze verify:\n{r.stdout}{r.stderr}")
        r = run([analyze, "security", "--offline=true", "--no-pager", str(copy)])
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", r.stdout + r.stderr)
        require(m, f"systemd-analyze security said:\n{r.stdout}{r.stderr}")
        require(float(m.group(1)) <= 2.0, f"exposure {m.group(1)} {m.group(2)}, more than 2.0:\n{r.stdout}")


# --- Docker ---------------------------------------------------------------------------------

def dockerfile_instructions(text):
    """(INSTRUCTION, arguments) per instruction: continuations joined, comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if not pending and (line.lstrip().startswith("#") or not line.strip()):
            continue
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def dockerignored(path, patterns):
    """Whether .dockerignore's patterns (plain paths, * and **/; no negation) leave path out."""
    import fnmatch

    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        if pattern.startswith("**/"):
            tail = pattern[3:]
            if any(fnmatch.fnmatchcase(p, tail) for p in parts):
                return True
        elif any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            return True
    return False


@check("docker: deploy/Dockerfile linted and checked, .dockerignore keeps the workspace")
def check_docker(state):
    text = DOCKERFILE.read_text()
    ins = dockerfile_instructions(text)
    froms = [a for i, a in ins if i == "FROM"]
    require(len(froms) == 2, f"two stages expected (a builder and the runtime), found {len(froms)}")
    require(re.search(r"\bAS builder$", froms[0], re.I) and froms[0].startswith("rust:"), f"the first stage should be a Rust builder: FROM {froms[0]}")
    require("distroless/cc" in froms[1] or "slim" in froms[1], f"the runtime should be distroless cc or debian-slim: FROM {froms[1]}")
    final = ins[max(i for i, (w, _) in enumerate(ins) if w == "FROM"):]
    users = [a for i, a in final if i == "USER"]
    require(users, "the runtime stage sets no USER")
    uid = users[-1].split(":")[0]
    require(uid.isdigit() and int(uid) != 0, f"USER {users[-1]}: a numeric non-root uid expected (runAsNonRoot checks numbers)")
    require(("STOPSIGNAL", "SIGTERM") in final, "STOPSIGNAL SIGTERM expected")
    require(any(i == "EXPOSE" and "8080" in a.split() for i, a in final), "EXPOSE 8080 expected")
    require(("ENTRYPOINT", '["/usr/local/bin/protogate"]') in final, "ENTRYPOINT [\"/usr/local/bin/protogate\"] expected")
    require(("CMD", '["serve", "--config", "/etc/protogate/protogate.toml"]') in final,
            "CMD [\"serve\", \"--config\", \"/etc/protogate/protogate.toml\"] expected")
    require(any(i == "COPY" and a.startswith("--from=builder") for i, a in final), "the runtime copies nothing from the builder")
    builds = [a for i, a in ins if i == "RUN" and "cargo build" in a]
    require(builds and 'PROTOGATE_GIT_REVISION="${REVISION}"' in builds[0] and "--locked" in builds[0],
            "the build should pass the revision as PROTOGATE_GIT_REVISION and build --locked")
    labels = " ".join(a for i, a in final if i == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses", "base.name"):
        require(f"org.opencontainers.image.{key}=" in labels, f"label org.opencontainers.image.{key} missing")
    require('org.opencontainers.image.revision="${REVISION}"' in labels, "the revision label should come from the REVISION build argument")
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = cargo["workspace"]["package"]["version"]
    require(("ARG", f"VERSION={version}") in final, f"ARG VERSION={version} (Cargo.toml's version) expected in the runtime stage")
    license_ = cargo["workspace"]["package"]["license"]
    require(f'org.opencontainers.image.licenses="{license_}"' in labels, f"the licenses label should be {license_}")

    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    require(not any(p.startswith("!") for p in patterns), "negated .dockerignore patterns are beyond this check")
    for out in ("target", ".git", ".venv"):
        require(dockerignored(out, patterns), f".dockerignore should leave out {out}")
    members = cargo["workspace"]["members"]
    for keep in ["Cargo.toml", "Cargo.lock", "proto/demo/v2/shop.proto"] + [f"{m}/Cargo.toml" for m in members]:
        require(not dockerignored(keep, patterns), f".dockerignore leaves out {keep}, which the build reads")

    exe = Path(sys.executable).parent / "hadolint"
    if exe.exists():
        r = run([str(exe), "--failure-threshold", "info", str(DOCKERFILE)])
        require(r.returncode == 0, f"hadolint:\n{r.stdout}{r.stderr}")

    # The build context (the tracked files .dockerignore keeps) resolves protogate's
    # dependencies as the builder's `cargo build --locked` will: every workspace member there,
    # Cargo.lock current (for this host's platform: the crates of others are not at hand
    # offline).
    files = run(["git", "ls-files"], cwd=ROOT).stdout.split()
    with tempfile.TemporaryDirectory() as d:
        for f in files:
            if not dockerignored(f, patterns) and (ROOT / f).is_file():
                (Path(d) / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / f, Path(d) / f)
        host = re.search(r"(?m)^host: (\S+)", run(["rustc", "-vV"]).stdout)
        require(host, "rustc -vV names no host")
        r = run(["cargo", "tree", "--locked", "--offline", "-p", "protogate", "-e", "normal,build",
                 "--target", host.group(1), "--manifest-path", f"{d}/Cargo.toml"],
                env={**os.environ, "CARGO_TARGET_DIR": f"{d}/target"})
        require(r.returncode == 0, f"cargo tree --locked in the build context:\n{r.stderr[-2000:]}")
    if not exe.exists():
        raise Skip("hadolint is not installed (make deploy-env): the Dockerfile was checked by the tests above only")


def main():
    binary = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/debug/protogate").resolve()
    state = {}
    t = time.monotonic()
    check_kubernetes(state)
    check_yamllint(state)
    check_gateway(state, binary)
    check_dashboard(state)
    check_alerts(state)
    check_systemd(state, binary)
    check_docker(state)
    skipped = f", {results['skipped']} skipped" if results["skipped"] else ""
    print(f"({time.monotonic() - t:.1f} s)")
    print(f"deploy-check: {results['passed']} passed, {results['failed']} failed{skipped}")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
