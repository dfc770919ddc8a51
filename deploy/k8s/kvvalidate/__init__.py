"""Offline validation of the kvindex Kubernetes manifests.

deploy/k8s/validate.py is the command line; this package does the work,
one render at a time, in the order the checks depend on each other:

  render.py   `kubectl kustomize` of a target, and manifests it skips
  schema.py   each object against the Kubernetes client's model
  refs.py     references between the objects of the render
  kvindex.py  the kvindex containers: flags, --shards, token, RBAC
  engines.py  the engine pods the coordinator watches, and their vLLM
              settings

with objects.py, env.py, flags.py and report.py as the pieces they share.
The later checks assume well-formed objects, so they run only when the
schema checks found nothing.
"""

from .kvindex import check_kvindex
from .objects import Render
from .refs import check_cross
from .render import check_listed, render
from .report import Report, rel, suggest, tname
from .schema import KINDS, check_model, model_class

__all__ = ["Report", "check_listed", "rel", "validate"]


def validate(target, kubectl, binaries, rep):
    """Renders target and checks what it renders into rep; returns the
    number of objects rendered."""
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
