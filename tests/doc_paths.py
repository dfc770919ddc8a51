#!/usr/bin/env python3
"""doc_paths - every path the documentation names exists, and every
section it cites is there.

Reads README.md, every README.md under common/, proto/, shard/,
coordinator/, tools/, tests/ and clients/, and every Markdown page under
docs/, and checks each path they name: a `backticked` word whose first
part is a folder of the repository (from its root, or from the page's
folder or one above it), a bare `.c` or `.h` file name, and the target
of each relative Markdown link. A path is looked for from the
repository's root, then from the page's folder and each folder above it;
a bare file name must be the name of a file somewhere in the tree. Names
of things outside the repository (an engine's source file, an
annotation) are not paths of it and are left alone.

A link or a backticked path to a Markdown page with a #fragment, and an
in-page (#fragment) link, must also find a heading of that page whose
anchor is the fragment. Anchors are made the way GitHub makes them: the
heading's text lowercased, every character that is not a letter, a
digit, a space, a hyphen or an underscore dropped, spaces made hyphens,
and a second heading with the same anchor given -1, the third -2.

Source files (*.c, *.h, *.py, *.sh, *.proto, CMakeLists.txt, *.cmake;
not under tests/data) cite the manual as docs/<page>.md or
docs/<page>.md#anchor, from the repository's root: the page and its
anchor must exist. A citation of DESIGN.md, API.md or WIRE.md, in a
source file or a page, is an error: the repository has no such document
(the manual is docs/).

Prints each path, section or document that is missing and exits 1 if any
is.

    tests/doc_paths.py [ROOT]
    tests/doc_paths.py --catches    (it finds paths and sections that are gone)
"""
import os
import re
import sys

SKIP_DIRS = {".git", "build", "build-asan", "node_modules"}
WORD = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
MDLINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
# docs/<page>.md[#anchor] in a source file, not inside a longer name
CITE = re.compile(r"(?<![\w.-])(docs/[\w./-]+?\.md)\b(#[\w-]+)?")
# the documents the code once cited, which the repository never had
STALE = re.compile(r"(?<![\w/.-])(?:DESIGN|API|WIRE)\.md\b")
SOURCE_EXT = (".c", ".h", ".py", ".sh", ".proto", ".cmake")
NO_DOC = "cites a document the repository does not have"
ANCHORS = {}  # a page's path -> the anchors of its headings


def tree_files(root):
    names = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        names.update(files)
    return names


def readmes(root):
    out = [os.path.join(root, "README.md")]
    for top in ("common", "proto", "shard", "coordinator", "tools", "tests",
                "clients"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            if "README.md" in files:
                out.append(os.path.join(d, "README.md"))
    return [p for p in out if os.path.exists(p)]


def pages(root):
    """The READMEs, then every Markdown page under docs/."""
    out = readmes(root)
    for d, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
    return out


def sources(root):
    """The files that may cite the manual: code, scripts and build files,
    outside tests/data, and not this checker (it names what it looks for)."""
    me = os.path.join(root, "tests", "doc_paths.py")
    data = os.path.join(root, "tests", "data")
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and
                         os.path.join(d, x) != data)
        for f in sorted(files):
            p = os.path.join(d, f)
            if (f.endswith(SOURCE_EXT) or f == "CMakeLists.txt") and p != me:
                out.append(p)
    return out


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
    if w.split("#", 1)[0].endswith(".md"):
        w = w.split("#", 1)[0]
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


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = MDLINK.sub(r"\1", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown page's headings (ATX and setext; not in
    fenced code), duplicates numbered as GitHub numbers them."""
    if path in ANCHORS:
        return ANCHORS[path]
    seen = {}
    fence = None
    prev = ""
    for line in open(path, encoding="utf-8").read().splitlines():
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and \
                    len(m.group(1)) >= len(fence) and \
                    not line.strip()[len(m.group(1)):].strip():
                fence = None
            prev = ""
            continue
        if m:
            fence = m.group(1)
            prev = ""
            continue
        h = HEADING.match(line)
        text = h.group(2) if h else None
        if not h and SETEXT.match(line) and prev.strip() and \
                not prev.lstrip().startswith(("|", "-", "*", ">", "#")):
            text = prev
        if text is not None:
            base = a = slug(text)
            while a in seen:
                seen[base] += 1
                a = f"{base}-{seen[base]}"
            seen[a] = 0
            prev = ""
            continue
        prev = line
    ANCHORS[path] = set(seen)
    return ANCHORS[path]


def find(dirs, w):
    """The file a path names, looked for from each folder in turn."""
    for b in dirs:
        p = os.path.join(b, w)
        if os.path.exists(p):
            return p
    return None


def no_section(dirs, here, w, root):
    """Why a path#fragment names no section, or None when it does (or
    when its target is not a Markdown page)."""
    if "#" not in w:
        return None
    page, frag = w.split("#", 1)
    target = here if not page else find(dirs, page)
    if not target or not target.endswith(".md") or not os.path.isfile(target):
        return None
    if frag in anchors(target):
        return None
    return f"{w} (no heading #{frag} in {os.path.relpath(target, root)})"


def check_page(root, p, names):
    rel = os.path.relpath(p, root)
    dirs = bases(root, os.path.dirname(p))
    text = open(p, encoding="utf-8").read()
    words = [w for w in WORD.findall(text) if looks_like_path(w, dirs)]
    links = [l for l in LINK.findall(text) if "://" not in l and
             not l.startswith("mailto:")]
    out = []
    for w in words + links:
        if not exists(dirs, w, names):
            out.append(f"{rel}: {w}")
            continue
        why = no_section(dirs, p, w, root)
        if why:
            out.append(f"{rel}: {why}")
    for m in STALE.finditer(text):
        out.append(f"{rel}: {m.group(0)} ({NO_DOC})")
    return out


def check_source(root, p):
    rel = os.path.relpath(p, root)
    out = []
    try:
        lines = open(p, encoding="utf-8").read().splitlines()
    except UnicodeDecodeError:
        return out
    for n, line in enumerate(lines, 1):
        for m in CITE.finditer(line):
            page = os.path.join(root, m.group(1))
            w = m.group(1) + (m.group(2) or "")
            if not os.path.isfile(page):
                out.append(f"{rel}:{n}: {w}")
                continue
            why = no_section([root], page, w, root)
            if why:
                out.append(f"{rel}:{n}: {why}")
        for m in STALE.finditer(line):
            out.append(f"{rel}:{n}: {m.group(0)} ({NO_DOC})")
    return out


def catches():
    """A tree whose pages and sources name paths, pages and sections that
    are there and ones that are not: exactly the second kind is
    reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        for d in ("shard/index", "shard/rpc", "common", "docs/reference"):
            os.makedirs(os.path.join(t, d))
        for f in ("shard/index/index.c", "common/log.c"):
            open(os.path.join(t, f), "w").close()
        open(os.path.join(t, "README.md"), "w").write(
            "# Tests\n\n## Tests\n\n"
            "`shard/index/index.c` `log.c` [x](shard/rpc/) `shard/gone.c` "
            "`gone.h` [y](common/gone.md) `kvindex.io/model` `x.py` "
            "[t](#tests-1) [u](#gone) `docs/api.md#post-query` "
            "`docs/api.md#post-gone`\n")
        open(os.path.join(t, "shard/rpc/README.md"), "w").write(
            "`index/` `index/index.c` `index/old.c`\n")
        open(os.path.join(t, "docs/api.md"), "w").write(
            "# API\n\n## Summary\n\n[q](#post-query) "
            "[w](wire.md#event-batches) [l](reference/shard.md#options)\n\n"
            "```sh\n# Not a heading\n```\n\n"
            "### POST /query\n\n[n](#not-a-heading)\n\n"
            "[r](../README.md#tests) [g](gone.md#summary) "
            "[s](wire.md#kv_recover) [o](wire.md#summary)\n")
        open(os.path.join(t, "docs/wire.md"), "w").write(
            "# Wire\n\nEvent batches\n-------------\n\n## /kv_recover\n")
        open(os.path.join(t, "docs/reference/shard.md"), "w").write(
            "# shard\n\n## Options\n")
        open(os.path.join(t, "common/log.h"), "w").write(
            "/* log.h - see docs/api.md#summary and docs/wire.md#kv_recover,\n"
            " * docs/api.md#post-query, docs/api.md#gone, docs/design.md,\n"
            " * DESIGN.md §8 and docs/reference/shard.md. */\n")
        return check(t) == [
            "README.md: shard/gone.c", "README.md: gone.h",
            "README.md: docs/api.md#post-gone "
            "(no heading #post-gone in docs/api.md)",
            "README.md: common/gone.md",
            "README.md: #gone (no heading #gone in README.md)",
            "shard/rpc/README.md: index/old.c",
            "docs/api.md: #not-a-heading "
            "(no heading #not-a-heading in docs/api.md)",
            "docs/api.md: gone.md#summary",
            "docs/api.md: wire.md#summary "
            "(no heading #summary in docs/wire.md)",
            "common/log.h:2: docs/api.md#gone "
            "(no heading #gone in docs/api.md)",
            "common/log.h:2: docs/design.md",
            f"common/log.h:3: DESIGN.md ({NO_DOC})"]


def check(root):
    names = tree_files(root)
    missing = []
    for p in pages(root):
        missing += check_page(root, p, names)
    for p in sources(root):
        missing += check_source(root, p)
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
