"""Objects of one render: names, pod templates, selectors, ports.

Shared by the cross-reference and the kvindex checks, which both need to
find the pod template of a workload, tell which pods a label selector
picks (as a LabelSelector object or as the string form kubectl and the
coordinator's --watch-label take) and which ports a pod declares. Nothing
here reports a problem except a malformed selector string, which raises.
"""

import re

from .report import rel

# A label value, or the name part of a label or annotation key.
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")

# Kinds that run pods from a pod template (a Pod is its own template).
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet",
                  "Job", "CronJob", "Pod"}


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
