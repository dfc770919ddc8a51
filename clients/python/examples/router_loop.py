#!/usr/bin/env python3
"""A KV-aware router loop on kvindex_client, against the local cluster.

For each incoming request: ask the coordinator where the prompt's longest
cached prefix is (`query` with `top_k`), pick that rank (among ranks that
tie, the least loaded; when no rank holds anything of it, the least loaded
of all), report the decision (`routed`, so the next request of the same
prefix sees its blocks pending there), then send the request to that rank.

The engines here are the simulator's: its control API's `/prefill` runs a
request on a rank at once and says what hit the engine took. Start the
cluster with `./deploy/local-cluster.sh`; it prints the coordinator's
address and the simulator's control URL (`control http://...`):

    python3 clients/python/examples/router_loop.py \\
        --coordinator http://127.0.0.1:8080 --control http://127.0.0.1:PORT

(or `--layout RUN_DIR/layout.json`, the simulator's layout file in the
directory the script names). Requests are made-up conversations: a few
shared system prompts, each conversation's turns extending its prompt.
`--packed` sends the prompts in the compact form (packed little-endian
token ids, docs/api.md#compact-request-bodies) instead of JSON.
"""
import argparse
import json
import os
import random
import re
import sys
import urllib.request

try:
    import kvindex_client  # noqa: F401 - installed
except ImportError:  # run from a checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
from kvindex_client import Client, ClientError  # noqa: E402


class SimEngines:
    """Sends a request to a rank: here, the simulator's POST /prefill.
    A real router sends it to the engine's pod instead, with the rank as
    the `x-data-parallel-rank` request metadata."""

    def __init__(self, control):
        self.control = control.rstrip("/")

    def send(self, pod, rank, tokens):
        m = re.fullmatch(r"sim/pod-(\d+)", str(pod))
        if m is None:
            raise ValueError(f"{pod} is not one of the simulator's pods")
        body = json.dumps({"pod": int(m.group(1)), "rank": rank,
                           "token_ids": tokens}).encode()
        req = urllib.request.Request(self.control + "/prefill", data=body,
                                     method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())


def incoming(n, seed):
    """n made-up requests: new conversations on one of a few shared system
    prompts, and follow-up turns that extend an earlier conversation."""
    rng = random.Random(seed)

    def text(lo, hi):
        return [rng.randrange(1, 150000) for _ in range(rng.randint(lo, hi))]
    systems = [text(64, 128) for _ in range(3)]
    conversations = []
    for _ in range(n):
        if conversations and rng.random() < 0.5:
            conv = rng.choice(conversations)
            conv.extend(text(16, 48))
        else:
            conv = rng.choice(systems) + text(16, 48)
            conversations.append(conv)
        yield list(conv)


class Router:
    def __init__(self, client, model, top_k):
        self.client = client
        self.model = model
        self.top_k = top_k
        # tokens each rank computed for this router: a stand-in for the
        # load a real router tracks (queue length, tokens in flight)
        self.load = {}
        for inst in client.workers(model=model):
            for rank in inst.listeners:
                self.load[(inst.name or inst.instance_id, rank)] = 0
        if not self.load:
            raise SystemExit(f"no rank serves model {model}")

    def least_loaded(self, among=None):
        ranks = among if among is not None else list(self.load)
        return min(ranks, key=lambda r: self.load.get(r, 0))

    def choose(self, tokens):
        """(pod or instance id, dp_rank), why, the index's worker."""
        try:
            answer = self.client.query(self.model, tokens, top_k=self.top_k)
        except ClientError as e:  # the index down: route on without it
            return self.least_loaded(), f"least-loaded (no index: {e})", None
        if not answer.workers:
            return self.least_loaded(), "least-loaded", None
        top = answer.workers[0].expected_blocks
        tied = {(w.target, w.dp_rank): w for w in answer.workers
                if w.expected_blocks == top}
        rank = self.least_loaded(list(tied))
        return rank, "cache", tied[rank]

    def report(self, tokens, rank):
        target, dp_rank = rank
        by = {"pod": target} if isinstance(target, str) else \
            {"instance_id": target}
        try:
            self.client.routed(self.model, tokens, dp_rank=dp_rank, **by)
        except ClientError as e:
            # nothing recorded (a 503 changes nothing): route on without it
            print(f"  routed not recorded: {e}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--coordinator", action="append",
                    help="a coordinator replica's URL, repeatable "
                         "(default http://127.0.0.1:8080)")
    ap.add_argument("--control", help="the simulator's control URL")
    ap.add_argument("--layout", help="the simulator's layout file (its "
                                     "control URL is in it)")
    ap.add_argument("--model", default="sim-model")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1.0,
                    help="seconds for each call to the coordinator")
    ap.add_argument("--packed", action="store_true",
                    help="send prompts as packed little-endian token ids "
                         "(the compact request form) instead of JSON")
    args = ap.parse_args()
    control = args.control
    if control is None and args.layout:
        with open(args.layout) as f:
            control = json.load(f)["control"]
    if control is None:
        ap.error("give --control URL or --layout FILE")

    client = Client(args.coordinator or ["http://127.0.0.1:8080"],
                    timeout=args.timeout, packed=args.packed)
    router = Router(client, args.model, args.top_k)
    engines = SimEngines(control)
    prompt_tokens = hit_tokens = 0
    why_count = {}
    for i, tokens in enumerate(incoming(args.requests, args.seed)):
        rank, why, w = router.choose(tokens)
        router.report(tokens, rank)
        done = engines.send(rank[0], rank[1], tokens)
        hit = done.get("hit_tokens", 0)
        router.load[rank] = router.load.get(rank, 0) + len(tokens) - hit
        prompt_tokens += len(tokens)
        hit_tokens += hit
        kind = why.split(" ")[0]
        why_count[kind] = why_count.get(kind, 0) + 1
        index = "" if w is None else \
            f" index: {w.matched_tokens} held + {w.pending_tokens} pending;"
        print(f"#{i:<3} {len(tokens):4} tokens -> {rank[0]}#{rank[1]}  "
              f"{why:12}{index} engine hit {hit}")
    share = hit_tokens / prompt_tokens if prompt_tokens else 0.0
    print(f"{args.requests} requests: "
          + ", ".join(f"{n} by {k}" for k, n in sorted(why_count.items()))
          + f"; engine hits {hit_tokens} of {prompt_tokens} prompt tokens "
            f"({share:.0%})")


if __name__ == "__main__":
    main()
