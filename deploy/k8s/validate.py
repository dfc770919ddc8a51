#!/usr/bin/env python3
"""Offline validation of the kvindex Kubernetes manifests.

Renders each kustomization with `kubectl kustomize` (no cluster needed) and
checks every object it produces:

  * against the official Kubernetes Python client's model for its kind:
    unknown fields at any depth (inside lists and typed maps too), wrong
    types, missing required fields, and the enumerated values the models
    do not check themselves;
  * for consistency across objects: workload selectors match their pod
    templates; Services, PodDisruptionBudgets and NetworkPolicies select
    pods of the render, on ports those pods declare; probes, volume
    mounts, ConfigMap keys, service accounts and RBAC references resolve;
    every $(VAR) in a command, an argument or an env value is defined;
  * for kvindex itself: every flag of a kvindex container is one its
    binary's --help lists (with a value when it takes one, an integer when
    it takes N, repeated only when repeatable); the coordinator's --shards
    names exactly the pods of the shard StatefulSet through its headless
    Service; the coordinator may list and watch pods; the admin token is
    mounted from a Secret; data directories sit on writable volumes; the
    containers run unprivileged; and the engine pods its --watch-label
    selects carry only annotations the watcher reads, with ports and vLLM
    settings (data-parallel size, block size, kv-events endpoints) that
    agree with what kvindex derives for each rank.

Usage:
  validate.py --coordinator BIN --shard BIN [--kubectl KUBECTL] [DIR...]

DIR defaults to base/ and every examples/*/ beside this script. Exit
status 0 when everything passed, 1 when a check failed, 2 on a usage or
environment error. Needs python3-yaml and python3-kubernetes (Debian 12),
and kubectl for `kubectl kustomize`.
"""

import argparse
import glob
import inspect
import json
import os
import re
import subprocess
import sys

import yaml

try:
    from kubernetes import client as k8s
except ImportError:  # pragma: no cover - environment problem
    sys.stderr.write("validate.py: the kubernetes Python client is missing "
                     "(Debian: python3-kubernetes)\n")
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))

# apiVersion -> kinds checked; each maps to the client's V1<Kind> model.
KINDS = {
    "v1": {"ConfigMap", "Secret", "Service", "ServiceAccount", "Namespace",
           "PersistentVolumeClaim", "Pod", "LimitRange", "ResourceQuota"},
    "apps/v1": {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"},
    "batch/v1": {"Job", "CronJob"},
    "policy/v1": {"PodDisruptionBudget"},
    "networking.k8s.io/v1": {"NetworkPolicy", "Ingress"},
    "rbac.authorization.k8s.io/v1": {"Role", "RoleBinding", "ClusterRole",
                                     "ClusterRoleBinding"},
}

# Enumerated string fields (model class, attribute) -> allowed values. The
# generated models do not check these; the API server would.
PROTOCOLS = {"TCP", "UDP", "SCTP"}
ENUMS = {
    ("V1ContainerPort", "protocol"): PROTOCOLS,
    ("V1ServicePort", "protocol"): PROTOCOLS,
    ("V1NetworkPolicyPort", "protocol"): PROTOCOLS,
    ("V1Container", "image_pull_policy"): {"Always", "Never", "IfNotPresent"},
    ("V1PodSpec", "restart_policy"): {"Always", "OnFailure", "Never"},
    ("V1DeploymentStrategy", "type"): {"Recreate", "RollingUpdate"},
    ("V1StatefulSetSpec", "pod_management_policy"): {"OrderedReady",
                                                     "Parallel"},
    ("V1StatefulSetUpdateStrategy", "type"): {"RollingUpdate", "OnDelete"},
    ("V1ServiceSpec", "type"): {"ClusterIP", "NodePort", "LoadBalancer",
                                "ExternalName"},
    ("V1NetworkPolicySpec", "policy_types"): {"Ingress", "Egress"},
    ("V1PersistentVolumeClaimSpec", "access_modes"): {
        "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"},
    ("V1PodSecurityContext", "fs_group_change_policy"): {"OnRootMismatch",
                                                         "Always"},
    ("V1SeccompProfile", "type"): {"RuntimeDefault", "Unconfined",
                                   "Localhost"},
    ("V1LabelSelectorRequirement", "operator"): {"In", "NotIn", "Exists",
                                                 "DoesNotExist"},
    ("V1HTTPGetAction", "scheme"): {"HTTP", "HTTPS"},
}

# Fields the models type as `object` that are IntOrString in the API.
INT_OR_STRING = {
    ("V1ServicePort", "target_port"), ("V1NetworkPolicyPort", "port"),
    ("V1HTTPGetAction", "port"), ("V1TCPSocketAction", "port"),
    ("V1PodDisruptionBudgetSpec", "max_unavailable"),
    ("V1PodDisruptionBudgetSpec", "min_available"),
    ("V1RollingUpdateDeployment", "max_surge"),
    ("V1RollingUpdateDeployment", "max_unavailable"),
}

# Resource quantities: strings in the models, numbers allowed by the API.
QUANTITIES = {("V1ResourceRequirements", "limits"),
              ("V1ResourceRequirements", "requests"),
              ("V1EmptyDirVolumeSource", "size_limit")}
QUANTITY_RE = re.compile(
    r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")

FIELD_PATH_RE = re.compile(
    r"^(metadata\.(name|namespace|uid)|spec\.(nodeName|serviceAccountName)"
    r"|status\.(hostIP|podIP|podIPs)"
    r"|metadata\.(labels|annotations)\['[^']+'\])$")
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PORT_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")

BINARIES = ("kvindex-coordinator", "kvindex-shard", "kvindex-tap")

# What the coordinator's pod watcher reads from a pod's annotations.
ANNOTATIONS = {
    "kvindex.io/dp-size": (1, 65536),
    "kvindex.io/zmq-port": (1, 65535),
    "kvindex.io/replay-port": (1, 65535),
    "kvindex.io/recover-port": (1, 65535),
    "kvindex.io/block-size": (1, 1 << 20),
    "kvindex.io/model": None,
}

# vLLM's KVEventsConfig fields (vllm/config/kv_events.py).
KV_EVENTS_FIELDS = {"enable_kv_cache_events", "publisher", "endpoint",
                    "replay_endpoint", "buffer_steps", "hwm",
                    "max_queue_size", "topic"}

WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet",
                  "Job", "CronJob", "Pod"}


class Report:
    """Collects failures and notes, each tagged with where it was found."""

    def __init__(self):
        self.errors = []
        self.notes = []

    def err(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def note(self, where, msg):
        self.notes.append(f"{where}: {msg}")


def distance(a, b):
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1,
                           prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def suggest(word, choices):
    """' (did you mean X?)' for the closest choice within a typo's reach."""
    best = min(((distance(word, c), c) for c in choices if isinstance(c, str)),
               default=None)
    if best is None or best[0] > max(2, len(word) // 8):
        return ""
    return f" (did you mean {best[1]}?)"


def tname(v):
    return {bool: "a boolean", int: "an integer", float: "a number",
            str: "a string", list: "a list", dict: "a map"}.get(
                type(v), type(v).__name__)


# ---------------------------------------------------------------------------
# Schema: the Kubernetes client's models.

_required = {}


def required_attrs(cls):
    """Attributes whose setter refuses None: the model's required fields."""
    if cls not in _required:
        req = set()
        for attr in cls.openapi_types:
            prop = getattr(cls, attr, None)
            fset = getattr(prop, "fset", None)
            if fset is not None and \
                    "must not be `None`" in inspect.getsource(fset):
                req.add(attr)
        _required[cls] = req
    return _required[cls]


def model_class(name):
    return getattr(k8s, name, None)


def check_value(rep, where, path, typ, value, owner, attr):
    """Checks value against the client type string typ ('list[V1Container]',
    'dict(str, str)', 'int', 'V1Probe', ...)."""
    if value is None:
        return
    if typ.startswith("list["):
        if not isinstance(value, list):
            rep.err(where, f"{path}: expected a list, got {tname(value)}")
            return
        for i, item in enumerate(value):
            if item is None:
                rep.err(where, f"{path}[{i}]: null list item")
                continue
            check_value(rep, where, f"{path}[{i}]", typ[5:-1], item, owner,
                        attr)
        return
    m = re.match(r"^dict\(([^,]+), (.*)\)$", typ)
    if m:
        if not isinstance(value, dict):
            rep.err(where, f"{path}: expected a map, got {tname(value)}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                rep.err(where, f"{path}: key {k!r} is not a string")
                continue
            check_value(rep, where, f'{path}["{k}"]', m.group(2), v, owner,
                        attr)
        return
    key = (owner.__name__ if owner else "", attr)
    if key in QUANTITIES:
        if isinstance(value, bool) or \
                not isinstance(value, (str, int, float)) or \
                not QUANTITY_RE.match(str(value)):
            rep.err(where, f"{path}: {value!r} is not a resource quantity")
        return
    if typ == "str":
        if not isinstance(value, str):
            rep.err(where, f"{path}: expected a string, got {tname(value)} "
                    f"({value!r})")
        elif key in ENUMS and value not in ENUMS[key]:
            rep.err(where, f"{path}: {value!r} is not one of "
                    f"{', '.join(sorted(ENUMS[key]))}"
                    f"{suggest(value, ENUMS[key])}")
        return
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            rep.err(where, f"{path}: expected an integer, got {tname(value)} "
                    f"({value!r})")
        return
    if typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            rep.err(where, f"{path}: expected a number, got {tname(value)}")
        return
    if typ == "bool":
        if not isinstance(value, bool):
            rep.err(where, f"{path}: expected a boolean, got {tname(value)} "
                    f"({value!r})")
        return
    if typ in ("datetime", "date"):
        if not isinstance(value, str):
            rep.err(where, f"{path}: expected a timestamp string")
        return
    if typ == "object":
        if key in INT_OR_STRING and (isinstance(value, bool) or
                                     not isinstance(value, (int, str))):
            rep.err(where, f"{path}: expected an integer or a string, got "
                    f"{tname(value)}")
        return
    cls = model_class(typ)
    if cls is None:
        rep.err(where, f"{path}: no model for type {typ}")
        return
    check_model(rep, where, path, cls, value)


def check_model(rep, where, path, cls, value):
    if not isinstance(value, dict):
        rep.err(where, f"{path or '.'}: expected an object, got "
                f"{tname(value)}")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for key, v in value.items():
        attr = by_json.get(key)
        here = f"{path}.{key}" if path else key
        if attr is None:
            rep.err(where, f"{here}: unknown field{suggest(key, by_json)}")
            continue
        check_value(rep, where, here, cls.openapi_types[attr], v, cls, attr)
    for attr in sorted(required_attrs(cls)):
        key = cls.attribute_map[attr]
        if value.get(key) is None:
            here = f"{path}.{key}" if path else key
            rep.err(where, f"{here}: required field is missing")


# ---------------------------------------------------------------------------
# Rendering.

def render(kubectl, target, rep):
    """Runs `kubectl kustomize target`; returns the objects or None."""
    try:
        p = subprocess.run([kubectl, "kustomize", target],
                           capture_output=True, text=True, timeout=120)
    except OSError as e:
        rep.err(target, f"cannot run {kubectl}: {e}")
        return None
    if p.returncode != 0:
        rep.err(target, "kubectl kustomize failed:\n" + p.stderr.strip())
        return None
    try:
        docs = [d for d in yaml.safe_load_all(p.stdout) if d is not None]
    except yaml.YAMLError as e:
        rep.err(target, f"rendered YAML does not parse: {e}")
        return None
    return docs


KUSTOMIZE_FILE_FIELDS = ("resources", "patchesStrategicMerge", "crds",
                         "components")


def check_listed(target, rep, seen):
    """Every manifest beside a kustomization.yaml must be one it uses:
    kubectl apply -k silently skips the others."""
    target = os.path.abspath(target)
    if target in seen:
        return
    seen.add(target)
    kfile = None
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if os.path.exists(os.path.join(target, name)):
            kfile = os.path.join(target, name)
    if kfile is None:
        rep.err(target, "no kustomization.yaml")
        return
    with open(kfile, encoding="utf-8") as f:
        kust = yaml.safe_load(f) or {}
    used = set()
    for field in KUSTOMIZE_FILE_FIELDS + ("bases",):
        for entry in kust.get(field) or []:
            if not isinstance(entry, str):
                continue
            path = os.path.normpath(os.path.join(target, entry))
            if os.path.isdir(path):
                check_listed(path, rep, seen)
            else:
                used.add(path)
    for patch in kust.get("patchesJson6902") or []:
        if isinstance(patch, dict) and "path" in patch:
            used.add(os.path.normpath(os.path.join(target, patch["path"])))
    for patch in kust.get("patches") or []:
        if isinstance(patch, dict) and "path" in patch:
            used.add(os.path.normpath(os.path.join(target, patch["path"])))
    for f in sorted(glob.glob(os.path.join(target, "*.yaml")) +
                    glob.glob(os.path.join(target, "*.yml"))):
        if os.path.basename(f).startswith("kustomization"):
            continue
        if os.path.normpath(f) not in used:
            rep.err(rel(f), "not listed in its kustomization.yaml "
                    "(kubectl apply -k would skip it)")


def rel(path):
    return os.path.relpath(path, os.path.dirname(os.path.dirname(HERE)))


# ---------------------------------------------------------------------------
# Objects and pod templates.

def name_of(obj):
    return (obj.get("metadata") or {}).get("name") or "?"


def ns_of(obj):
    return (obj.get("metadata") or {}).get("namespace")


def pod_template(obj):
    """(template metadata, pod spec, path) of a workload, or None."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        return obj.get("metadata") or {}, spec, "spec"
    if kind == "CronJob":
        tpl = (((spec.get("jobTemplate") or {}).get("spec") or {})
               .get("template") or {})
        return (tpl.get("metadata") or {}, tpl.get("spec") or {},
                "spec.jobTemplate.spec.template.spec")
    if kind in WORKLOAD_KINDS:
        tpl = spec.get("template") or {}
        return (tpl.get("metadata") or {}, tpl.get("spec") or {},
                "spec.template.spec")
    return None


def selector_matches(sel, labels):
    """A LabelSelector object (matchLabels, matchExpressions) vs labels."""
    if not isinstance(sel, dict):
        return False
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def parse_selector_string(text):
    """A label selector as kubectl and the API take it ('a=b,c in (x,y),!d')
    -> list of (key, op, values), or raises ValueError."""
    reqs, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            reqs.append(cur)
            cur = ""
        else:
            cur += ch
    reqs.append(cur)
    out = []
    for r in (x.strip() for x in reqs):
        if not r:
            raise ValueError("empty requirement")
        m = re.match(r"^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$", r)
        if m:
            vals = [v.strip() for v in m.group(3).split(",")]
            out.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=(),]*)$", r)
        if m:
            op = {"==": "=", "=": "=", "!=": "!="}[m.group(2)]
            out.append((m.group(1), op, [m.group(3)]))
            continue
        m = re.match(r"^(!?)([^\s!=()]+)$", r)
        if m:
            out.append((m.group(2), "!" if m.group(1) else "exists", []))
            continue
        raise ValueError(f"cannot parse {r!r}")
    for key, _, vals in out:
        for part in key.split("/")[-1:]:
            if not part or len(part) > 63 or not LABEL_NAME_RE.match(part):
                raise ValueError(f"{key!r} is not a label key")
        for v in vals:
            if len(v) > 63 or not LABEL_NAME_RE.match(v):
                raise ValueError(f"{v!r} is not a label value")
    return out


def selector_string_matches(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        if op == "=" and labels.get(key) != vals[0]:
            return False
        if op == "!=" and labels.get(key) == vals[0]:
            return False
        if op == "in" and labels.get(key) not in vals:
            return False
        if op == "notin" and key in labels and labels[key] in vals:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!" and key in labels:
            return False
    return True


def container_ports(spec):
    """{name: port} and {port} over all containers of a pod spec."""
    names, numbers = {}, set()
    for c in (spec.get("containers") or []) + \
            (spec.get("initContainers") or []):
        for p in c.get("ports") or []:
            if isinstance(p.get("containerPort"), int):
                numbers.add(p["containerPort"])
                if p.get("name"):
                    names[p["name"]] = p["containerPort"]
    return names, numbers


def port_declared(port, names, numbers):
    if isinstance(port, bool):
        return False
    if isinstance(port, int):
        return port in numbers
    if isinstance(port, str):
        return port in names
    return False


# ---------------------------------------------------------------------------
# Environment and $(VAR) expansion, as the kubelet does it.

VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text, env):
    """Expands $(VAR) from env; returns (text, undefined names)."""
    missing = []

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        if m.group(1) in env:
            return env[m.group(1)]
        missing.append(m.group(1))
        return m.group(0)

    return VAR_RE.sub(sub, text), missing


def container_env(rep, where, path, c, configmaps, ns):
    """The container's environment as {name: value}; values that only the
    kubelet knows are placeholders like <fieldRef:metadata.name>."""
    env = {}
    for i, ef in enumerate(c.get("envFrom") or []):
        ref = ef.get("configMapRef")
        if ref:
            cm = configmaps.get((ns, ref.get("name")))
            if cm is None and not ref.get("optional"):
                rep.err(where, f"{path}.envFrom[{i}]: ConfigMap "
                        f"{ref.get('name')!r} is not in this render")
            for k, v in ((cm or {}).get("data") or {}).items():
                env[(ef.get("prefix") or "") + k] = str(v)
        elif ef.get("secretRef"):
            rep.note(where, f"{path}.envFrom[{i}]: Secret "
                     f"{ef['secretRef'].get('name')!r} must exist in the "
                     f"cluster")
    for i, e in enumerate(c.get("env") or []):
        name, here = e.get("name"), f"{path}.env[{i}]"
        if "value" in e and e["value"] is not None:
            val, missing = expand(str(e["value"]), env)
            for m in missing:
                rep.err(where, f"{here}.value: $({m}) is not defined before "
                        f"{name}")
            env[name] = val
            continue
        src = e.get("valueFrom") or {}
        if "fieldRef" in src:
            fp = (src["fieldRef"] or {}).get("fieldPath", "")
            if not FIELD_PATH_RE.match(fp):
                rep.err(where, f"{here}.valueFrom.fieldRef.fieldPath: "
                        f"{fp!r} is not a field the downward API offers")
            env[name] = f"<fieldRef:{fp}>"
        elif "configMapKeyRef" in src:
            ref = src["configMapKeyRef"] or {}
            cm = configmaps.get((ns, ref.get("name")))
            data = (cm or {}).get("data") or {}
            if ref.get("optional"):
                env[name] = str(data.get(ref.get("key"), ""))
            elif cm is None:
                rep.err(where, f"{here}.valueFrom.configMapKeyRef: ConfigMap "
                        f"{ref.get('name')!r} is not in this render")
            elif ref.get("key") not in data:
                rep.err(where, f"{here}.valueFrom.configMapKeyRef: ConfigMap "
                        f"{ref.get('name')!r} has no key {ref.get('key')!r}"
                        f"{suggest(str(ref.get('key')), data)}")
            else:
                env[name] = str(data[ref.get("key")])
        elif "secretKeyRef" in src:
            ref = src["secretKeyRef"] or {}
            env[name] = f"<secret:{ref.get('name')}/{ref.get('key')}>"
        elif "resourceFieldRef" in src:
            env[name] = f"<resourceFieldRef:{src['resourceFieldRef']}>"
        else:
            env[name] = ""
    return env


# ---------------------------------------------------------------------------
# The binaries' flags.

_help_cache = {}


def binary_flags(path):
    """{flag: (metavar or None, repeatable)} parsed from `path --help`."""
    if path in _help_cache:
        return _help_cache[path]
    p = subprocess.run([path, "--help"], capture_output=True, text=True,
                       timeout=30)
    text = p.stdout + p.stderr
    flags, last = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s{1,8}(--[a-z0-9][a-z0-9-]*)(.*)$", line)
        if m:
            rest = m.group(2)
            mv = re.match(r"^[ =]([A-Z][A-Z0-9_=:,.\[\]/-]*)(\s|$)", rest)
            meta = mv.group(1) if mv else None
            last = m.group(1)
            flags[last] = [meta, "repeatable" in rest]
        elif last and re.match(r"^\s{10,}\S", line):
            if "repeatable" in line:
                flags[last][1] = True
        else:
            last = None
    flags.pop("--help", None)
    if not flags:
        raise RuntimeError(f"{path} --help lists no flags")
    _help_cache[path] = {k: tuple(v) for k, v in flags.items()}
    return _help_cache[path]


def parse_args(rep, where, path, binary, args, flags):
    """Checks args against flags; returns {flag: [values]}."""
    seen = {}
    i = 0
    while i < len(args):
        a, here = args[i], f"{path}[{i}]"
        if not a.startswith("--"):
            rep.err(where, f"{here}: {a!r}: {binary} takes no positional "
                    "arguments")
            i += 1
            continue
        name, eq, val = a.partition("=")
        if name not in flags:
            rep.err(where, f"{here}: {name}: not a flag of {binary} "
                    f"(its --help does not list it){suggest(name, flags)}")
            i += 1
            continue
        meta, repeatable = flags[name]
        if meta is None:
            if eq:
                rep.err(where, f"{here}: {name} takes no value")
            val = None
        elif not eq:
            if i + 1 >= len(args):
                rep.err(where, f"{here}: {name} needs a value ({meta})")
                break
            i += 1
            val = args[i]
        if meta == "N" and val is not None and "<" not in val and \
                not re.match(r"^-?[0-9]+$", val):
            rep.err(where, f"{here}: {name} {val!r}: not an integer")
        if name in seen and not repeatable:
            rep.err(where, f"{here}: {name} given twice; {binary} --help "
                    "does not say it is repeatable")
        seen.setdefault(name, []).append(val)
        i += 1
    return seen


def host_port(value):
    m = re.match(r"^(?:[a-z]+://)?(.*):([0-9]+)$", value or "")
    return (m.group(1), int(m.group(2))) if m else (None, None)


# ---------------------------------------------------------------------------
# Checks across objects.

class Render:
    def __init__(self, target, objs):
        self.target = target
        self.objs = objs
        self.configmaps = {(ns_of(o), name_of(o)): o for o in objs
                           if o.get("kind") == "ConfigMap"}
        self.pods = []  # (obj, template metadata, pod spec, path)
        for o in objs:
            t = pod_template(o)
            if t is not None:
                self.pods.append((o,) + t)

    def where(self, obj):
        return f"{rel(self.target)}: {obj.get('kind')}/{name_of(obj)}"

    def selected(self, ns, match):
        return [p for p in self.pods if ns_of(p[0]) == ns and
                match((p[1].get("labels") or {}))]


def check_labels(rep, where, meta, path):
    for field in ("labels", "annotations"):
        for k in (meta.get(field) or {}):
            prefix, _, name = k.rpartition("/")
            if prefix and not DNS_SUBDOMAIN_RE.match(prefix):
                rep.err(where, f"{path}.{field}: {k!r}: bad prefix")
            if not name or len(name) > 63 or not LABEL_NAME_RE.match(name):
                rep.err(where, f"{path}.{field}: {k!r}: bad key")
    for k, v in (meta.get("labels") or {}).items():
        if isinstance(v, str) and (len(v) > 63 or not LABEL_NAME_RE.match(v)):
            rep.err(where, f"{path}.labels[\"{k}\"]: {v!r} is not a valid "
                    "label value")


def check_pod_spec(rep, r, obj, meta, spec, path):
    where = r.where(obj)
    if obj.get("kind") != "Pod":
        check_labels(rep, where, meta,
                     path.rsplit(".spec", 1)[0] + ".metadata")
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for vct in (obj.get("spec") or {}).get("volumeClaimTemplates") or []:
        volumes[(vct.get("metadata") or {}).get("name")] = {"pvc": True}
    names = set()
    for kind in ("initContainers", "containers"):
        for ci, c in enumerate(spec.get(kind) or []):
            cpath = f"{path}.{kind}[{ci}]"
            if c.get("name") in names:
                rep.err(where, f"{cpath}.name: {c.get('name')!r} used twice")
            names.add(c.get("name"))
            pnames, pnums = {}, set()
            for pi, p in enumerate(c.get("ports") or []):
                pn, cp = p.get("name"), p.get("containerPort")
                if pn is not None and (len(pn) > 15 or
                                       not PORT_NAME_RE.match(pn) or
                                       not re.search("[a-z]", pn)):
                    rep.err(where, f"{cpath}.ports[{pi}].name: {pn!r} is not "
                            "a port name (lower case, at most 15 characters)")
                if pn in pnames:
                    rep.err(where, f"{cpath}.ports[{pi}].name: {pn!r} twice")
                if isinstance(cp, int) and not isinstance(cp, bool):
                    if not 0 < cp < 65536:
                        rep.err(where, f"{cpath}.ports[{pi}].containerPort: "
                                f"{cp} is not a port number")
                    pnums.add(cp)
                    if pn:
                        pnames[pn] = cp
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                pr = c.get(probe) or {}
                for act in ("httpGet", "tcpSocket", "grpc"):
                    if act in pr and isinstance(pr[act], dict):
                        port = pr[act].get("port")
                        if not port_declared(port, pnames, pnums):
                            rep.err(where, f"{cpath}.{probe}.{act}.port: "
                                    f"{port!r} is not a port this container "
                                    f"declares ({', '.join(sorted(pnames))})")
            for mi, m in enumerate(c.get("volumeMounts") or []):
                if m.get("name") not in volumes:
                    rep.err(where, f"{cpath}.volumeMounts[{mi}].name: "
                            f"{m.get('name')!r} is not a volume of the pod"
                            f"{suggest(str(m.get('name')), volumes)}")
            env = container_env(rep, where, cpath, c, r.configmaps,
                                ns_of(obj))
            for field in ("command", "args"):
                for ai, a in enumerate(c.get(field) or []):
                    if not isinstance(a, str):
                        continue
                    _, missing = expand(a, env)
                    for m in missing:
                        rep.err(where, f"{cpath}.{field}[{ai}]: $({m}) is "
                                "not defined in the container's env (the "
                                "kubelet would pass it literally)")
    for vi, v in enumerate(spec.get("volumes") or []):
        cmv = v.get("configMap")
        if cmv and not cmv.get("optional") and \
                (ns_of(obj), cmv.get("name")) not in r.configmaps:
            rep.err(where, f"{path}.volumes[{vi}].configMap: "
                    f"{cmv.get('name')!r} is not in this render")
        if v.get("secret"):
            rep.note(where, f"volume {v.get('name')!r}: Secret "
                     f"{v['secret'].get('secretName')!r} must exist in the "
                     "cluster")
        pvc = v.get("persistentVolumeClaim")
        if pvc and not any(o.get("kind") == "PersistentVolumeClaim" and
                           name_of(o) == pvc.get("claimName")
                           for o in r.objs):
            rep.note(where, f"volume {v.get('name')!r}: PVC "
                     f"{pvc.get('claimName')!r} must exist in the cluster")
    sa = spec.get("serviceAccountName")
    if sa and sa != "default" and not any(
            o.get("kind") == "ServiceAccount" and name_of(o) == sa and
            ns_of(o) == ns_of(obj) for o in r.objs):
        rep.err(where, f"{path}.serviceAccountName: {sa!r} is not a "
                "ServiceAccount of this render")


def check_cross(rep, r):
    for o in r.objs:
        kind, spec, where = o.get("kind"), o.get("spec") or {}, r.where(o)
        check_labels(rep, where, o.get("metadata") or {}, "metadata")
        t = pod_template(o)
        if t is not None:
            meta, pspec, path = t
            sel = spec.get("selector")
            if kind in ("Deployment", "StatefulSet", "DaemonSet",
                        "ReplicaSet") and not selector_matches(
                            sel, meta.get("labels")):
                rep.err(where, "spec.selector does not match the pod "
                        "template's labels")
            check_pod_spec(rep, r, o, meta, pspec, path)
        if kind == "StatefulSet":
            svc = spec.get("serviceName")
            s = [x for x in r.objs if x.get("kind") == "Service" and
                 name_of(x) == svc and ns_of(x) == ns_of(o)]
            if not s:
                rep.err(where, f"spec.serviceName: no Service {svc!r} in this "
                        "render")
            elif (s[0].get("spec") or {}).get("clusterIP") != "None":
                rep.err(where, f"spec.serviceName: Service {svc!r} is not "
                        "headless (clusterIP: None)")
            elif not selector_matches({"matchLabels": (s[0].get("spec") or {})
                                       .get("selector") or {}},
                                      (t[0].get("labels") or {})):
                rep.err(where, f"Service {svc!r} does not select this "
                        "StatefulSet's pods")
        if kind == "Service" and spec.get("selector"):
            pods = r.selected(ns_of(o), lambda lb: selector_matches(
                {"matchLabels": spec["selector"]}, lb))
            if not pods:
                rep.err(where, "spec.selector selects no pod of this render")
            for pi, p in enumerate(spec.get("ports") or []):
                tp = p.get("targetPort", p.get("port"))
                for po, _, pspec, _ in pods:
                    names, nums = container_ports(pspec)
                    if not port_declared(tp, names, nums):
                        rep.err(where, f"spec.ports[{pi}].targetPort: {tp!r} "
                                f"is not a port {po.get('kind')}/"
                                f"{name_of(po)} declares")
        if kind == "PodDisruptionBudget":
            if not r.selected(ns_of(o), lambda lb: selector_matches(
                    spec.get("selector"), lb)):
                rep.err(where, "spec.selector selects no pod of this render")
        if kind == "NetworkPolicy":
            pods = r.selected(ns_of(o), lambda lb: selector_matches(
                spec.get("podSelector"), lb))
            if not pods:
                rep.err(where, "spec.podSelector selects no pod of this "
                        "render")
            for ii, rule in enumerate(spec.get("ingress") or []):
                for pi, p in enumerate(rule.get("ports") or []):
                    for po, _, pspec, _ in pods:
                        names, nums = container_ports(pspec)
                        if "port" in p and not port_declared(p["port"], names,
                                                             nums):
                            rep.err(where, f"spec.ingress[{ii}].ports[{pi}]."
                                    f"port: {p['port']!r} is not a port "
                                    f"{po.get('kind')}/{name_of(po)} "
                                    "declares")
        if kind == "RoleBinding":
            ref = o.get("roleRef") or {}
            if ref.get("kind") == "Role" and not any(
                    x.get("kind") == "Role" and name_of(x) == ref.get("name")
                    for x in r.objs):
                rep.err(where, f"roleRef: no Role {ref.get('name')!r} in "
                        "this render")
            for si, s in enumerate(o.get("subjects") or []):
                if s.get("kind") == "ServiceAccount" and not any(
                        x.get("kind") == "ServiceAccount" and
                        name_of(x) == s.get("name") for x in r.objs):
                    rep.err(where, f"subjects[{si}]: no ServiceAccount "
                            f"{s.get('name')!r} in this render")


# ---------------------------------------------------------------------------
# kvindex.

def image_is_kvindex(image):
    base = (image or "").split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return base == "kvindex"


def kvindex_containers(r):
    """(obj, meta, spec, path, container, cpath, binary) for every
    container that runs a kvindex binary."""
    out = []
    for o, meta, spec, path in r.pods:
        for ci, c in enumerate(spec.get("containers") or []):
            cmd = c.get("command") or []
            binary = os.path.basename(cmd[0]) if cmd else None
            if binary in BINARIES:
                out.append((o, meta, spec, path, c,
                            f"{path}.containers[{ci}]", binary))
    return out


def mount_for(c, path):
    """The volume mount holding path and whether it is the mount point."""
    best = None
    for m in c.get("volumeMounts") or []:
        mp = (m.get("mountPath") or "").rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0]):
                best = (mp, m)
    return best


def check_kvindex(rep, r, binaries):
    found = kvindex_containers(r)
    for o, meta, spec, path, c, cpath, binary in found:
        where = r.where(o)
        # Unprivileged.
        psc, sc = spec.get("securityContext") or {}, \
            c.get("securityContext") or {}
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            rep.err(where, f"{cpath}: runAsNonRoot is not set")
        if sc.get("readOnlyRootFilesystem") is not True:
            rep.err(where, f"{cpath}.securityContext.readOnlyRootFilesystem "
                    "is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            rep.err(where, f"{cpath}.securityContext.allowPrivilegeEscalation "
                    "is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            rep.err(where, f"{cpath}.securityContext.capabilities.drop does "
                    "not include ALL")
    for o, meta, spec, path in r.pods:
        for ci, c in enumerate(spec.get("containers") or []):
            cmd = c.get("command") or []
            if image_is_kvindex(c.get("image")) and \
                    (not cmd or os.path.basename(cmd[0]) not in BINARIES):
                rep.err(r.where(o), f"{path}.containers[{ci}].command: a "
                        f"kvindex container must name one of "
                        f"{', '.join(BINARIES)} (the image has no "
                        "ENTRYPOINT)")

    parsed = []
    for o, meta, spec, path, c, cpath, binary in found:
        where = r.where(o)
        env = container_env(Report(), where, cpath, c, r.configmaps,
                            ns_of(o))
        args = [expand(a, env)[0] for a in (c.get("command") or [])[1:] +
                (c.get("args") or []) if isinstance(a, str)]
        bin_path = binaries.get(binary)
        if bin_path is None:
            rep.err(where, f"{cpath}: runs {binary}, but no path to it was "
                    "given to check its flags")
            continue
        try:
            known = binary_flags(bin_path)
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            rep.err(where, f"{cpath}: cannot read {bin_path} --help: {e}")
            continue
        flags = parse_args(rep, where, f"{cpath}.args", binary, args, known)
        parsed.append((o, meta, spec, path, c, cpath, binary, flags))
        names, nums = container_ports(spec)
        for flag in ("--http", "--metrics", "--listen"):
            for v in flags.get(flag) or []:
                _, port = host_port(v)
                if port is not None and port not in nums:
                    rep.err(where, f"{cpath}: {flag} {v}: port {port} is not "
                            "a declared containerPort")
        for v in flags.get("--data-dir") or []:
            m = mount_for(c, v.rstrip("/"))
            if m is None:
                rep.err(where, f"{cpath}: --data-dir {v} is on the read-only "
                        "root filesystem, not on a volume")
            elif m[0] == v.rstrip("/"):
                rep.err(where, f"{cpath}: --data-dir {v} is a mount point; "
                        "a corrupt store is renamed beside it, so use a "
                        "subdirectory of the mount")
            elif m[1].get("readOnly"):
                rep.err(where, f"{cpath}: --data-dir {v} is on a read-only "
                        "mount")

    shard_sets = [(o, c, flags) for o, _, _, _, c, _, b, flags in parsed
                  if b == "kvindex-shard" and o.get("kind") == "StatefulSet"]
    for o, meta, spec, path, c, cpath, binary, flags in parsed:
        if binary != "kvindex-coordinator":
            continue
        where = r.where(o)
        check_shards_flag(rep, where, cpath, flags, shard_sets)
        check_admin_token(rep, where, cpath, c, spec, flags)
        if flags.get("--watch-namespace"):
            check_watch_rbac(rep, r, o, spec, cpath, flags)
            check_engines(rep, r, where, flags, {x[0]["metadata"]["name"]
                                                 for x in found})


def check_shards_flag(rep, where, cpath, flags, shard_sets):
    entries = []
    for v in flags.get("--shards") or []:
        for part in v.split(","):
            sid, eq, url = part.partition("=")
            if not eq or not sid or not url:
                rep.err(where, f"{cpath}: --shards {part!r} is not ID=URL")
                continue
            entries.append((sid, url))
    if not entries:
        rep.err(where, f"{cpath}: no --shards")
        return
    if not shard_sets:
        return
    if len(shard_sets) > 1:
        rep.note(where, "several shard StatefulSets; --shards not "
                 "cross-checked")
        return
    sts, c, sflags = shard_sets[0]
    name, spec = name_of(sts), sts.get("spec") or {}
    replicas = spec.get("replicas", 1)
    svc = spec.get("serviceName")
    ids = sflags.get("--id") or []
    if ids != ["<fieldRef:metadata.name>"]:
        rep.err(where, f"StatefulSet/{name}: shard --id should be the pod "
                "name ($(POD_NAME) from metadata.name) so that it matches "
                "--shards")
    _, listen = host_port((sflags.get("--listen") or [""])[-1])
    want = {f"{name}-{i}" for i in range(replicas if isinstance(
        replicas, int) else 0)}
    have = {sid for sid, _ in entries}
    for sid in sorted(want - have):
        rep.err(where, f"{cpath}: --shards lacks {sid} (StatefulSet/{name} "
                f"has {replicas} replicas)")
    for sid in sorted(have - want):
        rep.err(where, f"{cpath}: --shards names {sid}, which is not a pod "
                f"of StatefulSet/{name} ({replicas} replicas)")
    if len(have) != len(entries):
        rep.err(where, f"{cpath}: --shards names a shard twice")
    for sid, url in entries:
        if sid not in want:
            continue
        host, port = host_port(url)
        if not url.startswith("tcp://") or host is None or not (
                host == f"{sid}.{svc}" or host.startswith(f"{sid}.{svc}.")):
            rep.err(where, f"{cpath}: --shards {sid}={url}: expected "
                    f"tcp://{sid}.{svc}:{listen} (the pod's name under the "
                    f"headless Service {svc})")
        elif port != listen:
            rep.err(where, f"{cpath}: --shards {sid}={url}: the shards "
                    f"listen on port {listen}")


def check_admin_token(rep, where, cpath, c, spec, flags):
    files = flags.get("--admin-token-file") or []
    if not files:
        rep.err(where, f"{cpath}: no --admin-token-file: /admin paths would "
                "be open to anything that reaches the HTTP port")
        return
    m = mount_for(c, files[-1])
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    if m is None or "secret" not in vols.get(m[1].get("name"), {}):
        rep.err(where, f"{cpath}: --admin-token-file {files[-1]} is not on "
                "a volume mounted from a Secret")


def check_watch_rbac(rep, r, o, spec, cpath, flags):
    where = r.where(o)
    sa = spec.get("serviceAccountName") or "default"
    if spec.get("automountServiceAccountToken") is False and \
            not flags.get("--kube-token-file"):
        rep.err(where, "the pod watcher needs the service account token, "
                "but automountServiceAccountToken is false")
    verbs = set()
    for rb in r.objs:
        if rb.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                   for s in rb.get("subjects") or []):
            continue
        ref = rb.get("roleRef") or {}
        for role in r.objs:
            if role.get("kind") == ref.get("kind") and \
                    name_of(role) == ref.get("name"):
                for rule in role.get("rules") or []:
                    if "" in (rule.get("apiGroups") or []) and \
                            {"pods", "*"} & set(rule.get("resources") or []):
                        verbs |= set(rule.get("verbs") or [])
    if not ({"get", "list", "watch"} <= verbs or "*" in verbs):
        rep.err(where, f"ServiceAccount {sa!r} is not bound to a Role that "
                "grants get, list and watch on pods (the watcher needs them)")


def ann_int(rep, where, ann, key, default):
    if key not in ann:
        return default
    v, lim = ann[key], ANNOTATIONS[key]
    if not isinstance(v, str) or not re.match(r"^[0-9]+$", v) or \
            not lim[0] <= int(v) <= lim[1]:
        rep.err(where, f"annotation {key}={v!r}: not a decimal integer in "
                f"{lim[0]}..{lim[1]}")
        return default
    return int(v)


def flag_int(flags, name, default):
    vals = flags.get(name) or []
    try:
        return int(vals[-1]) if vals else default
    except ValueError:
        return default


def check_engines(rep, r, where, flags, kvindex_names):
    """The engine pods of this render that the watcher selects."""
    engines = [p for p in r.pods if name_of(p[0]) not in kvindex_names]
    if not engines:
        return
    label = (flags.get("--watch-label") or [None])[-1]
    try:
        reqs = parse_selector_string(label) if label else []
    except ValueError as e:
        rep.err(where, f"--watch-label {label!r}: {e}")
        return
    model_label = (flags.get("--watch-model-label") or
                   ["kvindex.io/model"])[-1]
    chosen = [p for p in engines
              if selector_string_matches(reqs, p[1].get("labels"))]
    if not chosen:
        rep.err(where, f"--watch-label {label!r} selects none of the engine "
                "pods in this render: " +
                ", ".join(f"{p[0].get('kind')}/{name_of(p[0])}"
                          for p in engines))
    for o, meta, spec, path in chosen:
        ew = r.where(o)
        ann = meta.get("annotations") or {}
        for k in ann:
            if k.startswith("kvindex.io/") and k not in ANNOTATIONS:
                rep.err(ew, f"annotation {k}: the watcher does not read it"
                        f"{suggest(k, ANNOTATIONS)}")
        if not ann.get("kvindex.io/model") and \
                not (meta.get("labels") or {}).get(model_label):
            rep.err(ew, f"no model: neither annotation kvindex.io/model nor "
                    f"label {model_label}")
        dp = ann_int(rep, ew, ann, "kvindex.io/dp-size",
                     flag_int(flags, "--watch-dp-size", 1))
        zmq = ann_int(rep, ew, ann, "kvindex.io/zmq-port",
                      flag_int(flags, "--watch-zmq-port", 5557))
        replay = ann_int(rep, ew, ann, "kvindex.io/replay-port",
                         flag_int(flags, "--watch-replay-port", None))
        recover = ann_int(rep, ew, ann, "kvindex.io/recover-port",
                          flag_int(flags, "--watch-recover-port", None))
        block = ann_int(rep, ew, ann, "kvindex.io/block-size",
                        flag_int(flags, "--watch-block-size", 16))
        ranges = {"event": zmq, "replay": replay, "recover": recover}
        ranges = {k: set(range(v, v + dp)) for k, v in ranges.items()
                  if v is not None}
        for k, ports in ranges.items():
            if max(ports) > 65535:
                rep.err(ew, f"{k} ports {min(ports)}..{max(ports)} for "
                        f"{dp} ranks run past 65535")
        kinds = sorted(ranges)
        for i, a in enumerate(kinds):
            for b in kinds[i + 1:]:
                both = ranges[a] & ranges[b]
                if both:
                    rep.err(ew, f"{a} and {b} ports overlap at "
                            f"{sorted(both)} with {dp} ranks (rank r uses "
                            "base + r)")
        names, nums = container_ports(spec)
        if nums:
            for k, ports in ranges.items():
                for pnum in sorted(ports - nums):
                    rep.err(ew, f"rank {pnum - min(ports)}'s {k} port {pnum} "
                            f"is not a declared containerPort ({dp} ranks)")
        for ci, c in enumerate(spec.get("containers") or []):
            check_vllm(rep, ew, f"{path}.containers[{ci}]", c, dp, zmq,
                       replay, block)


def vllm_opts(args):
    out, i = {}, 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            name, eq, val = a.partition("=")
            if not eq and i + 1 < len(args) and \
                    not args[i + 1].startswith("-"):
                val = args[i + 1]
                i += 1
            out[name] = val
        i += 1
    return out


def endpoint_port(ep):
    m = re.match(r"^tcp://[^:]+:([0-9]+)$", ep or "")
    return int(m.group(1)) if m else None


def check_vllm(rep, where, cpath, c, dp, zmq, replay, block):
    args = [a for a in (c.get("command") or []) + (c.get("args") or [])
            if isinstance(a, str)]
    opts = vllm_opts(args)
    if "--kv-events-config" not in opts:
        return
    try:
        cfg = json.loads(opts["--kv-events-config"])
    except ValueError as e:
        rep.err(where, f"{cpath}: --kv-events-config is not JSON: {e}")
        return
    if not isinstance(cfg, dict):
        rep.err(where, f"{cpath}: --kv-events-config is not a JSON object")
        return
    for k in cfg:
        if k not in KV_EVENTS_FIELDS:
            rep.err(where, f"{cpath}: --kv-events-config: {k!r} is not a "
                    f"KVEventsConfig field{suggest(k, KV_EVENTS_FIELDS)}")
    if cfg.get("enable_kv_cache_events") is not True:
        rep.err(where, f"{cpath}: --kv-events-config: enable_kv_cache_events "
                "is not true")
    if cfg.get("publisher", "zmq") != "zmq":
        rep.err(where, f"{cpath}: --kv-events-config: publisher is not zmq")
    ep = endpoint_port(cfg.get("endpoint", "tcp://*:5557"))
    if ep != zmq:
        rep.err(where, f"{cpath}: vLLM publishes rank 0 on port {ep}, "
                f"kvindex subscribes to {zmq}")
    rp = endpoint_port(cfg.get("replay_endpoint"))
    if rp != replay:
        rep.err(where, f"{cpath}: vLLM replays rank 0 on port {rp}, kvindex "
                f"expects {replay}")
    dps = opts.get("--data-parallel-size", opts.get("-dp", "1"))
    if str(dps) != str(dp):
        rep.err(where, f"{cpath}: vLLM --data-parallel-size {dps}, kvindex "
                f"derives {dp} ranks for the pod")
    bs = opts.get("--block-size")
    if bs is not None and str(bs) != str(block):
        rep.err(where, f"{cpath}: vLLM --block-size {bs}, kvindex indexes "
                f"with block size {block}")


# ---------------------------------------------------------------------------

def validate(target, kubectl, binaries, rep):
    objs = render(kubectl, target, rep)
    if objs is None:
        return 0
    for o in objs:
        if not isinstance(o, dict):
            rep.err(rel(target), f"a document is {tname(o)}, not an object")
    if rep.errors:
        return len(objs)
    r = Render(target, objs)
    for o in objs:
        where = r.where(o)
        api, kind = o.get("apiVersion"), o.get("kind")
        if not isinstance(api, str) or not isinstance(kind, str) or \
                kind not in KINDS.get(api, ()):
            known = sorted(f"{a} {k}" for a, ks in KINDS.items() for k in ks)
            rep.err(where, f"apiVersion {api!r} kind {kind!r}: not a kind "
                    f"this validator knows{suggest(f'{api} {kind}', known)}")
            continue
        check_model(rep, where, "", model_class(f"V1{kind}"), o)
        if not isinstance(o.get("metadata"), dict) or \
                not o["metadata"].get("name"):
            rep.err(where, "metadata.name: required field is missing")
    if rep.errors:
        return len(objs)  # later checks assume well-formed objects
    check_cross(rep, r)
    check_kvindex(rep, r, binaries)
    return len(objs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--coordinator", help="path to kvindex-coordinator")
    ap.add_argument("--shard", help="path to kvindex-shard")
    ap.add_argument("--tap", help="path to kvindex-tap")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="do not print notes")
    ap.add_argument("targets", nargs="*", help="kustomization directories")
    a = ap.parse_args()
    targets = a.targets or [os.path.join(HERE, "base")] + sorted(
        os.path.dirname(k) for k in
        glob.glob(os.path.join(HERE, "examples", "*", "kustomization.yaml")))
    binaries = {"kvindex-coordinator": a.coordinator,
                "kvindex-shard": a.shard, "kvindex-tap": a.tap}
    for b, p in binaries.items():
        if p is not None and not os.access(p, os.X_OK):
            sys.stderr.write(f"validate.py: {b}: {p} is not executable\n")
            return 2
    failed = False
    for t in targets:
        rep = Report()
        check_listed(t, rep, set())
        n = validate(t, a.kubectl, binaries, rep)
        for e in rep.errors:
            print(f"FAIL {e}")
        if not a.quiet:
            for note in sorted(set(rep.notes)):
                print(f"note {note}")
        print(f"{'FAIL' if rep.errors else 'ok  '} {rel(t)}: {n} objects, "
              f"{len(rep.errors)} problems")
        failed = failed or bool(rep.errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
