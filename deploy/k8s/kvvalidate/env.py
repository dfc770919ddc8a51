"""A container's environment and $(VAR) expansion, as the kubelet does it.

The kubelet expands $(VAR) in command, args and env values from the
container's environment and passes an undefined reference on literally,
so a misspelt name reaches the binary as text instead of failing. This
module rebuilds the environment from env and envFrom, checks that every
ConfigMap key and downward-API field path it uses exists, and stands in
placeholders (<fieldRef:...>, <secret:...>) for values only the kubelet
knows.
"""

import re

from .report import suggest

# The pod fields the downward API offers to an env value (fieldRef).
FIELD_PATH_RE = re.compile(
    r"^(metadata\.(name|namespace|uid)|spec\.(nodeName|serviceAccountName)"
    r"|status\.(hostIP|podIP|podIPs)"
    r"|metadata\.(labels|annotations)\['[^']+'\])$")

# A $(VAR) reference, or $$ for a literal $.
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
