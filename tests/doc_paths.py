#!/usr/bin/env python3
"""doc_paths - every path the READMEs name exists.

Reads README.md and every README.md under common/, proto/, shard/,
coordinator/, tools/ and tests/, and checks each path it names: a
`backticked` word whose first part is a folder of the repository (from
its root, or from the README's folder or one above it), a bare `.c` or
`.h` file name, and the target of each relative Markdown link. A path is
looked for from the repository's root, then from the README's folder
and each folder above it; a bare file name must be the name of a file
somewhere in the tree. Names of things outside the repository (an
engine's source file, an annotation) are not paths of it and are left
alone. Prints each path that is missing and exits 1 if any is.

    tests/doc_paths.py [ROOT]
    tests/doc_paths.py --catches    (it finds paths that are gone)
"""
import os
import re
import sys

SKIP_DIRS = {".git", "build", "build-asan", "node_modules"}
WORD = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$")


def tree_files(root):
    names = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        names.update(files)
    return names


def readmes(root):
    out = [os.path.join(root, "README.md")]
    for top in ("common", "proto", "shard", "coordinator", "tools", "tests"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            if "README.md" in files:
                out.append(os.path.join(d, "README.md"))
    return [p for p in out if os.path.exists(p)]


def bases(root, here):
    """The folders a README's paths may start from: its own and each one
    above it, up to the root."""
    out = []
    d = here
    while True:
        out.append(d)
        if os.path.samefile(d, root):
            return out
        d = os.path.dirname(d)


def looks_like_path(w, dirs):
    if not PATHLIKE.match(w) or w.startswith("..."):
        return False
    if "/" in w.rstrip("/") or w.endswith("/"):
        first = w.split("/", 1)[0]
        return any(os.path.isdir(os.path.join(b, first)) for b in dirs)
    return w.endswith((".c", ".h"))


def exists(dirs, w, names):
    w = w.split("#", 1)[0]
    if not w:
        return True
    if any(os.path.exists(os.path.join(b, w)) for b in dirs):
        return True
    return "/" not in w.rstrip("/") and w in names


def catches():
    """A tree whose READMEs name paths that are there and paths that are
    not: exactly the second kind is reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        for d in ("shard/index", "shard/rpc", "common"):
            os.makedirs(os.path.join(t, d))
        for f in ("shard/index/index.c", "common/log.c"):
            open(os.path.join(t, f), "w").close()
        open(os.path.join(t, "README.md"), "w").write(
            "`shard/index/index.c` `log.c` [x](shard/rpc/) `shard/gone.c` "
            "`gone.h` [y](common/gone.md) `kvindex.io/model` `x.py`\n")
        open(os.path.join(t, "shard/rpc/README.md"), "w").write(
            "`index/` `index/index.c` `index/old.c`\n")
        return check(t) == ["README.md: shard/gone.c", "README.md: gone.h",
                            "README.md: common/gone.md",
                            "shard/rpc/README.md: index/old.c"]


def check(root):
    names = tree_files(root)
    missing = []
    for p in readmes(root):
        dirs = bases(root, os.path.dirname(p))
        text = open(p, encoding="utf-8").read()
        words = [w for w in WORD.findall(text) if looks_like_path(w, dirs)]
        links = [l for l in LINK.findall(text) if "://" not in l]
        for w in words + links:
            if not exists(dirs, w, names):
                missing.append(f"{os.path.relpath(p, root)}: {w}")
    return missing


def main():
    if sys.argv[1:] == ["--catches"]:
        ok = catches()
        print("doc_paths --catches:", "ok" if ok else "FAILED")
        return 0 if ok else 1
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    missing = check(root)
    for m in missing:
        print("missing:", m)
    print(f"doc_paths: {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
