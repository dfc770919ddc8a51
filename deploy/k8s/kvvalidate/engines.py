"""The engine pods the coordinator's --watch-label selects.

The coordinator derives each engine pod's listeners from its labels and
annotations and its own --watch-* flags: rank r of a pod with dp_size N
publishes on zmq_port + r, replays on replay_port + r, recovers on
recover_port + r. When the render contains the engines too, this checks
that the watch label selects them, that they carry only annotations the
watcher reads, with values in range, that the per-rank port ranges neither
overlap nor run past 65535 and are declared, and that vLLM's own settings
(--data-parallel-size, --block-size, --kv-events-config) agree with what
kvindex derives - a mismatch there leaves ranks unindexed without any
error.
"""

import json
import re

from .objects import (container_ports, name_of, parse_selector_string,
                      selector_string_matches)
from .report import suggest

# What the coordinator's pod watcher reads from a pod's annotations.
ANNOTATIONS = {
    "kvindex.io/dp-size": (1, 65536),
    "kvindex.io/zmq-port": (1, 65535),
    "kvindex.io/replay-port": (1, 65535),
    "kvindex.io/recover-port": (1, 65535),
    "kvindex.io/block-size": (1, 1 << 20),
    "kvindex.io/model": None,
}

# vLLM's KVEventsConfig fields (vllm/config/kv_events.py).
KV_EVENTS_FIELDS = {"enable_kv_cache_events", "publisher", "endpoint",
                    "replay_endpoint", "buffer_steps", "hwm",
                    "max_queue_size", "topic"}


def ann_int(rep, where, ann, key, default):
    if key not in ann:
        return default
    v, lim = ann[key], ANNOTATIONS[key]
    if not isinstance(v, str) or not re.match(r"^[0-9]+$", v) or \
            not lim[0] <= int(v) <= lim[1]:
        rep.err(where, f"annotation {key}={v!r}: not a decimal integer in "
                f"{lim[0]}..{lim[1]}")
        return default
    return int(v)


def flag_int(flags, name, default):
    vals = flags.get(name) or []
    try:
        return int(vals[-1]) if vals else default
    except ValueError:
        return default


def check_engines(rep, r, where, flags, kvindex_names):
    """The engine pods of this render that the watcher selects."""
    engines = [p for p in r.pods if name_of(p[0]) not in kvindex_names]
    if not engines:
        return
    label = (flags.get("--watch-label") or [None])[-1]
    try:
        reqs = parse_selector_string(label) if label else []
    except ValueError as e:
        rep.err(where, f"--watch-label {label!r}: {e}")
        return
    model_label = (flags.get("--watch-model-label") or
                   ["kvindex.io/model"])[-1]
    chosen = [p for p in engines
              if selector_string_matches(reqs, p[1].get("labels"))]
    if not chosen:
        rep.err(where, f"--watch-label {label!r} selects none of the engine "
                "pods in this render: " +
                ", ".join(f"{p[0].get('kind')}/{name_of(p[0])}"
                          for p in engines))
    for o, meta, spec, path in chosen:
        ew = r.where(o)
        ann = meta.get("annotations") or {}
        for k in ann:
            if k.startswith("kvindex.io/") and k not in ANNOTATIONS:
                rep.err(ew, f"annotation {k}: the watcher does not read it"
                        f"{suggest(k, ANNOTATIONS)}")
        if not ann.get("kvindex.io/model") and \
                not (meta.get("labels") or {}).get(model_label):
            rep.err(ew, f"no model: neither annotation kvindex.io/model nor "
                    f"label {model_label}")
        dp = ann_int(rep, ew, ann, "kvindex.io/dp-size",
                     flag_int(flags, "--watch-dp-size", 1))
        zmq = ann_int(rep, ew, ann, "kvindex.io/zmq-port",
                      flag_int(flags, "--watch-zmq-port", 5557))
        replay = ann_int(rep, ew, ann, "kvindex.io/replay-port",
                         flag_int(flags, "--watch-replay-port", None))
        recover = ann_int(rep, ew, ann, "kvindex.io/recover-port",
                          flag_int(flags, "--watch-recover-port", None))
        block = ann_int(rep, ew, ann, "kvindex.io/block-size",
                        flag_int(flags, "--watch-block-size", 16))
        ranges = {"event": zmq, "replay": replay, "recover": recover}
        ranges = {k: set(range(v, v + dp)) for k, v in ranges.items()
                  if v is not None}
        for k, ports in ranges.items():
            if max(ports) > 65535:
                rep.err(ew, f"{k} ports {min(ports)}..{max(ports)} for "
                        f"{dp} ranks run past 65535")
        kinds = sorted(ranges)
        for i, a in enumerate(kinds):
            for b in kinds[i + 1:]:
                both = ranges[a] & ranges[b]
                if both:
                    rep.err(ew, f"{a} and {b} ports overlap at "
                            f"{sorted(both)} with {dp} ranks (rank r uses "
                            "base + r)")
        names, nums = container_ports(spec)
        if nums:
            for k, ports in ranges.items():
                for pnum in sorted(ports - nums):
                    rep.err(ew, f"rank {pnum - min(ports)}'s {k} port {pnum} "
                            f"is not a declared containerPort ({dp} ranks)")
        for ci, c in enumerate(spec.get("containers") or []):
            check_vllm(rep, ew, f"{path}.containers[{ci}]", c, dp, zmq,
                       replay, block)


def vllm_opts(args):
    out, i = {}, 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            name, eq, val = a.partition("=")
            if not eq and i + 1 < len(args) and \
                    not args[i + 1].startswith("-"):
                val = args[i + 1]
                i += 1
            out[name] = val
        i += 1
    return out


def endpoint_port(ep):
    m = re.match(r"^tcp://[^:]+:([0-9]+)$", ep or "")
    return int(m.group(1)) if m else None


def check_vllm(rep, where, cpath, c, dp, zmq, replay, block):
    args = [a for a in (c.get("command") or []) + (c.get("args") or [])
            if isinstance(a, str)]
    opts = vllm_opts(args)
    if "--kv-events-config" not in opts:
        return
    try:
        cfg = json.loads(opts["--kv-events-config"])
    except ValueError as e:
        rep.err(where, f"{cpath}: --kv-events-config is not JSON: {e}")
        return
    if not isinstance(cfg, dict):
        rep.err(where, f"{cpath}: --kv-events-config is not a JSON object")
        return
    for k in cfg:
        if k not in KV_EVENTS_FIELDS:
            rep.err(where, f"{cpath}: --kv-events-config: {k!r} is not a "
                    f"KVEventsConfig field{suggest(k, KV_EVENTS_FIELDS)}")
    if cfg.get("enable_kv_cache_events") is not True:
        rep.err(where, f"{cpath}: --kv-events-config: enable_kv_cache_events "
                "is not true")
    if cfg.get("publisher", "zmq") != "zmq":
        rep.err(where, f"{cpath}: --kv-events-config: publisher is not zmq")
    ep = endpoint_port(cfg.get("endpoint", "tcp://*:5557"))
    if ep != zmq:
        rep.err(where, f"{cpath}: vLLM publishes rank 0 on port {ep}, "
                f"kvindex subscribes to {zmq}")
    rp = endpoint_port(cfg.get("replay_endpoint"))
    if rp != replay:
        rep.err(where, f"{cpath}: vLLM replays rank 0 on port {rp}, kvindex "
                f"expects {replay}")
    dps = opts.get("--data-parallel-size", opts.get("-dp", "1"))
    if str(dps) != str(dp):
        rep.err(where, f"{cpath}: vLLM --data-parallel-size {dps}, kvindex "
                f"derives {dp} ranks for the pod")
    bs = opts.get("--block-size")
    if bs is not None and str(bs) != str(block):
        rep.err(where, f"{cpath}: vLLM --block-size {bs}, kvindex indexes "
                f"with block size {block}")
