#!/usr/bin/env python3
"""check - the monitoring files against each other, the docs and the
binaries' real /metrics.

    check.py lint
        Static checks, no process: every rule of kvindex-rules.yaml has a
        severity (page or warn), a summary, a description and a runbook
        that names a section of the docs that exists; every alert has a
        promtool test case where it fires and one where it does not
        (tests/*.yaml); the dashboard is one a current Grafana imports
        (panels with ids and positions, a ${datasource} Prometheus
        variable every panel and query uses); every metric the rules and
        the dashboard name is listed in docs/metrics.md, and its "Alert
        on these" names every alert and no other.

    check.py metrics --promtool PROMTOOL --coordinator FILE --shard FILE...
        Given /metrics as scraped from a running coordinator and shards
        (tests/integration/test_coord_metrics.c writes them): runs
        `promtool check metrics` on each; checks that the families each
        binary exports are the ones docs/metrics.md lists for it; and
        that every series the rules and the dashboard name is exported -
        the family, its _bucket/_sum/_count for a histogram - with the
        labels the queries use and, for a label matched to a fixed value,
        that value among the exported ones.

    check.py catches --coordinator FILE --shard FILE...
        The metrics check refuses expressions with a mistake of each kind
        (a name not exported, a label or value the binaries do not
        export, a grouping label no series has), given the same files.

Exits 1 with a line per problem. Needs python3 with the yaml module
(Debian: python3-yaml).
"""
import argparse
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RULES = os.path.join(HERE, "kvindex-rules.yaml")
DASHBOARD = os.path.join(HERE, "kvindex-dashboard.json")
TESTS = os.path.join(HERE, "tests")
METRICS_MD = os.path.join(ROOT, "docs", "metrics.md")

# labels Prometheus adds at scrape time (and Kubernetes service discovery
# through the usual relabelling), which the binaries do not export
SCRAPE_LABELS = {"job", "instance", "pod", "namespace", "service",
                 "container", "endpoint", "node"}
AGGREGATORS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar",
               "count", "count_values", "bottomk", "topk", "quantile",
               "limitk", "limit_ratio"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "and", "or", "unless", "offset", "inf", "nan", "atan2",
            "start", "end"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(?:[smhdwy]|ms)?(?:[0-9]+(?:[smhdwy]|ms))*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@])
""", re.VERBOSE)


class Problems(list):
    def add(self, where, what):
        self.append("%s: %s" % (where, what))


def tokens(expr):
    pos = 0
    out = []
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError("cannot read %r" % expr[pos:pos + 20])
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group(kind)))
    return out


def unquote(s):
    if s[0] == "`":
        return s[1:-1]
    return bytes(s[1:-1], "utf-8").decode("unicode_escape")


def parse(expr):
    """What a PromQL expression names: a list of selectors, each
    (metric name, [(label, op, value)]), and the labels its by, without,
    on, ignoring and group_* clauses name."""
    toks = tokens(expr)
    selectors = []
    grouping = set()
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else (None, None)
        if kind == "ident" and text in GROUPING and nxt[1] == "(":
            j = i + 2
            while j < len(toks) and toks[j][1] != ")":
                if toks[j][0] == "ident":
                    grouping.add(toks[j][1])
                j += 1
            i = j + 1
            continue
        if kind == "ident" and (text in AGGREGATORS or text in KEYWORDS or
                                nxt[1] == "("):
            i += 1
            continue
        if kind == "ident" or (kind == "op" and text == "{"):
            name = text if kind == "ident" else None
            matchers = []
            j = i + 1 if kind == "ident" else i
            if j < len(toks) and toks[j][1] == "{":
                j += 1
                while j < len(toks) and toks[j][1] != "}":
                    if toks[j][1] == ",":
                        j += 1
                        continue
                    label, op, val = toks[j][1], toks[j + 1][1], toks[j + 2]
                    matchers.append((label, op, unquote(val[1])
                                     if val[0] == "str" else val[1]))
                    j += 3
                j += 1
            for label, op, val in matchers:
                if label == "__name__" and op == "=":
                    name = val
            selectors.append((name, matchers))
            i = j
            continue
        i += 1
    return selectors, grouping


# ---- the files -----------------------------------------------------------

def load_rules():
    with open(RULES, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    out = []
    for g in doc["groups"]:
        for r in g["rules"]:
            out.append((g["name"], r))
    return out


def load_dashboard():
    with open(DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


def all_panels(dash):
    for p in dash.get("panels", []):
        yield p
        for q in p.get("panels", []):
            yield q


def exprs(rules, dash):
    """Every PromQL expression, with where it is."""
    out = []
    for group, r in rules:
        out.append(("rule %s" % r.get("alert", r.get("record")), r["expr"]))
    for p in all_panels(dash):
        for t in p.get("targets", []):
            if "expr" in t:
                out.append(("panel %r" % p.get("title"), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.match(r"label_values\((.*),\s*\w+\)\s*$", q or "")
            out.append(("variable %s" % v["name"], m.group(1) if m else q))
    return out


def documented_families():
    """docs/metrics.md's families, by binary, as {name: type}: the names
    in the first column of the tables under '## kvindex-coordinator' and
    '## kvindex-shard', the type from the second column (counter where
    the table has none: the ingest counters)."""
    fams = {"kvindex-coordinator": {}, "kvindex-shard": {}}
    cur = None
    for line in open(METRICS_MD, encoding="utf-8"):
        if line.startswith("## "):
            title = line[3:].strip()
            cur = title if title in fams else None
            continue
        m = re.match(r"\|\s*`((?:kvindex|process)_[a-z0-9_]+)`\s*\|", line)
        if cur and m:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            typ = cells[1] if len(cells) > 2 and cells[1] in (
                "counter", "gauge", "histogram") else "counter"
            fams[cur][m.group(1)] = typ
    return fams


def doc_anchors():
    spec = importlib.util.spec_from_file_location(
        "doc_paths", os.path.join(ROOT, "tests", "doc_paths.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.anchors


# ---- lint ----------------------------------------------------------------

def lint_rules(rules, bad):
    anchors = doc_anchors()
    names = set()
    for group, r in rules:
        where = "kvindex-rules.yaml %s" % r.get("alert", "?")
        if "alert" not in r:
            bad.add(where, "not an alerting rule")
            continue
        if r["alert"] in names:
            bad.add(where, "alert name used twice")
        names.add(r["alert"])
        if r.get("labels", {}).get("severity") not in ("page", "warn"):
            bad.add(where, "severity must be page or warn")
        ann = r.get("annotations", {})
        for k in ("summary", "description", "runbook"):
            if not ann.get(k):
                bad.add(where, "no %s annotation" % k)
        rb = ann.get("runbook", "")
        page, _, frag = rb.partition("#")
        path = os.path.join(ROOT, page)
        if not page.startswith("docs/") or not os.path.isfile(path):
            bad.add(where, "runbook %r is not a page of docs/" % rb)
        elif frag and frag not in anchors(path):
            bad.add(where, "runbook %r: no such section" % rb)
        if rb and rb not in ann.get("description", ""):
            bad.add(where, "the description does not cite its runbook")
    return names


def lint_tests(alerts, bad):
    fires, quiet = set(), set()
    files = sorted(glob.glob(os.path.join(TESTS, "*.yaml")))
    if not files:
        bad.add("tests/", "no promtool tests")
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        rel = os.path.relpath(path, HERE)
        if "../kvindex-rules.yaml" not in doc.get("rule_files", []):
            bad.add(rel, "does not load ../kvindex-rules.yaml")
        for t in doc.get("tests", []):
            for a in t.get("alert_rule_test", []):
                name = a["alertname"]
                if name not in alerts:
                    bad.add(rel, "tests %s, which no rule defines" % name)
                (fires if a.get("exp_alerts") else quiet).add(name)
    for a in sorted(alerts):
        if a not in fires:
            bad.add("tests/", "no case where %s fires" % a)
        if a not in quiet:
            bad.add("tests/", "no case where %s does not fire" % a)


def lint_dashboard(dash, bad):
    where = "kvindex-dashboard.json"
    if not isinstance(dash.get("schemaVersion"), int) or \
            dash["schemaVersion"] < 36:
        bad.add(where, "schemaVersion must be 36 or newer")
    for k in ("title", "uid", "panels", "templating", "time"):
        if k not in dash:
            bad.add(where, "no %s" % k)
    if dash.get("id") is not None:
        bad.add(where, "id must be null (Grafana assigns it on import)")
    var = [v for v in dash.get("templating", {}).get("list", [])
           if v.get("name") == "datasource"]
    if not var or var[0].get("type") != "datasource" or \
            var[0].get("query") != "prometheus":
        bad.add(where, "no datasource variable of type prometheus")
    want = {"type": "prometheus", "uid": "${datasource}"}
    ids = set()
    for p in all_panels(dash):
        pw = "%s panel %r" % (where, p.get("title"))
        if p.get("id") in ids or not isinstance(p.get("id"), int):
            bad.add(pw, "id missing or used twice")
        ids.add(p.get("id"))
        gp = p.get("gridPos", {})
        if not all(isinstance(gp.get(k), int) for k in "hwxy"):
            bad.add(pw, "no gridPos h, w, x, y")
        if p.get("type") == "row":
            continue
        if not p.get("title"):
            bad.add(pw, "no title")
        if p.get("datasource") != want:
            bad.add(pw, "datasource is not ${datasource}")
        if not p.get("targets"):
            bad.add(pw, "no query")
        refs = set()
        for t in p.get("targets", []):
            if t.get("datasource") != want:
                bad.add(pw, "a query's datasource is not ${datasource}")
            if not t.get("expr"):
                bad.add(pw, "a query without expr")
            if t.get("refId") in refs or not t.get("refId"):
                bad.add(pw, "refId missing or used twice")
            refs.add(t.get("refId"))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query" and v.get("datasource") != want:
            bad.add(where, "variable %s: datasource is not ${datasource}"
                    % v.get("name"))


def family_of(series, families):
    """The family a series name belongs to, given {family: type}."""
    if series in families:
        return series
    for suf in HIST_SUFFIXES:
        base = series[:-len(suf)] if series.endswith(suf) else None
        if base and families.get(base) in ("histogram", "summary"):
            if suf == "_bucket" and families[base] != "histogram":
                return None
            return base
    return None


def lint_documented(rules, dash, bad):
    """Static: every metric named is one docs/metrics.md lists."""
    doc = documented_families()
    allfams = dict(doc["kvindex-coordinator"], **doc["kvindex-shard"])
    for where, e in exprs(rules, dash):
        for name, _ in parse(e)[0]:
            if name and not family_of(name, allfams):
                bad.add(where, "%s is not in docs/metrics.md" % name)


def lint_alert_list(alerts, bad):
    """docs/metrics.md's 'Alert on these' names every alert, and no other."""
    text = open(METRICS_MD, encoding="utf-8").read()
    m = re.search(r"^## Alert on these\n(.*?)^## ", text, re.M | re.S)
    listed = set(re.findall(r"`(Kvindex[A-Za-z]+)`", m.group(1) if m else ""))
    for a in sorted(alerts - listed):
        bad.add("docs/metrics.md", "'Alert on these' does not list %s" % a)
    for a in sorted(listed - alerts):
        bad.add("docs/metrics.md", "'Alert on these' lists %s, which no "
                "rule defines" % a)


def cmd_lint(args):
    bad = Problems()
    rules = load_rules()
    alerts = lint_rules(rules, bad)
    lint_tests(alerts, bad)
    lint_alert_list(alerts, bad)
    dash = load_dashboard()
    lint_dashboard(dash, bad)
    lint_documented(rules, dash, bad)
    return report(bad, "%d alerts, %d dashboard panels" % (
        len(alerts), sum(1 for p in all_panels(dash)
                         if p.get("type") != "row")))


# ---- metrics -------------------------------------------------------------

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+\S+")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def read_export(path):
    """{family: type} and {series name: {label: set of values}}."""
    families, series = {}, {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            families[name] = typ.strip()
            continue
        if line.startswith("#") or not line.strip():
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = series.setdefault(m.group(1), {})
        for k, v in LABEL.findall(m.group(3) or ""):
            labels.setdefault(k, set()).add(v)
    return families, series


def promtool_check(promtool, path, bad):
    with open(path, "rb") as f:
        r = subprocess.run([promtool, "check", "metrics"], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = r.stdout.decode("utf-8", "replace").strip()
    if r.returncode != 0 or text:
        bad.add(os.path.basename(path), "promtool check metrics: %s"
                % (text or "exit %d" % r.returncode))


def check_selector(where, name, matchers, families, series, bad):
    fam = family_of(name, families)
    if fam is None:
        bad.add(where, "%s is not exported" % name)
        return set()
    labels = series.get(name)
    if labels is None:
        # a family without samples at the time of the scrape (the
        # listeners furthest behind, when none is): its name is checked,
        # its labels cannot be
        return set()
    for label, op, val in matchers:
        if label == "__name__":
            continue
        if label in SCRAPE_LABELS:
            continue
        if label not in labels:
            bad.add(where, "%s has no label %s" % (name, label))
            continue
        if "$" in val:
            continue
        have = labels[label]
        if op == "=" and val not in have:
            bad.add(where, '%s{%s="%s"}: the binaries export %s only' % (
                name, label, val, ", ".join(sorted(have))))
        if op == "=~" and not any(re.fullmatch(val, h) for h in have):
            bad.add(where, '%s{%s=~"%s"} matches no exported value' % (
                name, label, val))
    return set(labels)


def read_exports(coordinator, shards, promtool, bad):
    """The families ({name: type}) and series ({name: {label: values}})
    of all the exports, with the families of each binary; runs promtool
    check metrics on each file when promtool is given."""
    exports = [("kvindex-coordinator", coordinator)] + \
        [("kvindex-shard", s) for s in shards]
    families, series = {}, {}
    by_binary = {"kvindex-coordinator": set(), "kvindex-shard": set()}
    for binary, path in exports:
        if promtool:
            promtool_check(promtool, path, bad)
        f, s = read_export(path)
        by_binary[binary] |= set(f)
        families.update(f)
        for name, labels in s.items():
            mine = series.setdefault(name, {})
            for k, v in labels.items():
                mine.setdefault(k, set()).update(v)
    return families, series, by_binary


def check_exprs(exprlist, families, series, bad):
    """Every selector of every expression against the exports; returns
    how many selectors there were."""
    n = 0
    for where, e in exprlist:
        sels, grouping = parse(e)
        known = set(SCRAPE_LABELS) | {"le"}
        for name, matchers in sels:
            n += 1
            if name is None:
                bad.add(where, "a selector without a metric name")
                continue
            known |= check_selector(where, name, matchers, families,
                                    series, bad)
        for g in sorted(grouping - known):
            bad.add(where, "groups by %s, which none of its series has" % g)
    return n


def cmd_metrics(args):
    bad = Problems()
    families, series, by_binary = read_exports(
        args.coordinator, args.shard, args.promtool, bad)
    doc = {b: set(f) for b, f in documented_families().items()}
    for binary, fams in by_binary.items():
        for f in sorted(fams - doc[binary]):
            bad.add(binary, "exports %s, which docs/metrics.md does not "
                    "list for it" % f)
        for f in sorted(doc[binary] - fams):
            bad.add(binary, "docs/metrics.md lists %s, which it does not "
                    "export" % f)
    n = check_exprs(exprs(load_rules(), load_dashboard()), families, series,
                    bad)
    return report(bad, "%d selectors against %d exported families" % (
        n, len(families)))


# expressions the metrics check must refuse, each with the words its
# complaint must contain
CATCHES = [
    ("kvindex_coord_shard_upp == 0", "kvindex_coord_shard_upp is not exported"),
    ("process_open_fds", "is not exported"),
    ("up == 0", "up is not exported"),
    ('kvindex_coord_listeners{state="broken"}', "export"),
    ('kvindex_coord_listeners{phase="failed"}', "has no label phase"),
    ('kvindex_coord_listeners{state=~"fail|gone"}', "matches no exported"),
    ("sum by (shard) (kvindex_shard_entries)", "groups by shard"),
    ("rate(kvindex_coord_tick_seconds_total[5m])", "is not exported"),
    ("kvindex_shard_open_files_bucket", "is not exported"),
    ('{job="kvindex"}', "without a metric name"),
]


def cmd_catches(args):
    """The metrics check finds each mistake of CATCHES in the exports
    given, and passes the rules and the dashboard as they are."""
    bad = Problems()
    families, series, _ = read_exports(args.coordinator, args.shard, None,
                                       bad)
    check_exprs(exprs(load_rules(), load_dashboard()), families, series, bad)
    missed = Problems()
    for b in bad:
        missed.add("as they are", b)
    for expr, words in CATCHES:
        got = Problems()
        check_exprs([("catch", expr)], families, series, got)
        if not any(words in g for g in got):
            missed.add(expr, "not caught (want %r, got %r)" % (words, got))
    return report(missed, "%d mistakes caught" % len(CATCHES))


def report(bad, ok):
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print("%d problems" % len(bad), file=sys.stderr)
        return 1
    print("ok: %s" % ok)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lint")
    m = sub.add_parser("metrics")
    m.add_argument("--promtool", required=True)
    m.add_argument("--coordinator", required=True)
    m.add_argument("--shard", action="append", required=True)
    c = sub.add_parser("catches")
    c.add_argument("--coordinator", required=True)
    c.add_argument("--shard", action="append", required=True)
    args = ap.parse_args()
    return {"lint": cmd_lint, "metrics": cmd_metrics,
            "catches": cmd_catches}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
