"""How the manifests run kvindex itself.

Beyond what Kubernetes checks, the kvindex containers have to agree with
each other and with what the binaries expect: every container of the
kvindex image names one of its binaries (the image has no ENTRYPOINT);
each runs unprivileged with a read-only root filesystem; its flags are
ones its binary takes, its listening ports are declared and its data
directory is a subdirectory of a writable volume (a corrupt store is
renamed beside it). The coordinator's --shards must name exactly the pods
of the shard StatefulSet through its headless Service, its admin token
must come from a Secret, and its pod watcher needs RBAC to get, list and
watch pods; the engine pods it watches are checked in engines.py.
"""

import os
import subprocess

from .engines import check_engines
from .env import container_env, expand
from .flags import binary_flags, host_port, parse_args
from .objects import container_ports, name_of, ns_of
from .report import Report

# The binaries of the kvindex image; a container runs one by its command.
BINARIES = ("kvindex-coordinator", "kvindex-shard", "kvindex-tap")


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
        check_rpc_secret(rep, r.where(o), cpath, c, spec, flags)
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


def check_secret_file(rep, where, cpath, c, spec, flags, flag, open_what):
    files = flags.get(flag) or []
    if not files:
        rep.err(where, f"{cpath}: no {flag}: {open_what}")
        return
    m = mount_for(c, files[-1])
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    if m is None or "secret" not in vols.get(m[1].get("name"), {}):
        rep.err(where, f"{cpath}: {flag} {files[-1]} is not on "
                "a volume mounted from a Secret")


def check_admin_token(rep, where, cpath, c, spec, flags):
    check_secret_file(rep, where, cpath, c, spec, flags,
                      "--admin-token-file", "/admin paths would be open to "
                      "anything that reaches the HTTP port")


def check_rpc_secret(rep, where, cpath, c, spec, flags):
    check_secret_file(rep, where, cpath, c, spec, flags, "--rpc-secret-file",
                      "the shards' RPC would obey anything that reaches "
                      "their port")


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
