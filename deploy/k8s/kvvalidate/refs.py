"""References between the objects of one render.

Each object can be valid on its own and the render still not work: a
selector that matches no pod, a Service or NetworkPolicy port that no
container declares, a probe on an undeclared port, a volume mount, a
ConfigMap, a ServiceAccount or a Role that does not exist, a StatefulSet
whose governing Service is not headless, or a $(VAR) that the kubelet
would pass on literally. None of these is an error to the API server;
they show up only as pods that do not start or do not get traffic.
"""

import re

from .env import container_env, expand
from .objects import (LABEL_NAME_RE, container_ports, name_of, ns_of,
                      pod_template, port_declared, selector_matches)
from .report import suggest

# The prefix of a label or annotation key, and a container port's name.
DNS_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PORT_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


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
