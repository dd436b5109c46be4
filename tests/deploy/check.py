#!/usr/bin/env python3
"""`make deploy-check`: deploy/ checked offline, in seconds.

- kubernetes: `kubectl kustomize` renders the base and the example overlay (without kubectl,
  said loudly: each file on its own, and the overlay's references); every object is validated
  against the Kubernetes OpenAPI schemas bundled by kubernetes-validate (strict: unknown
  fields are errors), the ServiceMonitor and the PrometheusRule (CRDs they lack) against the
  fields of their CRDs this file lists; then the objects against each other (selectors, ports,
  the admin port and the Services that do and do not expose it, the probes, POD_NAME, no
  replica count beside the HPA, the ConfigMap's keys and the config's paths, the grace period
  against the drain, the NetworkPolicy against the ports and the upstreams); the overlay's
  copies (the PrometheusRule's groups, the dashboard ConfigMap) against deploy/'s originals.
- yamllint on deploy/ and tests/deploy/.
- gateway: the real binary serves the overlay's protogate.toml and schema, laid out as the pod
  mounts them, in front of `protogate demo --backend-only`; the admin pages on the admin
  listener and 404 on the main one; requests in every format, one shed (a second gateway on
  the same files, max_concurrent_requests = 1) and one to a stopped upstream; a third gateway
  with a TLS certificate (openssl) for the certificate's expiry; /metrics scraped; then
  SIGHUP, which the gateway must live through if the systemd unit has ExecReload (kill -HUP),
  and may only die of if it has not.
- observability: the Grafana JSON parses and hangs together; every metric name, label and
  label value the dashboard and alerts.yaml use is in that /metrics output; promtool parses
  every query and runs the alert rules' unit tests (tests/deploy/alerts_*test.yaml).
- systemd: `systemd-analyze verify` and `security --offline` on the unit; its stop timeout
  against the drain; its hardening.
- docker: hadolint, and the Dockerfile's stages, user, stop signal, port, command, labels and
  revision; .dockerignore keeps what the build reads (a copy of the context resolves the
  workspace with `cargo tree --locked --offline`).
- compose: deploy/compose/compose.yaml by `docker compose config` where Docker's compose
  plugin is, and against the Compose Specification's JSON schema (check-jsonschema's copy)
  always; its services, ports, mounts and names against each other and against the gateway's
  protogate.toml (which `protogate check` loads, laid out as the containers mount it), the
  Prometheus configuration (`promtool check config`) and the Grafana provisioning files.

A tool that is missing (promtool, systemd-analyze, yamllint, hadolint) is a loud skip, or a
failure with PROTOGATE_REQUIRE_ORACLES=1 (make test). Talks only to 127.0.0.1; stops only the
processes it started, by PID.

Usage: tests/deploy/check.py [path/to/protogate]   (default target/debug/protogate)
"""

import calendar
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
from pathlib import Path, PurePosixPath

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
BASE = KUBE / "base"
OVERLAY = KUBE / "overlays" / "example"
EXAMPLES = KUBE / "examples"
COMPOSE = DEPLOY / "compose"
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
# The admin listener's port in deploy/'s configurations (admin_listen = ":9090"), and the
# paths that answer there only.
ADMIN_PORT = 9090
ADMIN_PATHS = ("/metrics", "/healthz", "/readyz", "/admin/migration", "/admin/migration.json", "/admin/schema")
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


# The PrometheusRule fields these manifests may use (monitoring.coreos.com/v1).
PROMETHEUS_RULE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": SERVICE_MONITOR["properties"]["metadata"],
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "query_offset": {"type": "string", "pattern": DURATION},
                            "limit": {"type": "integer", "minimum": 0},
                            "labels": LABELS,
                            "partial_response_strategy": {"type": "string"},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": DURATION},
                                        "keep_firing_for": {"type": "string", "pattern": DURATION},
                                        "labels": LABELS,
                                        "annotations": LABELS,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
CUSTOM_RESOURCES = {"ServiceMonitor": SERVICE_MONITOR, "PrometheusRule": PROMETHEUS_RULE}


def load_docs(text, where):
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise Fail(f"{where}: {e}")


def validate_object(obj, where):
    kind = obj.get("kind")
    if kind in CUSTOM_RESOURCES:
        try:
            jsonschema.validate(obj, CUSTOM_RESOURCES[kind])
        except jsonschema.ValidationError as e:
            raise Fail(f"{where}: {kind}: {e.message} at {list(e.absolute_path)}")
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
            metadata = {"name": gen["name"]}
            if gen.get("options", {}).get("labels"):
                metadata["labels"] = dict(gen["options"]["labels"])
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
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
    """The objects against each other and against what deploy/ requires of them."""
    dep = one(objects, "Deployment", where)
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    require(matches(dep["spec"]["selector"]["matchLabels"], pod_labels), f"{where}: the Deployment's selector misses its pods")
    # The HPA owns the count: a replicas field would set it back on every apply.
    require("replicas" not in dep["spec"], f"{where}: the Deployment has replicas: {dep['spec'].get('replicas')} (the HPA owns the count)")
    pod = dep["spec"]["template"]["spec"]
    require(len(pod["containers"]) == 1, f"{where}: one container expected")
    c = pod["containers"][0]
    require(c.get("args", [])[:3] == ["serve", "--config", "/etc/protogate/protogate.toml"] or "args" not in c,
            f"{where}: the container's args are not the image's serve --config /etc/protogate/protogate.toml")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    require(ports.get("http") == 8080, f"{where}: the main port should be containerPort 8080 named http")
    require(ports.get("admin") == ADMIN_PORT, f"{where}: the admin port should be containerPort {ADMIN_PORT} named admin")
    env = {e["name"]: e for e in c.get("env", [])}
    pod_name = env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    require(pod_name == "metadata.name", f"{where}: POD_NAME should come from the downward API's metadata.name, not {env.get('POD_NAME')}")
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    require(psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, f"{where}: runAsNonRoot is not set")
    require(csc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem is not set")
    require(csc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation is not false")
    require(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}: capabilities are not all dropped")
    seccomp = csc.get("seccompProfile") or psc.get("seccompProfile") or {}
    require(seccomp.get("type") == "RuntimeDefault", f"{where}: seccomp is not RuntimeDefault")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        require(get.get("path") == path and get.get("port") in ("admin", ADMIN_PORT),
                f"{where}: {probe} should GET {path} on the admin port (the main port answers it 404)")
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
    require(config.get("admin_listen") == f":{ADMIN_PORT}",
            f"{where}: protogate.toml must put the admin pages on every interface's port {ADMIN_PORT} (admin_listen = \":{ADMIN_PORT}\"), "
            f"not {config.get('admin_listen')!r}")

    # Two Services: the API's (port http only) and the headless admin one (port admin only).
    services = [o for o in objects if o["kind"] == "Service"]
    require(len(services) == 2, f"{where}: {len(services)} Services, expected the API's and the admin one")
    for s in services:
        require(matches(s["spec"]["selector"], pod_labels), f"{where}: Service {s['metadata']['name']}'s selector misses the pods")
        for p in s["spec"]["ports"]:
            require(p["targetPort"] in ports or p["targetPort"] in ports.values(),
                    f"{where}: Service {s['metadata']['name']} port {p['name']} targets no container port")

    def targets_admin(p):
        return p["targetPort"] in ("admin", ADMIN_PORT) or p["port"] == ADMIN_PORT or p["name"] == "admin"

    admins = [s for s in services if any(targets_admin(p) for p in s["spec"]["ports"])]
    require(len(admins) == 1, f"{where}: {len(admins)} Services expose the admin port, expected one")
    admin_svc = admins[0]
    svc = [s for s in services if s is not admin_svc][0]
    require(svc["metadata"]["name"] == dep["metadata"]["name"], f"{where}: the API's Service should be named {dep['metadata']['name']}")
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    require(list(svc_ports) == ["http"] and svc_ports["http"]["port"] == 8080 and svc_ports["http"]["targetPort"] in ("http", 8080),
            f"{where}: the API's Service should expose port 8080 (http) alone, not {sorted(svc_ports)}")
    require(svc_ports["http"].get("appProtocol") == "kubernetes.io/h2c",
            f"{where}: the API's Service port should say appProtocol: kubernetes.io/h2c (HTTP/1.1 and h2c prior knowledge)")
    admin_ports = admin_svc["spec"]["ports"]
    require(len(admin_ports) == 1 and admin_ports[0]["name"] == "admin" and admin_ports[0]["port"] == ADMIN_PORT
            and admin_ports[0]["targetPort"] in ("admin", ADMIN_PORT),
            f"{where}: Service {admin_svc['metadata']['name']} should expose the admin port ({ADMIN_PORT}, named admin) alone")
    require(admin_svc["spec"].get("clusterIP") == "None", f"{where}: Service {admin_svc['metadata']['name']} should be headless (clusterIP: None)")
    require(not matches(admin_svc["metadata"]["labels"], svc["metadata"]["labels"]),
            f"{where}: the admin Service's labels also fit the API's Service: a ServiceMonitor could not tell them apart")

    pdb = one(objects, "PodDisruptionBudget", where)
    require(matches(pdb["spec"]["selector"]["matchLabels"], pod_labels), f"{where}: the PodDisruptionBudget selects no pod")
    hpa = one(objects, "HorizontalPodAutoscaler", where)
    ref = hpa["spec"]["scaleTargetRef"]
    require((ref["kind"], ref["name"]) == ("Deployment", dep["metadata"]["name"]), f"{where}: the HPA scales something else")
    require(hpa["spec"]["minReplicas"] >= 3 and hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"], f"{where}: HPA bounds")
    require(any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"]), f"{where}: the HPA does not scale on CPU")

    for sm in (o for o in objects if o["kind"] == "ServiceMonitor"):
        selected = [s["metadata"]["name"] for s in services if matches(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
        require(selected == [admin_svc["metadata"]["name"]],
                f"{where}: the ServiceMonitor should select Service {admin_svc['metadata']['name']} alone, not {selected}")
        for e in sm["spec"]["endpoints"]:
            require(e["port"] == "admin", f"{where}: the ServiceMonitor scrapes port {e['port']}, not admin")
            require(e.get("path") == "/metrics", f"{where}: the ServiceMonitor should scrape /metrics")
        # The job label the scrapes get, which alerts.yaml's ProtogateDown names.
        job = admin_svc["metadata"]["labels"].get(sm["spec"]["jobLabel"]) if "jobLabel" in sm["spec"] else admin_svc["metadata"]["name"]
        down = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"] if r.get("alert") == "ProtogateDown"]
        require(down and f'job="{job}"' in down[0]["expr"], f"{where}: the ServiceMonitor's scrapes get job=\"{job}\", which ProtogateDown does not name")
    for np in (o for o in objects if o["kind"] == "NetworkPolicy"):
        require(matches(np["spec"]["podSelector"]["matchLabels"], pod_labels), f"{where}: the NetworkPolicy selects no pod")
        rules = np["spec"].get("ingress", [])
        require(all(rule.get("ports") for rule in rules), f"{where}: a NetworkPolicy ingress rule without ports lets in every port")
        ingress_ports = {p["port"] for rule in rules for p in rule["ports"]}
        require(ingress_ports == {8080, ADMIN_PORT},
                f"{where}: the NetworkPolicy should let in ports 8080 and {ADMIN_PORT} only, not {sorted(ingress_ports)}")
        monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
        for rule in rules:
            if any(p["port"] in (ADMIN_PORT, "admin") for p in rule["ports"]):
                require(rule.get("from") == monitoring,
                        f"{where}: the NetworkPolicy lets the admin port in from {rule.get('from', 'anywhere')}, "
                        "not only from namespace monitoring")
                require(all(p["port"] in (ADMIN_PORT, "admin") for p in rule["ports"]),
                        f"{where}: the NetworkPolicy's admin rule lets in other ports too")
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
                 "PodDisruptionBudget", "Service", "ServiceMonitor", "PrometheusRule"):
        require(kind in kinds, f"the overlay renders no {kind}")

    # The alerting rules: alerts.yaml's groups, as they are.
    rule = one(overlay, "PrometheusRule", "overlay")
    require(rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"],
            "the overlay's PrometheusRule's groups are not deploy/prometheus/alerts.yaml's: copy them again "
            "(the commands are in deploy/kubernetes/overlays/example/prometheusrule.yaml)")
    sm = one(overlay, "ServiceMonitor", "overlay")
    require(rule["metadata"].get("labels", {}).get("release") == sm["metadata"].get("labels", {}).get("release"),
            "the PrometheusRule's release label should be the ServiceMonitor's (what the Prometheus selects)")

    # The dashboard for Grafana's sidecar: deploy/grafana/protogate.json, under a stable name.
    require((OVERLAY / "protogate.json").read_text() == DASHBOARD.read_text(),
            "deploy/kubernetes/overlays/example/protogate.json is not a copy of deploy/grafana/protogate.json: "
            "cp deploy/grafana/protogate.json deploy/kubernetes/overlays/example/")
    dashboards = [o for o in overlay if o["kind"] == "ConfigMap" and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    require(len(dashboards) == 1, f"{len(dashboards)} ConfigMaps labelled grafana_dashboard: \"1\", expected the dashboard's")
    require(dashboards[0].get("data", {}).get("protogate.json") == DASHBOARD.read_text(),
            "the dashboard ConfigMap does not hold deploy/grafana/protogate.json under protogate.json")
    generator = [g for g in kustomization(OVERLAY)["configMapGenerator"] if g["name"] == dashboards[0]["metadata"]["name"]]
    require(generator and generator[0].get("options", {}).get("disableNameSuffixHash") is True,
            "the dashboard ConfigMap's name should carry no hash (disableNameSuffixHash), so Grafana's sidecar sees one name")
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

    def __init__(self, args, work, name, env=None):
        self.err_path = work / f"{name}.err"
        self.err = open(self.err_path, "w")
        self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.err, stdin=subprocess.DEVNULL, cwd=work,
                                  env={**os.environ, **(env or {})})
        self.name = name

    def wait_listening(self, pattern=r"listening on http://(127\.0\.0\.1:\d+)", what="it listens"):
        def listening():
            m = re.search(pattern, self.err_path.read_text())
            if not m and self.p.poll() is not None:
                raise Fail(f"{self.name} exited ({self.p.returncode}) before listening: {self.err_path.read_text()[-2000:]}")
            return m and m.group(1)
        return wait_until(listening, f"{self.name} saying {what}")

    def wait_admin(self):
        """The admin listener's address (--admin-listen), from the line that announces it."""
        return self.wait_listening(r"admin endpoints [^\n]*? on http://(127\.0\.0\.1:\d+)", "where its admin endpoints are")

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


@check("gateway: the base's and the overlay's config served by the real binary, admin pages apart, /metrics scraped")
def check_gateway(state, binary):
    require(binary.exists(), f"{binary} does not exist (cargo build -p protogate)")
    files = state.get("configs", {}).get(str(OVERLAY.relative_to(ROOT)))
    require(files, "the overlay's config files were not found (see the kubernetes check)")
    work = Path(tempfile.mkdtemp(prefix="protogate-deploy-check-"))
    procs = []
    # Every gateway here on loopback, on ports of the system's choosing: the configs' listen
    # and admin_listen (":8080", ":9090": every interface) are overridden.
    loopback = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"]
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
        base = Proc([str(binary), "serve", "--config", str(lay_out("base", base_files) / "protogate.toml"), *loopback,
                     "--upstream", f"http://{upstream}"], work, "base")
        procs.append(base)
        base.wait_listening()
        require(http(base.wait_admin(), "/readyz")[0] == 200, "the base's config: /readyz is not 200 on the admin listener")
        base.stop(kill=True)
        # The overlay's, in full, named as the Deployment names a replica (POD_NAME).
        etc = lay_out("overlay", files)
        gateway = Proc([str(binary), "serve", "--config", str(etc / "protogate.toml"), *loopback,
                        "--upstream", f"http://{upstream}"], work, "gateway", env={"POD_NAME": "protogate-5d8f7c9b4-x2x7q"})
        procs.append(gateway)
        addr = gateway.wait_listening()
        admin = gateway.wait_admin()
        # The probes' and Prometheus's paths and the operators' pages answer on the admin
        # port, and 404 on the main one (which the public Service exposes).
        for path in ADMIN_PATHS:
            require(http(admin, path)[0] == 200, f"{path} is not 200 on the admin listener")
            status = http(addr, path)[0]
            require(status == 404, f"{path} answered {status} on the main listener, not 404 (admin_listen moves it)")
        method = "/demo.shop.v1.Shop/GetOrder"
        for body, ctype in ((b'{"id": "1"}', "application/json"), (b"\x81\xa2id\x01", "application/msgpack"),
                            (b"\x08\x01", "application/x-protobuf")):
            status, answer = http(addr, method, body, ctype)
            require(status == 200, f"{ctype} GetOrder answered {status}: {answer[:300]!r}")

        # Shedding and JSON refusals, which nothing here brings the overlay to: a second
        # gateway on the same files with max_concurrent_requests = 1 (a top-level key, so put
        # first) and JSON sunset rules (tables, so put last: ListOrders past its sunset,
        # CreateOrder in a brownout now). One request held in flight (its head sent, its body
        # not; /metrics, which is not admitted, tells when it is in), and one more, which is
        # shed; then a JSON request to each method with a rule, which is refused.
        now = time.time()
        stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
        sunsets = "".join(f'\n[[json_sunset]]\nselector = "demo.shop.v1.Shop.{m}"\ndeprecation = "{stamp(now - 2 * 86400)}"\n'
                          f'sunset = "{stamp(end)}"\n' for m, end in (("ListOrders", now - 86400), ("CreateOrder", now + 30 * 86400)))
        sunsets += f'brownouts = ["{stamp(now - 3600)}/PT2H"]\n'  # CreateOrder's
        shed_toml = etc / "protogate-shed.toml"
        shed_toml.write_text("max_concurrent_requests = 1\n" + files["protogate.toml"] + sunsets)
        shedder = Proc([str(binary), "serve", "--config", str(shed_toml), *loopback,
                        "--upstream", f"http://{upstream}"], work, "shedder")
        procs.append(shedder)
        shed_addr = shedder.wait_listening()
        shed_admin = shedder.wait_admin()
        host, port = shed_addr.split(":")
        with socket.create_connection((host, int(port)), timeout=10) as held:
            held.sendall(f"POST {method} HTTP/1.1\r\nHost: {shed_addr}\r\ncontent-type: application/json\r\n"
                         "content-length: 11\r\n\r\n".encode())
            wait_until(lambda: "\nprotogate_requests_in_flight 1\n" in http(shed_admin, "/metrics")[1].decode(),
                       "the held request in flight")
            status, answer = http(shed_addr, method, b'{"id": "1"}', "application/json")
            require(status == 503, f"a request over max_concurrent_requests answered {status}: {answer[:300]!r}")
        deadline = time.monotonic() + DEADLINE
        while (status := http(shed_admin, "/metrics"))[0] != 200:
            require(time.monotonic() < deadline, f"/metrics answered {status[0]} after the held request left")
        for refused, body in (("ListOrders", b'{"customerId": "42"}'), ("CreateOrder", b'{"customerId": "42"}')):
            status, answer = http(shed_addr, f"/demo.shop.v1.Shop/{refused}", body, "application/json")
            require(status in (406, 415), f"JSON {refused} under a [[json_sunset]] rule answered {status}: {answer[:300]!r}")
        shed_text = http(shed_admin, "/metrics")[1].decode()
        refused = dict(re.findall(r'^protogate_json_refused_total\{method="demo\.shop\.v1\.Shop/(\w+)",reason="(\w+)"\} 1$',
                                  shed_text, re.M))
        require(refused == {"ListOrders": "sunset", "CreateOrder": "brownout"},
                f"the refused JSON requests were not counted one under sunset, one under brownout: {refused}")
        shed_metrics = parse_metrics(shed_text)
        shedder.stop(kill=True)

        # TLS, which the overlay does not configure: a third gateway on the same files with a
        # certificate that expires in 30 days, for the series that says when (what is wrong
        # with it is said last, so the checks of the dashboard and alerts still get /metrics).
        tls_metrics, tls_problem = tls_gateway(binary, work, etc, upstream, procs, loopback)

        backend.stop()
        status, answer = http(addr, method, b'{"id": "1"}', "application/json")
        require(status == 503, f"GetOrder with the upstream stopped answered {status}, not 503: {answer[:300]!r}")
        status, text = http(admin, "/metrics")
        require(status == 200, f"/metrics answered {status}")
        names, seen = parse_metrics(text.decode())
        for other in (shed_metrics, tls_metrics):
            names |= other[0]
            for series, labels in other[1].items():
                for label, values in labels.items():
                    seen.setdefault(series, {}).setdefault(label, set()).update(values)
        state["metrics"] = (names, seen)
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
        survived = gateway.p.poll() is None and http(admin, "/healthz")[0] == 200 and gateway.p.poll() is None
        reload_enabled = re.search(r"(?m)^ExecReload=.*-HUP", UNIT.read_text()) is not None
        if survived:
            require(reload_enabled, "protogate lives on after SIGHUP: deploy/systemd/protogate.service can have "
                                    "ExecReload=/bin/kill -HUP $MAINPID (enable it, and rewrite its comment)")
        else:
            require(not reload_enabled, f"SIGHUP ends protogate (exit {gateway.p.returncode}), yet "
                                        "deploy/systemd/protogate.service has ExecReload=kill -HUP: `systemctl reload` "
                                        "would stop the gateway")
        require(tls_problem is None, tls_problem)
    finally:
        for p in reversed(procs):
            p.stop(kill=p.name != "backend")
        shutil.rmtree(work, ignore_errors=True)


def tls_gateway(binary, work, etc, upstream, procs, loopback):
    """A gateway on the overlay's files with a self-signed certificate valid for 30 days
    (made by openssl): its /metrics, and what is wrong with
    protogate_tls_certificate_expiration_timestamp_seconds{name="server"} there (None: it says
    when the certificate expires)."""
    openssl = shutil.which("openssl")
    require(openssl, "openssl is not installed (Debian's openssl package): no certificate for the TLS gateway")
    cert, key = work / "tls.crt", work / "tls.key"
    r = run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
             "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)])
    require(r.returncode == 0, f"openssl req: {r.stderr}")
    r = run([openssl, "x509", "-noout", "-enddate", "-in", str(cert)])
    not_after = calendar.timegm(time.strptime(r.stdout.strip().split("=", 1)[1], "%b %d %H:%M:%S %Y GMT"))
    tls = Proc([str(binary), "serve", "--config", str(etc / "protogate.toml"), *loopback, "--upstream", f"http://{upstream}",
                "--tls-cert", str(cert), "--tls-key", str(key)], work, "tls")
    procs.append(tls)
    tls.wait_listening(r"listening on https://(127\.0\.0\.1:\d+)", "it listens with TLS")
    status, text = http(tls.wait_admin(), "/metrics")
    require(status == 200, f"the TLS gateway's /metrics answered {status}")
    text = text.decode()
    tls.stop(kill=True)
    m = re.search(r'^protogate_tls_certificate_expiration_timestamp_seconds\{name="server"\} (\S+)$', text, re.M)
    if not m:
        return parse_metrics(text), ("protogate_tls_certificate_expiration_timestamp_seconds{name=\"server\"} is not in the "
                                     "/metrics of a gateway with a TLS certificate")
    if abs(float(m.group(1)) - not_after) >= 2:
        return parse_metrics(text), (f"protogate_tls_certificate_expiration_timestamp_seconds{{name=\"server\"}} is {m.group(1)}, "
                                     f"not the certificate's notAfter ({not_after:.0f}, unix seconds)")
    return parse_metrics(text), None


# --- Dashboard and alerts -------------------------------------------------------------------

SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def check_queries(exprs, names, seen, where):
    """Every metric name, label and (exact) label value the queries use is the gateway's."""
    all_labels = set(TARGET_LABELS) | {label for labels in seen.values() for label in labels}
    used = set()
    for expr in exprs:
        # The gateway's own series, and the process's (process_cpu_seconds_total, …).
        for metric in set(re.findall(r"\b(?:protogate|process)_[a-zA-Z0-9_]+\b", expr)):
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
                   "protogate_shed_total", "protogate_connections", "protogate_requests_in_flight",
                   "protogate_client_requests_total", "protogate_client_downgrades_total", "protogate_build_info",
                   "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        require(wanted in used, f"the dashboard shows no {wanted}")
    # Every query parses as PromQL: promtool checks them as recording rules, with Grafana's
    # variables given values (its ranges a duration, the rest a regular expression).
    exe = promtool()
    ranges = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
    concrete = [re.sub(r"\$(\w+)", ".*", re.sub(r"\$__(?:rate_interval|interval|range)\b", lambda m: ranges[m.group(0)], q))
                for q in queries]
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
                   "ProtogateDowngradesRising", "ProtogateShedding", "ProtogateUpstreamNoHealthyEndpoints",
                   "ProtogateReloadFailed", "ProtogateJsonRefused", "ProtogateCertificateExpiring"):
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
    # Every alert is seen firing, and not firing, by some test.
    firing, quiet = set(), set()
    for test in tests:
        for case in yaml.safe_load(test.read_text())["tests"]:
            for a in case.get("alert_rule_test", []):
                (firing if a.get("exp_alerts") else quiet).add(a["alertname"])
    require(names <= firing, f"alerts no unit test sees firing: {sorted(names - firing)}")
    require(names <= quiet, f"alerts no unit test sees quiet: {sorted(names - quiet)}")


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


# --- Compose --------------------------------------------------------------------------------

def compose_schema():
    """The Compose Specification's JSON schema, as check-jsonschema ships it (its
    vendor.compose-spec builtin, from the compose-spec project; Apache-2.0)."""
    try:
        from importlib import resources
        text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    except ModuleNotFoundError:
        raise Fail("check-jsonschema is not installed (make deploy-env): no Compose Specification schema to check against")
    return json.loads(text)


def compose_mounts(service):
    """A service's bind mounts: the path in the container → the file or directory on the host."""
    out = {}
    for v in service.get("volumes", []):
        source, target = (v.split(":")[:2]) if isinstance(v, str) else (v.get("source"), v["target"])
        if source and source.startswith((".", "/")):
            out[target] = (COMPOSE / source).resolve()
    return out


def compose_ports(service):
    """(host address, host port, container port) of each published port (short syntax)."""
    out = []
    for p in service.get("ports", []):
        parts = str(p).split(":")
        require(len(parts) == 3, f"compose.yaml: port {p}: publish as HOST_IP:HOST_PORT:CONTAINER_PORT")
        out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def port_of(address):
    m = re.search(r":(\d+)$", str(address))
    require(m, f"{address!r} names no port")
    return int(m.group(1))


@check("compose: deploy/compose/ validated; its services, configurations and mounts agree; the gateway loads its config")
def check_compose(state, binary):
    path = COMPOSE / "compose.yaml"
    where = str(path.relative_to(ROOT))
    compose = load_docs(path.read_text(), where)[0]
    errors = sorted(jsonschema.Draft202012Validator(compose_schema()).iter_errors(compose), key=lambda e: list(e.absolute_path))
    require(not errors, f"{where} against the Compose Specification's schema:\n" +
            "\n".join(f"  {'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors))
    docker = shutil.which("docker")
    if docker and run([docker, "compose", "version"]).returncode == 0:
        r = run([docker, "compose", "-f", str(path), "config", "--quiet"])
        require(r.returncode == 0, f"docker compose config:\n{r.stdout}{r.stderr}")
    else:
        print("NOTE compose: Docker's compose plugin is not installed: deploy/compose/compose.yaml is checked against the "
              "Compose Specification's schema, not by `docker compose config`")
    services = compose["services"]

    def command(s):
        return s.get("command") or []

    # The image deploy/Dockerfile builds, built once, run by the backend and every gateway.
    builders = {n: s for n, s in services.items() if "build" in s}
    require(len(builders) == 1, f"{where}: {len(builders)} services build an image, expected one (the others run it)")
    build = list(builders.values())[0]["build"]
    require((COMPOSE / build["context"]).resolve() == ROOT and build.get("dockerfile") == "deploy/Dockerfile",
            f"{where}: the image should be built from the repository's root with deploy/Dockerfile")
    image = list(builders.values())[0]["image"]

    backends = {n: s for n, s in services.items() if command(s)[:2] == ["demo", "--backend-only"]}
    require(len(backends) == 1, f"{where}: {len(backends)} services run `protogate demo --backend-only`, expected one")
    backend_name, backend = next(iter(backends.items()))
    listen = command(backend)[command(backend).index("--listen") + 1]
    require(not listen.startswith("127."), f"{where}: the backend listens on {listen}, which the gateways cannot reach")

    prometheus = {n: s for n, s in services.items() if str(s.get("image", "")).startswith("prom/prometheus:")}
    grafana = {n: s for n, s in services.items() if str(s.get("image", "")).startswith("grafana/grafana:")}
    require(len(prometheus) == 1 and len(grafana) == 1, f"{where}: one Prometheus and one Grafana expected")
    prom_name, prom = next(iter(prometheus.items()))
    graf_name, graf = next(iter(grafana.items()))

    # Three replicas of the gateway, each named, each found under one shared name.
    gateways = {n: s for n, s in services.items() if command(s)[:1] == ["serve"]}
    require(len(gateways) == 3, f"{where}: {len(gateways)} gateway replicas, expected 3")
    names, aliases = set(), None
    drain = duration_s(readme_default("drain_delay"))
    upstream_timeout = duration_s(readme_default("upstream_timeout"))
    for name, s in gateways.items():
        require(s.get("image") == image, f"{where}: {name} runs {s.get('image')}, not the image built from deploy/Dockerfile ({image})")
        require(command(s) == ["serve", "--config", "/etc/protogate/protogate.toml"],
                f"{where}: {name} should run serve --config /etc/protogate/protogate.toml")
        env = s.get("environment", {})
        if isinstance(env, list):
            env = dict(e.split("=", 1) for e in env)
        require(env.get("POD_NAME") and env.get("POD_NAME") == s.get("hostname"),
                f"{where}: {name} should set POD_NAME to its hostname ({s.get('hostname')}), not {env.get('POD_NAME')!r}")
        names.add(env["POD_NAME"])
        own = set(s.get("networks", {}).get("default", {}).get("aliases", []))
        aliases = own if aliases is None else aliases & own
        mounts = compose_mounts(s)
        require(mounts.get("/etc/protogate/protogate.toml") == COMPOSE / "protogate.toml",
                f"{where}: {name} does not mount deploy/compose/protogate.toml at /etc/protogate/protogate.toml")
        require(mounts.get("/etc/protogate/proto") == ROOT / "proto", f"{where}: {name} does not mount proto/ at /etc/protogate/proto")
        require(duration_s(s.get("stop_grace_period", "10s")) > drain + upstream_timeout,
                f"{where}: {name}'s stop_grace_period does not exceed drain_delay + upstream_timeout ({drain + upstream_timeout:g} s)")
        require(s.get("read_only") is True and s.get("cap_drop") == ["ALL"], f"{where}: {name} should be read-only with no capabilities")
        require(backend_name in s.get("depends_on", []), f"{where}: {name} does not start after {backend_name}")
    require(len(names) == 3, f"{where}: the replicas' POD_NAMEs are not distinct: {sorted(names)}")
    require(aliases, f"{where}: the replicas share no network alias for Prometheus to find them by")

    config = tomllib.loads((COMPOSE / "protogate.toml").read_text())
    require(port_of(config.get("listen")) == 8080 and not str(config["listen"]).startswith("127."),
            f"protogate.toml (compose): listen should be \":8080\", not {config.get('listen')!r}")
    require(config.get("admin_listen") == f":{ADMIN_PORT}", f"protogate.toml (compose): admin_listen should be \":{ADMIN_PORT}\"")
    require(config.get("upstream") == f"http://{backend_name}:{port_of(listen)}",
            f"protogate.toml (compose): upstream {config.get('upstream')} is not the backend (http://{backend_name}:{port_of(listen)})")
    require(config.get("migration", {}).get("fleet_prometheus") == f"http://{prom_name}:9090",
            f"protogate.toml (compose): [migration] fleet_prometheus should be http://{prom_name}:9090")
    for p in config.get("protos", []):
        require(p.startswith("proto/") and (ROOT / p).exists(), f"protogate.toml (compose): {p} is not under the mounted proto/")

    # Published ports: loopback, none twice; each replica's API and admin port, Grafana's 3000.
    published = [(n, *p) for n, s in services.items() for p in compose_ports(s)]
    host_ports = [p[2] for p in published]
    require(len(host_ports) == len(set(host_ports)), f"{where}: a host port is published twice: {sorted(host_ports)}")
    require(all(p[1] == "127.0.0.1" for p in published), f"{where}: publish on 127.0.0.1 only (Grafana lets anonymous viewers in)")
    for name in gateways:
        inside = sorted(p[3] for p in published if p[0] == name)
        require(inside == [8080, ADMIN_PORT], f"{where}: {name} should publish its ports 8080 and {ADMIN_PORT}, not {inside}")
    require((graf_name, "127.0.0.1", 3000, 3000) in published, f"{where}: Grafana should be on the host's port 3000")
    require(any(p[0] == prom_name and p[3] == 9090 for p in published), f"{where}: Prometheus's port 9090 is not published")

    # Prometheus: its configuration as mounted, checked by promtool; every replica's admin
    # port found by DNS under the replicas' shared name, every 5 s, as job "protogate".
    mounts = compose_mounts(prom)
    require(mounts.get("/etc/prometheus/prometheus.yml") == COMPOSE / "prometheus.yml",
            f"{where}: Prometheus does not read deploy/compose/prometheus.yml")
    prom_config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in prom_config.get("scrape_configs", [])}
    require("protogate" in jobs, "prometheus.yml has no job protogate (the job ProtogateDown names)")
    job = jobs["protogate"]
    interval = job.get("scrape_interval", prom_config.get("global", {}).get("scrape_interval", "1m"))
    require(duration_s(interval) == 5, f"prometheus.yml: job protogate scrapes every {interval}, not 5s")
    sd = job.get("dns_sd_configs", [])
    require(len(sd) == 1 and sd[0].get("type") == "A" and sd[0].get("port") == ADMIN_PORT and set(sd[0].get("names", [])) <= aliases,
            f"prometheus.yml: job protogate should find the replicas by dns_sd_configs (type A, port {ADMIN_PORT}) "
            f"under their shared name {sorted(aliases)}")
    rules = [PurePosixPath("/etc/prometheus") / f for f in prom_config.get("rule_files", [])]
    for f in rules:
        require(str(f) in mounts, f"prometheus.yml's rule file {f} is not mounted")
    require(mounts.get("/etc/prometheus/alerts.yaml") == ALERTS, f"{where}: Prometheus does not mount deploy/prometheus/alerts.yaml")
    exe = shutil.which("promtool")  # without it, a skip once the rest is checked
    if exe:
        with tempfile.TemporaryDirectory() as d:
            for target, source in mounts.items():
                if target.startswith("/etc/prometheus/"):
                    shutil.copyfile(source, Path(d) / target.removeprefix("/etc/prometheus/"))
            r = run([exe, "check", "config", str(Path(d) / "prometheus.yml")])
            require(r.returncode == 0, f"promtool check config deploy/compose/prometheus.yml:\n{r.stdout}{r.stderr}")

    # Grafana: the data source is that Prometheus; the dashboard provider reads the directory
    # deploy/grafana/protogate.json itself is mounted in (not a copy).
    mounts = compose_mounts(graf)
    provisioning = {kind: [yaml.safe_load(source.read_text()) for target, source in mounts.items()
                           if target.startswith(f"/etc/grafana/provisioning/{kind}/")]
                    for kind in ("datasources", "dashboards")}
    require(len(provisioning["datasources"]) == 1 and len(provisioning["dashboards"]) == 1,
            f"{where}: Grafana should mount one data source and one dashboard provisioning file")
    ds = provisioning["datasources"][0]
    require(ds.get("apiVersion") == 1 and len(ds.get("datasources", [])) == 1, "the Grafana data source file: apiVersion 1, one data source")
    ds = ds["datasources"][0]
    require(ds.get("type") == "prometheus" and ds.get("url") == f"http://{prom_name}:9090" and ds.get("isDefault") is True,
            f"the Grafana data source should be the default, type prometheus, at http://{prom_name}:9090")
    dash = [target for target, source in mounts.items() if source == DASHBOARD]
    require(len(dash) == 1, f"{where}: Grafana does not mount deploy/grafana/protogate.json")
    provider = provisioning["dashboards"][0]
    require(provider.get("apiVersion") == 1 and len(provider.get("providers", [])) == 1, "the Grafana dashboard file: apiVersion 1, one provider")
    provider = provider["providers"][0]
    require(provider.get("type") == "file" and provider.get("options", {}).get("path") == str(PurePosixPath(dash[0]).parent),
            f"the Grafana dashboard provider should read {PurePosixPath(dash[0]).parent}, where protogate.json is mounted")
    home = graf.get("environment", {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    require(home in (None, dash[0]), f"{where}: Grafana's home dashboard {home} is not the one mounted")

    # The gateway accepts its configuration, laid out as the containers see /etc/protogate.
    require(binary.exists(), f"{binary} does not exist (cargo build -p protogate)")
    with tempfile.TemporaryDirectory() as d:
        shutil.copyfile(COMPOSE / "protogate.toml", Path(d) / "protogate.toml")
        shutil.copytree(ROOT / "proto", Path(d) / "proto")
        r = run([str(binary), "check", "--config", str(Path(d) / "protogate.toml")])
        require(r.returncode == 0, f"protogate check --config deploy/compose/protogate.toml (as mounted):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    if not exe:
        promtool()


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
    check_compose(state, binary)
    skipped = f", {results['skipped']} skipped" if results["skipped"] else ""
    print(f"({time.monotonic() - t:.1f} s)")
    print(f"deploy-check: {results['passed']} passed, {results['failed']} failed{skipped}")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
