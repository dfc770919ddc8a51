"""The engine pods the coordinator's --watch-label selects.

The coordinator derives each engine pod's listeners from its labels, its
annotations, its engine's own arguments and its own --watch-* flags, in
that order (coordinator/discovery/engine_args.h): the annotation wins when
present, else the engine's argument, else the flag; rank r of a pod with
dp_size N publishes on zmq_port + r, replays on replay_port + r, recovers
on recover_port + r. An annotation that disagrees with the engine's
argument keeps the pod from being registered. When the render contains the
engines too, this checks that the watch label selects them, that they
carry only annotations the watcher reads, with values in range, that no
annotation disagrees with vLLM's own settings (--data-parallel-size,
--data-parallel-size-local, --block-size, --kv-events-config's endpoints),
that the events are enabled, and that the per-rank port ranges neither
overlap nor run past 65535 and are declared.
"""

import json
import re

from .objects import (container_ports, name_of, parse_selector_string,
                      selector_string_matches)
from .report import suggest

# What the coordinator's pod watcher reads from a pod's annotations.
ANNOTATIONS = {
    "kvindex.io/dp-size": (1, 65536),
    "kvindex.io/dp-start-rank": (0, 65535),
    "kvindex.io/engine-container": None,
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
        eng = engine_settings(rep, ew, path, spec)
        dp = setting(rep, ew, ann, "kvindex.io/dp-size", eng, "dp_size",
                     flag_int(flags, "--watch-dp-size", 1))
        zmq = setting(rep, ew, ann, "kvindex.io/zmq-port", eng, "zmq_port",
                      flag_int(flags, "--watch-zmq-port", 5557))
        replay = setting(rep, ew, ann, "kvindex.io/replay-port", eng,
                         "replay_port",
                         flag_int(flags, "--watch-replay-port", None))
        recover = ann_int(rep, ew, ann, "kvindex.io/recover-port",
                          flag_int(flags, "--watch-recover-port", None))
        block = setting(rep, ew, ann, "kvindex.io/block-size", eng,
                        "block_size",
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


def engine_settings(rep, where, path, spec):
    """What the first vLLM container's arguments say: {name: (value, how)}
    for dp_size, zmq_port, replay_port and block_size, as the coordinator
    reads them (engine_args.h); also checks its --kv-events-config."""
    out = {}
    for ci, c in enumerate(spec.get("containers") or []):
        args = [a for a in (c.get("command") or []) + (c.get("args") or [])
                if isinstance(a, str)]
        if "vllm" not in " ".join(args[:3]):
            continue
        cpath = f"{path}.containers[{ci}]"
        opts = vllm_opts(args)
        local = opts.get("--data-parallel-size-local", opts.get("-dpl"))
        size = opts.get("--data-parallel-size", opts.get("-dp"))
        if local is not None:
            out["dp_size"] = (local, f"--data-parallel-size-local {local}")
        elif size is not None:
            out["dp_size"] = (size, f"--data-parallel-size {size}")
        if "--block-size" in opts:
            bs = opts["--block-size"]
            out["block_size"] = (bs, f"--block-size {bs}")
        cfg = kv_events(rep, where, cpath, opts)
        if cfg is not None:
            ep = endpoint_port(cfg.get("endpoint", "tcp://*:5557"))
            out["zmq_port"] = (ep, f"--kv-events-config endpoint port {ep}")
            rp = endpoint_port(cfg.get("replay_endpoint"))
            if rp is not None:
                out["replay_port"] = (rp, "--kv-events-config "
                                      f"replay_endpoint port {rp}")
        break
    return out


def kv_events(rep, where, cpath, opts):
    """The container's --kv-events-config, checked, or None."""
    if "--kv-events-config" not in opts:
        return None
    try:
        cfg = json.loads(opts["--kv-events-config"])
    except ValueError as e:
        rep.err(where, f"{cpath}: --kv-events-config is not JSON: {e}")
        return None
    if not isinstance(cfg, dict):
        rep.err(where, f"{cpath}: --kv-events-config is not a JSON object")
        return None
    for k in cfg:
        if k not in KV_EVENTS_FIELDS:
            rep.err(where, f"{cpath}: --kv-events-config: {k!r} is not a "
                    f"KVEventsConfig field{suggest(k, KV_EVENTS_FIELDS)}")
    if cfg.get("enable_kv_cache_events") is not True:
        rep.err(where, f"{cpath}: --kv-events-config: enable_kv_cache_events "
                "is not true")
    if cfg.get("publisher", "zmq") != "zmq":
        rep.err(where, f"{cpath}: --kv-events-config: publisher is not zmq")
    return cfg


def setting(rep, where, ann, key, eng, name, default):
    """A pod's value as the coordinator takes it: the annotation, else the
    engine's argument, else the flag; an annotation that disagrees with the
    engine keeps the pod from being registered."""
    if name in eng and key in ann:
        val = ann_int(rep, where, ann, key, None)
        got, how = eng[name]
        if val is not None and str(val) != str(got):
            rep.err(where, f"annotation {key}={val} disagrees with the "
                    f"engine's {how}: the coordinator does not register "
                    "the pod")
        return val
    if name in eng:
        try:
            return int(eng[name][0])
        except (TypeError, ValueError):
            rep.err(where, f"the engine's {eng[name][1]} is not a literal: "
                    f"annotate {key}")
            return default
    return ann_int(rep, where, ann, key, default)