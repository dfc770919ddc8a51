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

The checks live in the kvvalidate package beside this script (its
__init__.py lists the modules); this file is the command line.
"""

import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The package sits beside this script; find it from any working directory,
# and leave no bytecode in the source tree.
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

import yaml  # noqa: E402,F401 - python3-yaml, needed by the package

try:
    import kubernetes.client  # noqa: E402,F401
except ImportError:  # pragma: no cover - environment problem
    sys.stderr.write("validate.py: the kubernetes Python client is missing "
                     "(Debian: python3-kubernetes)\n")
    sys.exit(2)

from kvvalidate import Report, check_listed, rel, validate  # noqa: E402


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
