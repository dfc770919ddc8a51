"""What the coordinator answers, as typed values, and the client's errors.

Instance ids and block hashes are u64. The coordinator writes ids as
decimal strings in its answers (docs/api.md#conventions); every value here
has them as Python ints. The answer as it came is kept in ``raw``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union


class ClientError(Exception):
    """Base class of the errors the client raises."""


class KvindexError(ClientError):
    """A coordinator answered with an error status.

    ``status`` is the HTTP status, ``message`` the ``error`` field of the
    body (or a description when the body is not the API's JSON error, as
    for a 413 the HTTP library answers itself), ``body`` the decoded body
    when it was JSON (extra fields such as ``connected_ranks`` or
    ``listener``), ``url`` the URL that answered.
    """

    def __init__(self, status: int, message: str,
                 body: Optional[Any] = None, url: Optional[str] = None):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body
        self.url = url


class Unreachable(ClientError):
    """No coordinator replica answered: every attempt failed to connect,
    broke, or timed out. ``causes`` lists ``(url, exception)`` for each
    attempt, in order."""

    def __init__(self, message: str, causes: list):
        super().__init__(message)
        self.causes = causes


def _u64(v: Any) -> int:
    """An id or hash as the API writes it (decimal string or number)."""
    return int(v)


@dataclass
class Group:
    """One KV cache group of a hybrid model's rank and the hit it alone
    allows (docs/api.md#hybrid-models-groups)."""
    group: int
    kind: str
    window: Optional[int]
    matched_blocks: int
    matched_tokens: int

    @classmethod
    def from_json(cls, g: dict) -> "Group":
        return cls(group=g["group"], kind=g["kind"], window=g.get("window"),
                   matched_blocks=g["matched_blocks"],
                   matched_tokens=g["matched_tokens"])


@dataclass
class Worker:
    """One rank of one engine in a query's answer: the prefix it holds
    (``matched_*``, split over the tiers ``gpu``, ``cpu``, ``disk``, in
    tokens) and how far past it the prompt is expected from routed
    requests (``pending_*``)."""
    instance_id: int
    pod: Optional[str]
    dp_rank: int
    matched_blocks: int
    matched_tokens: int
    gpu: int
    cpu: int
    disk: int
    pending_blocks: int
    pending_tokens: int
    groups: list = field(default_factory=list)

    @property
    def target(self) -> Union[str, int]:
        """The pod's name, or the instance id for ranks registered one by
        one: what ``Client.routed`` takes as ``pod`` or ``instance_id``."""
        return self.pod if self.pod is not None else self.instance_id

    @property
    def expected_blocks(self) -> int:
        """Held plus pending blocks: what the answer's order ranks by."""
        return self.matched_blocks + self.pending_blocks

    @classmethod
    def from_json(cls, w: dict) -> "Worker":
        return cls(instance_id=_u64(w["instance_id"]), pod=w.get("pod"),
                   dp_rank=w["dp_rank"],
                   matched_blocks=w["matched_blocks"],
                   matched_tokens=w["matched_tokens"],
                   gpu=w.get("gpu", 0), cpu=w.get("cpu", 0),
                   disk=w.get("disk", 0),
                   pending_blocks=w.get("pending_blocks", 0),
                   pending_tokens=w.get("pending_tokens", 0),
                   groups=[Group.from_json(g) for g in w.get("groups", [])])


@dataclass
class Answer:
    """The answer to ``/query`` or ``/query_by_hash`` (docs/api.md#post-query).

    ``workers`` is best first; ``best`` is the first of them (None when no
    rank holds or expects any block of the prompt). ``scores`` is the
    compatible field, exact entries only: ``{instance_id: {dp_rank:
    matched_tokens}}`` with int keys. ``partial``: a shard the query needed
    did not answer; ``stale``: a shard that answered has stopped following
    its engines.
    """
    model_name: Optional[str]
    block_size: Optional[int]
    query_blocks: Optional[int]
    workers: list
    best: Optional[Worker]
    partial: bool
    stale: bool
    scores: dict
    shards: Optional[dict]
    raw: dict

    @classmethod
    def from_json(cls, a: dict) -> "Answer":
        workers = [Worker.from_json(w) for w in a.get("workers") or []]
        best = None
        b = a.get("best")
        if b is not None:
            key = (_u64(b["instance_id"]), b["dp_rank"])
            best = next((w for w in workers
                         if (w.instance_id, w.dp_rank) == key), None)
            if best is None:
                bs = a.get("block_size") or 1
                best = Worker(instance_id=key[0], pod=b.get("pod"),
                              dp_rank=key[1],
                              matched_blocks=b["matched_tokens"] // bs,
                              matched_tokens=b["matched_tokens"],
                              gpu=0, cpu=0, disk=0,
                              pending_blocks=b.get("pending_tokens", 0) // bs,
                              pending_tokens=b.get("pending_tokens", 0))
        scores = {_u64(i): {int(r): t for r, t in ranks.items()}
                  for i, ranks in (a.get("scores") or {}).items()}
        return cls(model_name=a.get("model_name"),
                   block_size=a.get("block_size"),
                   query_blocks=a.get("query_blocks"),
                   workers=workers, best=best,
                   partial=bool(a.get("partial", False)),
                   stale=bool(a.get("stale", False)),
                   scores=scores, shards=a.get("shards"), raw=a)


@dataclass
class Routed:
    """The answer to ``/routed`` (docs/api.md#post-routed)."""
    listener: str
    matched_blocks: int
    pending_blocks: int
    predicted_blocks: int
    raw: dict

    @classmethod
    def from_json(cls, a: dict) -> "Routed":
        return cls(listener=a["listener"],
                   matched_blocks=a["matched_blocks"],
                   pending_blocks=a["pending_blocks"],
                   predicted_blocks=a.get("predicted_blocks", 0), raw=a)


@dataclass
class Instance:
    """One registered instance (pod) from ``/workers``
    (docs/api.md#get-workers). ``listeners`` maps each rank (int) to its
    listener's fields as the API gives them."""
    instance_id: int
    name: Optional[str]
    model_name: str
    block_size: int
    source: str
    status: str
    listeners: dict
    raw: dict

    @classmethod
    def from_json(cls, a: dict) -> "Instance":
        return cls(instance_id=_u64(a["instance_id"]), name=a.get("name"),
                   model_name=a["model_name"], block_size=a["block_size"],
                   source=a.get("source", ""), status=a.get("status", ""),
                   listeners={int(r): v
                              for r, v in (a.get("listeners") or {}).items()},
                   raw=a)


@dataclass
class Registration:
    """The answer to ``/register`` (docs/api.md#post-register). ``status`` is
    ``registered`` or ``pending`` (kept, to be assigned once a shard
    takes it; then ``error`` and ``retry_in_ms`` say why and when)."""
    http_status: int
    instance_id: int
    name: Optional[str]
    listeners: list
    status: str
    existed: bool
    error: Optional[str]
    retry_in_ms: Optional[int]
    raw: dict

    @classmethod
    def from_json(cls, http_status: int, a: dict) -> "Registration":
        return cls(http_status=http_status,
                   instance_id=_u64(a["instance_id"]), name=a.get("name"),
                   listeners=list(a.get("listeners") or []),
                   status=a.get("status", ""),
                   existed=bool(a.get("existed", False)),
                   error=a.get("error"), retry_in_ms=a.get("retry_in_ms"),
                   raw=a)
