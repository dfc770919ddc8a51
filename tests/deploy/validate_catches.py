#!/usr/bin/env python3
"""Checks that deploy/k8s/validate.py fails on the mistakes it is for.

Copies deploy/k8s to a temporary directory, then, one at a time, injects a
mistake into the copy (a misspelt field, a string where an integer goes,
an unknown flag, ...) and runs the copy's validate.py on it. Each mistake
must make the validator exit 1 with a message that names it and that the
unmodified copy does not print, so a mistake cannot pass for a problem the
manifests already had.

Usage: validate_catches.py --k8s DIR --kubectl K --coordinator BIN --shard BIN
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

BASE = "base"
DP2 = "examples/dp2"

# (name, file, text, replacement, expected message, targets). The first
# occurrence of text is replaced; file None adds a new file instead.
MUTATIONS = [
    ("misspelt field", "base/shard.yaml", "\n  replicas: 3\n",
     "\n  replicass: 3\n", "spec.replicass: unknown field", [BASE]),
    ("string port", "base/coordinator.yaml", "containerPort: 8080",
     'containerPort: "8080"',
     "containerPort: expected an integer, got a string", [BASE]),
    ("unknown coordinator flag", "base/coordinator.yaml",
     "- --http=0.0.0.0:8080", "- --htpp=0.0.0.0:8080",
     "--htpp: not a flag of kvindex-coordinator", [BASE]),
    ("unknown shard flag", "base/shard.yaml", "- --metrics=0.0.0.0:9101",
     "- --metrics-addr=0.0.0.0:9101",
     "--metrics-addr: not a flag of kvindex-shard", [BASE]),
    ("flag given twice", "base/coordinator.yaml",
     "            - --http=0.0.0.0:8080\n",
     "            - --http=0.0.0.0:8080\n            - --http=0.0.0.0:8081\n",
     "--http given twice", [BASE]),
    ("field misspelt in a list in a list", "base/networkpolicy.yaml",
     "          protocol: TCP", "          protocoll: TCP",
     "protocoll: unknown field", [BASE]),
    ("string boolean", "base/coordinator.yaml",
     "readOnlyRootFilesystem: true", 'readOnlyRootFilesystem: "true"',
     "readOnlyRootFilesystem: expected a boolean", [BASE]),
    ("required field missing", "base/rbac.yaml",
     "  kind: Role\n  name: kvindex-pod-reader\nsubjects",
     "  name: kvindex-pod-reader\nsubjects",
     "roleRef.kind: required field is missing", [BASE]),
    ("enum value", "base/coordinator.yaml", "    type: Recreate",
     "    type: Recreat", "'Recreat' is not one of", [BASE]),
    ("bad quantity", "base/coordinator.yaml", "memory: 256Mi",
     "memory: 256 MiB", "is not a resource quantity", [BASE]),
    ("unknown kind version", "base/shard.yaml",
     "apiVersion: apps/v1\nkind: StatefulSet",
     "apiVersion: apps/v2\nkind: StatefulSet",
     "apiVersion 'apps/v2' kind 'StatefulSet': not a kind", [BASE]),
    ("probe on an undeclared port", "base/coordinator.yaml",
     "              path: /ready\n              port: http",
     "              path: /ready\n              port: htp",
     "readinessProbe.httpGet.port: 'htp' is not a port", [BASE]),
    ("selector does not match template", "base/shard.yaml",
     "  template:\n    metadata:\n      labels:\n"
     "        app.kubernetes.io/name: kvindex\n"
     "        app.kubernetes.io/component: shard",
     "  template:\n    metadata:\n      labels:\n"
     "        app.kubernetes.io/name: kvindex\n"
     "        app.kubernetes.io/component: shards",
     "spec.selector does not match the pod template's labels", [BASE]),
    ("service targets an undeclared port", "base/coordinator.yaml",
     "      targetPort: http", "      targetPort: http2",
     "targetPort: 'http2' is not a port", [BASE]),
    ("ConfigMap key misspelt", "base/coordinator.yaml",
     "key: WATCH_DP_SIZE\n", "key: WATCH_DPSIZE\n",
     "has no key 'WATCH_DPSIZE'", [BASE]),
    ("undefined $(VAR)", "base/coordinator.yaml",
     "=$(POD_NAMESPACE)", "=$(POD_NAMESPACES)",
     "$(POD_NAMESPACES) is not defined", [BASE]),
    ("--shards out of step with replicas", "base/shard.yaml",
     "\n  replicas: 3\n", "\n  replicas: 4\n",
     "--shards lacks kvindex-shard-3", [BASE]),
    ("no admin token", "base/coordinator.yaml",
     "            - --admin-token-file=/etc/kvindex/admin/token\n", "",
     "no --admin-token-file", [BASE]),
    ("no RPC secret on the shards", "base/shard.yaml",
     "            - --rpc-secret-file=/etc/kvindex/rpc/secret\n", "",
     "no --rpc-secret-file", [BASE]),
    ("RPC secret not from a Secret", "base/coordinator.yaml",
     "- --rpc-secret-file=/etc/kvindex/rpc/secret",
     "- --rpc-secret-file=/var/lib/kvindex/secret",
     "--rpc-secret-file /var/lib/kvindex/secret is not on a volume mounted "
     "from a Secret", [BASE]),
    ("data dir is the mount point", "base/shard.yaml",
     "- --data-dir=/var/lib/kvindex/shard", "- --data-dir=/var/lib/kvindex",
     "is a mount point", [BASE]),
    ("RBAC without watch", "base/rbac.yaml",
     'verbs: ["get", "list", "watch"]', 'verbs: ["get", "list"]',
     "grants get, list and watch on pods", [BASE]),
    ("capabilities not dropped", "base/shard.yaml", 'drop: ["ALL"]',
     'drop: ["NET_RAW"]', "capabilities.drop does not include ALL", [BASE]),
    ("manifest not in the kustomization", None, "base/extra.yaml",
     "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: extra\n",
     "extra.yaml: not listed in its kustomization.yaml", [BASE]),
    ("annotation misspelt", "examples/dp2/vllm-dp2.yaml",
     "kvindex.io/replay-port:", "kvindex.io/replay_port:",
     "annotation kvindex.io/replay_port: the watcher does not read it",
     [DP2]),
    ("annotation disagrees with the engine's DP size",
     "examples/dp2/vllm-dp2.yaml",
     'kvindex.io/replay-port: "5657"',
     'kvindex.io/replay-port: "5657"\n        kvindex.io/dp-size: "4"',
     "annotation kvindex.io/dp-size=4 disagrees with the engine's "
     "--data-parallel-size 2", [DP2]),
    ("non-numeric flag value", "examples/dp2/kustomization.yaml",
     "WATCH_DP_SIZE=2", "WATCH_DP_SIZE=two",
     "--watch-dp-size 'two': not an integer", [DP2]),
    ("watch label selects no engine", "examples/dp2/kustomization.yaml",
     "kvindex.io/model=qwen2.5-7b-instruct", "kvindex.io/model=qwen2.5-7b",
     "selects none of the engine pods", [DP2]),
    ("KVEventsConfig field misspelt", "examples/dp2/vllm-dp2.yaml",
     '"replay_endpoint"', '"replay_endpont"',
     "'replay_endpont' is not a KVEventsConfig field", [DP2]),
    ("replay ports overlap event ports", "examples/dp2/vllm-dp2.yaml",
     'kvindex.io/replay-port: "5657"', 'kvindex.io/replay-port: "5558"',
     "event and replay ports overlap", [DP2]),
]


def run(k8s, opts, targets):
    cmd = [sys.executable, os.path.join(k8s, "validate.py"), "-q",
           "--kubectl", opts.kubectl, "--coordinator", opts.coordinator,
           "--shard", opts.shard] + [os.path.join(k8s, t) for t in targets]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k8s", required=True)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--shard", required=True)
    opts = ap.parse_args()

    failed = 0
    with tempfile.TemporaryDirectory(prefix="kvi-deploy-") as tmp:
        pristine = os.path.join(tmp, "pristine")
        shutil.copytree(opts.k8s, pristine)
        baseline = {}
        for t in (BASE, DP2):
            baseline[t] = run(pristine, opts, [t])[1]
        for i, (name, path, old, new, expect, targets) in \
                enumerate(MUTATIONS):
            k8s = os.path.join(tmp, f"m{i}")
            shutil.copytree(pristine, k8s)
            if path is None:
                with open(os.path.join(k8s, old), "w",
                          encoding="utf-8") as f:
                    f.write(new)
            else:
                full = os.path.join(k8s, path)
                with open(full, encoding="utf-8") as f:
                    text = f.read()
                if old not in text:
                    print(f"FAIL {name}: {path} no longer contains {old!r}; "
                          "update this test")
                    failed += 1
                    continue
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text.replace(old, new, 1))
            rc, out = run(k8s, opts, targets)
            before = "".join(baseline[t] for t in targets)
            if rc != 1:
                print(f"FAIL {name}: validate.py exited {rc}, not 1\n{out}")
                failed += 1
            elif expect not in out:
                print(f"FAIL {name}: no {expect!r} in:\n{out}")
                failed += 1
            elif expect in before:
                print(f"FAIL {name}: {expect!r} is printed without the "
                      "mistake too")
                failed += 1
            else:
                print(f"ok   {name}")
            shutil.rmtree(k8s)
    print(f"{len(MUTATIONS) - failed}/{len(MUTATIONS)} mistakes caught")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
