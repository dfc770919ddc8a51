"""Where a problem was found and how it is worded.

Every check reports into a Report as "where: what" - the render, the
object and the field path - so that a failure can be found in the YAML
without reading this code. A misspelt name gets the closest valid one
suggested, since a typo is the usual mistake in a manifest; paths are
printed relative to the repository root so that output reads the same
from any working directory.
"""

import os

# deploy/k8s: the directory of validate.py, which this package sits in.
K8S_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Report:
    """Collects failures and notes, each tagged with where it was found."""

    def __init__(self):
        self.errors = []
        self.notes = []

    def err(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def note(self, where, msg):
        self.notes.append(f"{where}: {msg}")


def distance(a, b):
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1,
                           prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def suggest(word, choices):
    """' (did you mean X?)' for the closest choice within a typo's reach."""
    best = min(((distance(word, c), c) for c in choices if isinstance(c, str)),
               default=None)
    if best is None or best[0] > max(2, len(word) // 8):
        return ""
    return f" (did you mean {best[1]}?)"


def tname(v):
    return {bool: "a boolean", int: "an integer", float: "a number",
            str: "a string", list: "a list", dict: "a map"}.get(
                type(v), type(v).__name__)


def rel(path):
    return os.path.relpath(path, os.path.dirname(os.path.dirname(K8S_DIR)))
