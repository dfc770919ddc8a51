"""Rendering a kustomization the way `kubectl apply -k` would.

The checks look at what kustomize produces, not at the files, because
that is what reaches the cluster: `kubectl kustomize` runs offline, with
no cluster and no network. A manifest that lies beside a
kustomization.yaml but is not listed in it is reported too, since
`kubectl apply -k` skips it without a word.
"""

import glob
import os
import subprocess

import yaml

from .report import rel


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
