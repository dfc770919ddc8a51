"""A client of the kvindex coordinator's HTTP API (docs/api.md), for
routers. Standard library only.

Every call is one HTTP request to one coordinator replica, on a new
connection, under ``timeout``. When a replica cannot be reached, breaks
the connection, times out or answers a 5xx, the same request goes to the
next URL of ``urls`` (round-robin), at most ``retries`` more times; a
replica that answered is asked first by the next call. Replicas answer
queries, ``/routed`` and ``/workers`` themselves; writes (``/register``,
``/unregister``) are redirected by a follower to the leader with a 307,
which the client follows, sending the method, body and token again
(docs/api.md#replicas-and-redirects).

Instance ids and block hashes are Python ints; they are sent as decimal
strings, which the API takes for any u64 (docs/api.md#conventions).

With ``packed=True`` the prompt of a query or ``/routed`` goes in the
compact form (docs/api.md#compact-request-bodies): the body is its token
ids as packed little-endian u32 (block hashes as u64), every other field
a query-string parameter; a call with ``mm_features`` is sent as JSON.
"""
from __future__ import annotations

import http.client
import json
import operator
import socket
import sys
import time
import urllib.parse
from array import array
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

from .results import (Answer, Instance, KvindexError, Registration, Routed,
                      Unreachable)

__all__ = ["Client", "MMFeature"]

_MAX_REDIRECTS = 5

_JSON = "application/json"
_PACKED = "application/octet-stream"

# array typecodes of the packed integers: token ids are u32, hashes u64
_U32 = "I" if array("I").itemsize == 4 else "L"
_U64 = "Q"


@dataclass
class MMFeature:
    """A multimodal item of a prompt: the engine's identifier (its mm
    hash), and the token positions it covers."""
    identifier: str
    offset: int
    length: int


MMFeatureLike = Union[MMFeature, dict, Sequence]


def _mm_json(items: Iterable[MMFeatureLike]) -> list:
    out = []
    for it in items:
        if isinstance(it, MMFeature):
            out.append({"identifier": it.identifier, "offset": it.offset,
                        "length": it.length})
        elif isinstance(it, dict):
            out.append(dict(it))
        else:
            ident, off, length = it
            out.append({"identifier": ident, "offset": off,
                        "length": length})
    return out


def _u64s(values: Iterable[int]) -> list:
    """u64 values as the decimal strings the API accepts: exact whatever
    parses the JSON on the way."""
    return [str(int(v)) for v in values]


def _pack(values: Iterable[int], field: str) -> bytes:
    """The packed body of a prompt (docs/api.md#compact-request-bodies):
    ``token_ids`` as little-endian u32, ``block_hashes`` as little-endian
    u64, whatever the host's byte order. A value out of range, or not an
    integer, is a ValueError naming it as the API would."""
    code, kind = (_U32, "u32") if field == "token_ids" else (_U64, "u64")
    if not isinstance(values, array) and not hasattr(values, "__len__"):
        values = list(values)  # an iterator: kept to name a bad value
    try:
        a = array(code, values)
    except (OverflowError, TypeError):
        for i, v in enumerate(values):
            try:
                x = operator.index(v)
            except TypeError:
                raise ValueError(f"{field}[{i}]: {v!r} is not an "
                                 f"integer") from None
            if not 0 <= x < 1 << (32 if kind == "u32" else 64):
                raise ValueError(f"{field}[{i}]: {x} is not a {kind}")
        raise
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def _query_string(fields: dict) -> str:
    """A packed request's fields as its query string: percent-encoded
    strings, decimal integers, ``true``/``false``, a list of instance ids
    comma-separated (an empty one restricts nothing: left out)."""
    out = []
    for name, v in fields.items():
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, str):
            text = urllib.parse.quote(v, safe="")
        elif isinstance(v, list):
            if not v:
                continue
            text = ",".join(v)
        else:
            try:
                text = str(operator.index(v))
            except TypeError:
                raise ValueError(f"{name} must be an integer, got "
                                 f"{v!r}") from None
        out.append(f"{name}={text}")
    return "&".join(out)


class _Split:
    """A base URL taken apart once."""

    def __init__(self, url: str):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")


class Client:
    """A client of one kvindex coordinator, or of several replicas of it.

    ``urls``: one base URL (``http://host:port``) or a list of them, the
    replicas of one coordinator. ``timeout``: seconds for each HTTP
    request (connecting, sending, and waiting for the whole answer).
    ``retries``: how many more replicas to try after a failed attempt
    (default: each URL once). ``token``: the bearer token for
    ``register_*`` and ``unregister`` when the coordinator has one.
    ``packed``: send the prompt of ``query``, ``query_by_hash``,
    ``best_rank``, ``routed`` and ``routed_by_hash`` in the compact form
    (packed little-endian integers; docs/api.md#compact-request-bodies),
    which needs a coordinator that takes it; a call with ``mm_features``
    is sent as JSON still.
    """

    def __init__(self, urls: Union[str, Sequence[str]], timeout: float = 2.0,
                 retries: Optional[int] = None, token: Optional[str] = None,
                 packed: bool = False):
        if isinstance(urls, str):
            urls = [urls]
        if not urls:
            raise ValueError("no coordinator URL")
        self._urls = [_Split(u) for u in urls]
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = float(timeout)
        self.retries = len(self._urls) - 1 if retries is None else retries
        if self.retries < 0:
            raise ValueError("retries must be 0 or more")
        self.token = token
        self.packed = bool(packed)
        self._next = 0

    @property
    def urls(self) -> list:
        return [u.url for u in self._urls]

    # -- queries -------------------------------------------------------

    def query(self, model: str, token_ids: Sequence[int], *,
              top_k: Optional[int] = None, dp_rank: Optional[int] = None,
              instances: Optional[Iterable[int]] = None,
              lora_name: Optional[str] = None,
              cache_salt: Optional[str] = None,
              mm_features: Optional[Iterable[MMFeatureLike]] = None,
              pending: bool = True) -> Answer:
        """POST /query: the longest cached prefix of the prompt on each
        rank of the model's engines, best first (docs/api.md#post-query).
        ``pending=False`` counts held blocks only."""
        fields: dict = {"model_name": model}
        _put(fields, lora_name=lora_name, cache_salt=cache_salt)
        _restrict(fields, top_k, dp_rank, instances, pending)
        return Answer.from_json(self._prompt(
            "/query", fields, "token_ids", token_ids, mm_features))

    def query_by_hash(self, model: str, block_hashes: Iterable[int], *,
                      top_k: Optional[int] = None,
                      dp_rank: Optional[int] = None,
                      instances: Optional[Iterable[int]] = None,
                      pending: bool = True) -> Answer:
        """POST /query_by_hash: the same, the prompt given as the local
        hash of each full block (docs/api.md#post-query_by_hash)."""
        fields: dict = {"model_name": model}
        _restrict(fields, top_k, dp_rank, instances, pending)
        return Answer.from_json(self._prompt(
            "/query_by_hash", fields, "block_hashes", block_hashes))

    def best_rank(self, model: str, token_ids: Sequence[int],
                  **query_args: Any) -> Optional[tuple]:
        """The rank to send the prompt to: ``(pod or instance_id,
        dp_rank)`` of the answer's best worker, or None when no rank holds
        or expects any block of it. Takes ``query``'s keyword arguments."""
        best = self.query(model, token_ids, **query_args).best
        return None if best is None else (best.target, best.dp_rank)

    # -- routing decisions ---------------------------------------------

    def routed(self, model: str, token_ids: Sequence[int], *,
               pod: Optional[str] = None, instance_id: Optional[int] = None,
               dp_rank: int = 0, ttl_ms: Optional[int] = None,
               lora_name: Optional[str] = None,
               cache_salt: Optional[str] = None,
               mm_features: Optional[Iterable[MMFeatureLike]] = None
               ) -> Routed:
        """POST /routed: say that the prompt was sent to this rank (by
        ``pod`` or by ``instance_id``, one of them); its blocks become
        pending there for ``ttl_ms`` (docs/api.md#post-routed). Give the
        same ``lora_name``, ``cache_salt`` and ``mm_features`` as the
        query."""
        fields: dict = {"model_name": model}
        _put(fields, lora_name=lora_name, cache_salt=cache_salt)
        return self._routed(fields, pod, instance_id, dp_rank, ttl_ms,
                            "token_ids", token_ids, mm_features)

    def routed_by_hash(self, model: str, block_hashes: Iterable[int], *,
                       pod: Optional[str] = None,
                       instance_id: Optional[int] = None, dp_rank: int = 0,
                       ttl_ms: Optional[int] = None) -> Routed:
        """POST /routed with the prompt as block hashes."""
        fields: dict = {"model_name": model}
        return self._routed(fields, pod, instance_id, dp_rank, ttl_ms,
                            "block_hashes", block_hashes)

    def _routed(self, fields: dict, pod, instance_id, dp_rank, ttl_ms,
                prompt_field: str, prompt: Iterable[int],
                mm_features=None) -> Routed:
        if (pod is None) == (instance_id is None):
            raise ValueError("name the rank by pod or by instance_id "
                             "(one of them)")
        if pod is not None:
            fields["pod"] = pod
        else:
            fields["instance_id"] = str(int(instance_id))
        fields["dp_rank"] = dp_rank
        if ttl_ms is not None:
            fields["ttl_ms"] = ttl_ms
        return Routed.from_json(self._prompt(
            "/routed", fields, prompt_field, prompt, mm_features))

    def _prompt(self, path: str, fields: dict, prompt_field: str,
                prompt: Iterable[int],
                mm_features: Optional[Iterable[MMFeatureLike]] = None
                ) -> Any:
        """POSTs a query or /routed: ``fields`` and the prompt
        (``token_ids`` or ``block_hashes``), packed when the client is and
        the call has no multimodal item, else as JSON. Returns the decoded
        answer."""
        mm = None if mm_features is None else _mm_json(mm_features)
        if self.packed and not mm:
            if path == "/routed" and prompt_field == "block_hashes":
                fields = dict(fields, prompt="block_hashes")
            data = _pack(prompt, prompt_field)
            return self._call("POST", f"{path}?{_query_string(fields)}",
                              data)[2]
        body: dict = {"model_name": fields.pop("model_name")}
        body[prompt_field] = (list(prompt) if prompt_field == "token_ids"
                              else _u64s(prompt))
        body.update(fields)
        if mm is not None:
            body["mm_features"] = mm
        return self._json("POST", path, body)

    # -- workers -------------------------------------------------------

    def iter_workers(self, model: Optional[str] = None,
                     name: Optional[str] = None,
                     page_size: int = 1000) -> Iterator[Instance]:
        """GET /workers page by page (``page_size`` instances a request,
        in instance id order), following ``X-Next-Cursor``
        (docs/api.md#get-workers)."""
        cursor = None
        while True:
            params = {"limit": str(page_size)}
            if model is not None:
                params["model_name"] = model
            if name is not None:
                params["name"] = name
            if cursor is not None:
                params["cursor"] = cursor
            path = "/workers?" + urllib.parse.urlencode(params)
            status, headers, body = self._call("GET", path)
            for inst in body:
                yield Instance.from_json(inst)
            cursor = headers.get("X-Next-Cursor")
            if not cursor:
                return

    def workers(self, model: Optional[str] = None,
                name: Optional[str] = None,
                page_size: int = 1000) -> list:
        """Every registered instance (of ``model``, or the pod ``name``),
        every page of GET /workers."""
        return list(self.iter_workers(model, name, page_size))

    # -- registration (writes: a follower redirects them) --------------

    def register_pod(self, name: str, ip: str, zmq_port: int, model: str,
                     block_size: int, *, dp_size: Optional[int] = None,
                     dp_start_rank: Optional[int] = None,
                     replay_port: Optional[int] = None,
                     recover_port: Optional[int] = None,
                     metrics_port: Optional[int] = None) -> Registration:
        """POST /register, per-pod form: every rank of the pod ``name``
        (``namespace/pod``) at once (docs/api.md#post-register)."""
        body = {"name": name, "ip": ip, "zmq_port": zmq_port,
                "model_name": model, "block_size": block_size}
        _put(body, dp_size=dp_size, dp_start_rank=dp_start_rank,
             replay_port=replay_port, recover_port=recover_port,
             metrics_port=metrics_port)
        return self._register(body)

    def register_rank(self, instance_id: int, endpoint: str, model: str,
                      block_size: int, *, dp_rank: Optional[int] = None,
                      replay_endpoint: Optional[str] = None,
                      recover_endpoint: Optional[str] = None
                      ) -> Registration:
        """POST /register, per-rank form: one rank of an instance."""
        body = {"instance_id": str(int(instance_id)), "endpoint": endpoint,
                "model_name": model, "block_size": block_size}
        _put(body, dp_rank=dp_rank, replay_endpoint=replay_endpoint,
             recover_endpoint=recover_endpoint)
        return self._register(body)

    def _register(self, body: dict) -> Registration:
        status, _, answer = self._call("POST", "/register", body, write=True)
        return Registration.from_json(status, answer)

    def unregister(self, *, name: Optional[str] = None,
                   instance_id: Optional[int] = None,
                   model: Optional[str] = None,
                   dp_rank: Optional[int] = None) -> list:
        """POST /unregister: a pod by ``name``, or an instance (every rank,
        or ``dp_rank``) by ``instance_id`` and ``model``. Returns the
        listener keys removed (docs/api.md#post-unregister)."""
        if (name is None) == (instance_id is None):
            raise ValueError("give name or instance_id (one of them)")
        body: dict = {}
        if name is not None:
            body["name"] = name
        else:
            body["instance_id"] = str(int(instance_id))
            _put(body, model_name=model)
        _put(body, dp_rank=dp_rank)
        _, _, answer = self._call("POST", "/unregister", body, write=True)
        return list(answer.get("unregistered") or [])

    # -- transport -----------------------------------------------------

    def _json(self, method: str, path: str, body: Optional[dict]) -> Any:
        return self._call(method, path, body)[2]

    def _call(self, method: str, path: str,
              body: Union[dict, bytes, None] = None,
              write: bool = False) -> tuple:
        """One request, retried on the next replica on a connection error,
        a timeout or a 5xx. ``body`` is a dict sent as JSON, or the bytes
        of a packed body (application/octet-stream), sent again to each
        replica tried. Returns (status, headers, decoded body) of a status
        below 300; raises KvindexError for another status (the last 5xx
        once the retries are spent), Unreachable when no replica
        answered."""
        if isinstance(body, (bytes, bytearray)):
            data, ctype = bytes(body), _PACKED
        else:
            data = None if body is None else json.dumps(body).encode()
            ctype = _JSON
        n = len(self._urls)
        start = self._next
        causes: list = []
        last: Optional[KvindexError] = None
        for attempt in range(self.retries + 1):
            i = (start + attempt) % n
            base = self._urls[i]
            try:
                status, headers, raw, url = self._exchange(
                    base, method, path, data, ctype, write)
            except (OSError, http.client.HTTPException) as e:
                causes.append((base.url, e))
                continue
            err = _error(status, raw, url)
            if err is not None and status >= 500:
                causes.append((base.url, err))
                last = err
                continue
            self._next = i
            if err is not None:
                raise err
            return status, headers, _decode(status, raw, url)
        self._next = (start + 1) % n
        if last is not None:
            raise last
        what = "; ".join(f"{u}: {e!r}" for u, e in causes)
        raise Unreachable(f"no coordinator replica answered {method} "
                          f"{path.split('?')[0]} ({what})", causes)

    def _exchange(self, base: _Split, method: str, path: str,
                  data: Optional[bytes], ctype: str, write: bool) -> tuple:
        """Sends one request to one replica, following a write's
        redirects to the leader. Returns (status, headers, body bytes,
        URL)."""
        target = base
        full = base.prefix + path
        for _ in range(_MAX_REDIRECTS + 1):
            status, headers, raw = self._once(target, method, full, data,
                                              ctype, write)
            if not (write and status in (307, 308)):
                return status, headers, raw, target.url + full
            loc = headers.get("Location")
            if not loc:
                return status, headers, raw, target.url + full
            u = urllib.parse.urlsplit(loc)
            if u.scheme:
                target = _Split(urllib.parse.urlunsplit(
                    (u.scheme, u.netloc, "", "", "")))
            full = (u.path or "/") + (f"?{u.query}" if u.query else "")
        raise http.client.HTTPException(
            f"more than {_MAX_REDIRECTS} redirects for {method} {path}")

    def _once(self, base: _Split, method: str, path: str,
              data: Optional[bytes], ctype: str, write: bool) -> tuple:
        deadline = time.monotonic() + self.timeout
        cls = (http.client.HTTPSConnection if base.https
               else http.client.HTTPConnection)
        conn = cls(base.host, base.port, timeout=self.timeout)
        try:
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = ctype
            if write and self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            conn.request(method, path, body=data, headers=headers)
            _remaining(conn, deadline)
            resp = conn.getresponse()
            _remaining(conn, deadline)
            raw = resp.read()
            return resp.status, resp.headers, raw
        finally:
            conn.close()


def _remaining(conn, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _error(status: int, raw: bytes, url: str) -> Optional[KvindexError]:
    if status < 300:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        msg = body["error"]
    elif isinstance(body, dict) and "location" in body:
        msg = f"redirected to {body['location']}"
    else:
        text = raw[:200].decode("utf-8", "replace").strip()
        msg = text or f"HTTP {status}"
    return KvindexError(status, msg, body, url)


def _decode(status: int, raw: bytes, url: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        raise KvindexError(status, "the answer is not JSON", None, url)


def _restrict(body: dict, top_k, dp_rank, instances, pending) -> None:
    _put(body, top_k=top_k, dp_rank=dp_rank)
    if instances is not None:
        body["instances"] = _u64s(instances)
    if not pending:
        body["pending"] = False


def _put(body: dict, **fields) -> None:
    for k, v in fields.items():
        if v is not None:
            body[k] = v
