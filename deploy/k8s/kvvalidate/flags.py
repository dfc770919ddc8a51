"""The command lines of the kvindex binaries against their --help.

A kvindex binary refuses an unknown flag at start-up, so a misspelt flag
in a manifest shows up only as a crash loop after the rollout. The flags
each binary takes, whether they take a value (and an integer when the
metavar is N) and whether they may be repeated are read from the --help
of the binaries under test, so the check follows the code instead of a
list kept here.
"""

import re
import subprocess

from .report import suggest

# binary path -> its flags; each binary's --help is read once.
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
