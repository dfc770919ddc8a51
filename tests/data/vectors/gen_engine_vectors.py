"""Writes engine_events.jsonl and extra_hashes.jsonl.

The event vectors are encoded by msgspec with structs declared as the
engines declare them (vLLM: vllm/distributed/kv_events.py; SGLang:
python/sglang/srt/disaggregation/kv_events.py); the expected local hashes
are computed here, independently of the C code, with libxxhash's XXH3
through ctypes, following common/hash.h. Needs msgspec importable and
libxxhash.so.0:

    python3 gen_engine_vectors.py
"""

import ctypes
import json
import struct
from typing import Any, Optional, Union

import msgspec

_xx = ctypes.CDLL("libxxhash.so.0")
_xx.XXH3_64bits_withSeed.restype = ctypes.c_uint64
_xx.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_uint64]
M64 = (1 << 64) - 1


def xxh3(data: bytes, seed: int) -> int:
    return _xx.XXH3_64bits_withSeed(data, len(data), seed & M64)


def seed_of(lora: Optional[str], salt: Optional[str]) -> int:
    s = 1337
    if lora:
        s += xxh3(lora.encode(), 0)
    if salt:
        s += xxh3(salt.encode(), 1)
    return s & M64


def rec(kind: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(data)) + data


def extra_bytes(keys, lora: Optional[str], first: bool):
    """The block's extra bytes and the salt, from a vLLM extra_keys tuple."""
    if not keys:
        return b"", None
    keys = list(keys)
    if lora and keys and keys[0] == lora:
        keys = keys[1:]
    strs = [i for i, k in enumerate(keys) if isinstance(k, str)]
    last = strs[-1] if strs else None
    out, salt = b"", None
    for i, k in enumerate(keys):
        if isinstance(k, str) and first and i == last:
            salt = k
        elif isinstance(k, str):
            out += rec(b"i", k.encode())
        elif isinstance(k, tuple):
            out += rec(b"m", k[0].encode()) + struct.pack("<q", k[1])
        elif isinstance(k, bytes):
            out += rec(b"e", k)
        else:
            out += rec(b"u", b"")
    return out, salt


def local_hashes(tokens, bs, lora, salt, extras, has_parent):
    """local hashes of an event's blocks (hash.h)."""
    out = []
    for i in range(len(tokens) // bs):
        blk = struct.pack("<%dI" % bs, *tokens[i * bs:(i + 1) * bs])
        sd = seed_of(lora, salt if (i == 0 and not has_parent) else None)
        out.append(str(xxh3(blk + extras[i], sd)))
    return out


# ---- vLLM, as vllm/distributed/kv_events.py declares it ----------------

class VEventBatch(msgspec.Struct, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Optional[int] = None


class VEventBatchArray(msgspec.Struct, array_like=True, omit_defaults=True,
                       gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: Optional[int] = None


class VEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(VEvent):
    block_hashes: list[Union[bytes, int]]
    parent_block_hash: Union[bytes, int, None]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str]
    lora_name: Optional[str]
    extra_keys: Optional[list[Optional[tuple[Any, ...]]]] = None
    group_idx: Optional[int] = None
    kv_cache_spec_kind: Optional[str] = None
    kv_cache_spec_sliding_window: Optional[int] = None


class BlockRemoved(VEvent):
    block_hashes: list[Union[bytes, int]]
    medium: Optional[str]
    group_idx: Optional[int] = None
    remaining_copy_counts: Optional[list[int]] = None


class BlockInactive(VEvent):
    """A proposed event type: unknown to the decoder, to be skipped."""
    block_hashes: list[int]
    medium: Optional[str]


# ---- SGLang, as python/sglang/srt/disaggregation/kv_events.py --------

class SEventBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[Any]
    attn_dp_rank: Optional[int] = None


class SEvent(msgspec.Struct, array_like=True, gc=False, tag=True):
    pass


class SBlockStoredMetadata(msgspec.Struct, omit_defaults=True, gc=False):
    cache_salt: str


class SBlockStored(SEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int]
    medium: Optional[str] = None


class SBlockStoredWithMetadata(SBlockStored, tag="BlockStored",
                               kw_only=True):
    metadata: SBlockStoredMetadata


class SMapEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class SMapBlockStored(SMapEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: Optional[int]
    token_ids: list[int]
    block_size: int
    lora_id: Optional[int] = None
    medium: Optional[str] = None
    cache_salt: Optional[str] = None
    session_id: Optional[str] = None


enc = msgspec.msgpack.Encoder()
T8 = list(range(100, 108))  # two blocks of 4
BS = 4


def stored_expect(ev, salt_from=None, extras=None, has_parent=False):
    lora = getattr(ev, "lora_name", None)
    salt = salt_from
    ex = extras if extras is not None else [b""] * len(ev.block_hashes)
    return {
        "type": "stored",
        "block_hashes": [str(h & M64) for h in ev.block_hashes],
        "parent": None if ev.parent_block_hash is None
        else str(ev.parent_block_hash & M64),
        "token_ids": ev.token_ids,
        "block_size": ev.block_size,
        "medium": getattr(ev, "medium", None),
        "lora_name": lora,
        "cache_salt": salt,
        "extra_hex": [e.hex() for e in ex],
        "local_hashes": local_hashes(ev.token_ids, BS, lora, salt, ex,
                                     has_parent) if ev.token_ids else [],
    }


def vllm_extras(ev):
    ex, salt = [], None
    for i, k in enumerate(ev.extra_keys or [None] * len(ev.block_hashes)):
        b, s = extra_bytes(k, ev.lora_name,
                           i == 0 and ev.parent_block_hash is None)
        ex.append(b)
        salt = salt or s
    return ex, salt


vectors = []


def add(name, batch, events_expect, rank, source):
    vectors.append({"name": name, "source": source,
                    "hex": enc.encode(batch).hex(),
                    "expect": {"dp_rank": rank, "events": events_expect}})


VLLM = "vLLM kv_events.py structs (map batch, tagged map events)"

# 1. salted, LoRA, multimodal request: extra_keys of vLLM today
ev = BlockStored([11, 12], None, T8, BS, None, "GPU", "ad-1",
                 extra_keys=[("ad-1", ("img-a", 2), "tenant-b"),
                             ("ad-1", ("img-a", -2))])
ex, salt = vllm_extras(ev)
add("vllm_salt_lora_mm_extra_keys", VEventBatch(1.5, [ev], 0),
    [stored_expect(ev, salt, ex)], 0, VLLM)

# 2. continuation of a salted request: no salt, salted through the parent
ev = BlockStored([13], 12, T8[:4], BS, None, "GPU", None,
                 extra_keys=[None])
add("vllm_continuation_no_salt", VEventBatch(1.5, [ev], 1),
    [stored_expect(ev, None, [b""], True)], 1, VLLM)

# 3. older engines: mm identifier alone, and a prompt-embeds digest
ev = BlockStored([21, 22], None, T8, BS, None, "GPU", None,
                 extra_keys=[("mmhash-1", b"\x01" * 32), None])
ex, salt = vllm_extras(ev)
add("vllm_mm_identifier_alone_and_embeds", VEventBatch(2.0, [ev], 0),
    [stored_expect(ev, salt, ex)], 0, VLLM)

# 4. CPU offload: known hashes, no tokens, no parent, block_size 0
ev = BlockStored([11, 12], None, [], 0, None, "CPU", None)
add("vllm_offload_cpu_no_tokens_bs0", VEventBatch(2.5, [ev], 0),
    [stored_expect(ev)], 0, VLLM)

# 5. GPU eviction of an offloaded block (newest field: copy counts)
ev = BlockRemoved([11], "GPU", remaining_copy_counts=[1])
add("vllm_removed_gpu_with_copy_counts", VEventBatch(3.0, [ev], 0),
    [{"type": "removed", "block_hashes": ["11"], "medium": "GPU"}], 0,
    VLLM)

# 6. an unknown event type between two stores
a = BlockStored([31], None, T8[:4], BS, None, "GPU", None)
u = BlockInactive([31], "GPU")
b = BlockStored([32], 31, T8[4:], BS, None, "GPU", None)
add("vllm_unknown_event_between_stores",
    VEventBatch(3.5, [a, u, b], 0),
    [stored_expect(a), {"type": "skipped", "skip": "unknown_type"},
     stored_expect(b, None, None, True)], 0, VLLM)

# 7. vLLM 0.26: an array batch of map events
ev = BlockStored([41], None, T8[:4], BS, None, "GPU", None,
                 extra_keys=[("tenant-c",)])
ex, salt = vllm_extras(ev)
add("vllm_026_array_batch_map_events", VEventBatchArray(4.0, [ev], 2),
    [stored_expect(ev, salt, ex)], 2,
    "vLLM 0.26 structs (array batch, tagged map events)")

SGL = "SGLang kv_events.py structs (array batch, positional events)"

# 8. SGLang positional, salted: metadata map at index 7
ev = SBlockStoredWithMetadata(block_hashes=[-5, 6], parent_block_hash=None,
                              token_ids=T8, block_size=BS, lora_id=None,
                              medium="GPU",
                              metadata=SBlockStoredMetadata("tenant-s"))
add("sglang_positional_salted_metadata", SEventBatch(5.0, [ev], 0),
    [stored_expect(ev, "tenant-s")], 0, SGL)

# 9. SGLang positional, unsalted (trailing default medium omitted)
ev = SBlockStored([7], None, T8[:4], BS, None)
add("sglang_positional_unsalted", SEventBatch(5.5, [ev], 0),
    [stored_expect(ev)], 0, SGL)

# 10. SGLang tagged maps with cache_salt and session_id
ev = SMapBlockStored([8], None, T8[:4], BS, medium="CPU_PINNED",
                     cache_salt="tenant-m", session_id="s-1")
add("sglang_map_salted", SEventBatch(6.0, [ev], 1),
    [stored_expect(ev, "tenant-m")], 1,
    "SGLang tagged-map BlockStored with cache_salt and session_id")

# 11. SGLang positional with the metadata map as
# docs/wire.md#sglang-metadata describes later versions: session_id and a
# key not known yet beside cache_salt


class SBlockStoredMetadataLater(msgspec.Struct, omit_defaults=True, gc=False):
    cache_salt: str
    session_id: Optional[str] = None
    priority: Optional[int] = None


class SBlockStoredWithMetadataLater(SBlockStored, tag="BlockStored",
                                    kw_only=True):
    metadata: SBlockStoredMetadataLater


ev = SBlockStoredWithMetadataLater(
    block_hashes=[9], parent_block_hash=None, token_ids=T8[:4],
    block_size=BS, lora_id=None, medium="GPU",
    metadata=SBlockStoredMetadataLater("tenant-l", "s-2", 3))
add("sglang_positional_metadata_later_keys", SEventBatch(6.5, [ev], 0),
    [stored_expect(ev, "tenant-l")], 0,
    "SGLang positional BlockStored, metadata with session_id and a later "
    "key")

with open("engine_events.jsonl", "w") as f:
    for v in vectors:
        f.write(json.dumps(v) + "\n")

# ---- local hashes of prompts with extra keys (hash.h) -----------------


def prompt_hashes(tokens, bs, lora=None, salt=None, mm=()):
    out, nxt = [], 0
    for i in range(len(tokens) // bs):
        start, end = i * bs, i * bs + bs
        ex = b""
        j = nxt
        while j < len(mm) and mm[j][1] < end:
            ident, off, ln = mm[j]
            if off + ln <= start:
                j += 1
                continue
            ex += rec(b"m", ident.encode()) + struct.pack("<q", off - start)
            if off + ln > end:
                break
            j += 1
        nxt = j
        blk = struct.pack("<%dI" % bs, *tokens[start:end])
        out.append(str(xxh3(blk + ex, seed_of(lora, salt if i == 0
                                              else None))))
    return out


P = list(range(1, 17))
cases = [
    ("plain", {}),
    ("lora", {"lora_name": "ad-1"}),
    ("salt_first_block_only", {"cache_salt": "tenant-b"}),
    ("lora_and_salt", {"lora_name": "ad-1", "cache_salt": "tenant-b"}),
    ("mm_one_item_across_blocks",
     {"mm_features": [["img-a", 2, 7]]}),
    ("mm_two_items_one_block",
     {"mm_features": [["img-a", 0, 2], ["img-b", 2, 1]]}),
    ("mm_item_covering_whole_blocks",
     {"mm_features": [["img-c", 4, 8]]}),
]
with open("extra_hashes.jsonl", "w") as f:
    for name, k in cases:
        mm = [tuple(x) for x in k.get("mm_features", [])]
        f.write(json.dumps({
            "name": name, "token_ids": P, "block_size": 4,
            "lora_name": k.get("lora_name"),
            "cache_salt": k.get("cache_salt"),
            "mm_features": [{"identifier": a, "offset": b, "length": c}
                            for a, b, c in mm],
            "local_hashes": prompt_hashes(P, 4, k.get("lora_name"),
                                          k.get("cache_salt"), mm),
        }) + "\n")
