#!/usr/bin/env python3
"""The Python client against a real cluster: the simulator (two DP=2 pods,
its layout file as the coordinator's --discovery-file), two shards and a
coordinator, as deploy/local-cluster.sh runs them, on loopback and in a
temporary directory.

The binaries come from KVI_SIM_BIN, KVI_SHARD_BIN and KVI_COORD_BIN (ctest
sets them: clients/CMakeLists.txt), else from the build tree KVI_BIN_DIR
(default: build/ at the repository's root). Without them the tests fail
and say so. KVI_KEEP_TMP=1 keeps the directory (logs, data) for a look
afterwards.

    python3 clients/python/tests/test_client.py [-v] [Test.name]
"""
import atexit
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
import urllib.request
from unittest import mock
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)

from kvindex_client import (Answer, Client, KvindexError, MMFeature,  # noqa: E402
                            Unreachable)
from kvindex_client import client as client_module  # noqa: E402

MODEL = "sim-model"
BS = 16
PODS, DP = 2, 2
WAIT_S = 30


def _die_with_parent():
    """In the child: SIGTERM when the test process dies, however it dies
    (a ctest timeout kills it), so that no cluster process outlives it."""
    try:
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG,
                                                signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def binary(env, rel):
    p = os.environ.get(env)
    if not p:
        p = os.path.join(os.environ.get("KVI_BIN_DIR",
                                        os.path.join(ROOT, "build")), rel)
    if not os.access(p, os.X_OK):
        raise RuntimeError(f"{p} is not an executable: build it, or set "
                           f"{env} (or KVI_BIN_DIR, the build tree)")
    return p


def wait(what, fn, timeout=WAIT_S, every=0.05):
    """Calls fn until it returns something true, which it returns."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - kept for the message
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}"
                         + (f" (last error: {last!r})" if last else ""))


def http_json(method, url, body=None, timeout=5):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Cluster:
    """The simulator, two shards and a coordinator, each a real process."""

    def __init__(self):
        self.sim_bin = binary("KVI_SIM_BIN", "tools/sim/kvindex-sim")
        self.shard_bin = binary("KVI_SHARD_BIN", "shard/kvindex-shard")
        self.coord_bin = binary("KVI_COORD_BIN",
                                "coordinator/kvindex-coordinator")
        self.dir = tempfile.mkdtemp(prefix="kvi-pyclient.")
        self.procs = []
        self.failed = False
        self.stopped = False
        atexit.register(self.stop)  # also when interrupted mid-test

    def spawn(self, name, argv):
        out = open(os.path.join(self.dir, f"{name}.out"), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL,
                             preexec_fn=_die_with_parent)
        out.close()
        self.procs.append((name, p))
        return p

    def start(self):
        d = self.dir
        layout = os.path.join(d, "layout.json")
        self.spawn("sim", [self.sim_bin, "--pods", str(PODS), "--dp",
                           str(DP), "--paused", "--layout-file", layout,
                           "--log-file", os.path.join(d, "sim.log")])
        def read_layout():
            with open(layout) as f:
                return json.load(f)
        lay = wait("the simulator's layout file",
                   lambda: os.path.exists(layout) and read_layout())
        self.control = lay["control"]
        shards = []
        for s in range(2):
            url = f"ipc://{d}/shard-{s}.ipc"
            self.spawn(f"shard-{s}", [
                self.shard_bin, "--id", f"shard-{s}", "--listen", url,
                "--data-dir", os.path.join(d, f"shard-{s}"),
                "--log-file", os.path.join(d, f"shard-{s}.log")])
            shards.append(f"shard-{s}={url}")
        log = os.path.join(d, "coordinator.log")
        coord = self.spawn("coordinator", [
            self.coord_bin, "--shards", ",".join(shards),
            "--http", "127.0.0.1:0", "--discovery-file", layout,
            "--data-dir", os.path.join(d, "coordinator"),
            "--log-file", log, "--tick-ms", "100",
            "--query-deadline-ms", "2000"])

        def port():
            if coord.poll() is not None:
                raise AssertionError(f"the coordinator exited; see {log}")
            with open(log) as f:
                for line in f:
                    if " event=serving " in line:
                        for w in line.split():
                            if w.startswith("port="):
                                return int(w[5:])
            return None
        self.url = f"http://127.0.0.1:{wait('the coordinator', port)}"
        wait("the coordinator to be ready",
             lambda: http_json("GET", self.url + "/ready")["ready"])

        def all_active():
            ws = http_json("GET", self.url + "/workers")
            ls = [v for w in ws for v in w["listeners"].values()]
            return len(ls) == PODS * DP and \
                all(v["status"] == "active" for v in ls)
        wait("every listener to be active", all_active)

    def prefill(self, pod, rank, tokens, **keys):
        body = {"pod": pod, "rank": rank, "token_ids": list(tokens)}
        body.update(keys)
        return http_json("POST", self.control + "/prefill", body)

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        for _, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if os.environ.get("KVI_KEEP_TMP") or self.failed:
            print(f"logs and data kept in {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster()
    try:
        CLUSTER.start()
    except BaseException:
        CLUSTER.failed = True
        CLUSTER.stop()
        raise


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.stop()


_next_prompt = [0]


def prompt(blocks=10, extra=0):
    """A prompt of its own: tokens no other test uses, `blocks` full
    blocks plus `extra` tokens."""
    _next_prompt[0] += 1
    base = 1_000_000 * _next_prompt[0]
    return list(range(base, base + blocks * BS + extra))


def free_port():
    """A loopback port nothing listens on (a few above it fit in u16)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            return port


class Stub:
    """A fake coordinator replica on loopback: answers every request with
    `reply(handler)` -> (status, headers, body bytes). `server.seen` lists
    each request as (method, path with its query string, Authorization,
    body bytes, Content-Type)."""

    def __init__(self, reply):
        class H(BaseHTTPRequestHandler):
            def do_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(n)
                self.server.seen.append((self.command, self.path,
                                         self.headers.get("Authorization"),
                                         self.body,
                                         self.headers.get("Content-Type")))
                status, headers, body = reply(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            do_GET = do_POST = do_any

            def log_message(self, *a):
                pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.seen = []
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Silent:
    """A port that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns = []
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.done = True
        self.sock.close()
        for c in self.conns:
            c.close()


class ClientTest(unittest.TestCase):

    def setUp(self):
        self.c = Client(CLUSTER.url, timeout=5)

    def found(self, tokens, check, **query_args):
        """Queries until `check(answer)` holds: the simulator's events
        reach the index a moment after /prefill answers."""
        return wait("the index to show the prefill",
                    lambda: (lambda a: a if check(a) else None)(
                        self.c.query(MODEL, tokens, **query_args)))

    def test_query_finds_rank(self):
        tokens = prompt(10, extra=5)
        self.assertIsNone(self.c.query(MODEL, tokens).best)
        CLUSTER.prefill(0, 1, tokens)
        a = self.found(tokens, lambda a: a.best is not None)
        self.assertIsInstance(a, Answer)
        self.assertEqual(a.model_name, MODEL)
        self.assertEqual(a.block_size, BS)
        self.assertEqual(a.query_blocks, 10)
        self.assertFalse(a.partial)
        self.assertFalse(a.stale)
        self.assertEqual(len(a.workers), 1)
        w = a.workers[0]
        self.assertIs(a.best, w)
        self.assertEqual((w.pod, w.dp_rank), ("sim/pod-0", 1))
        self.assertIsInstance(w.instance_id, int)
        self.assertEqual(str(w.instance_id), a.raw["workers"][0]["instance_id"])
        self.assertEqual((w.matched_blocks, w.matched_tokens), (10, 160))
        self.assertEqual(w.gpu + w.cpu + w.disk, 160)
        self.assertEqual((w.pending_blocks, w.pending_tokens), (0, 0))
        self.assertEqual(a.scores, {w.instance_id: {1: 160}})
        # restricted to another rank of the instance: nothing there
        a = self.c.query(MODEL, tokens, instances=[w.instance_id], dp_rank=0)
        self.assertEqual(a.workers, [])

    def test_best_rank(self):
        tokens = prompt(8)
        self.assertIsNone(self.c.best_rank(MODEL, tokens))
        CLUSTER.prefill(1, 0, tokens[:4 * BS])
        CLUSTER.prefill(0, 0, tokens)
        self.found(tokens, lambda a: len(a.workers) == 2)
        self.assertEqual(self.c.best_rank(MODEL, tokens), ("sim/pod-0", 0))
        a = self.c.query(MODEL, tokens, top_k=1)
        self.assertEqual([(w.pod, w.dp_rank, w.matched_blocks)
                          for w in a.workers], [("sim/pod-0", 0, 8)])
        # the prompt's first four blocks: pod 1 holds them as well, and
        # ties go to the lower instance id
        a = self.c.query(MODEL, tokens[:4 * BS])
        low = min(w.instance_id for w in a.workers)
        self.assertEqual(self.c.best_rank(MODEL, tokens[:4 * BS]),
                         (a.best.pod, 0))
        self.assertEqual(a.best.instance_id, low)

    def test_routed_makes_blocks_pending(self):
        tokens = prompt(6)
        r = self.c.routed(MODEL, tokens, pod="sim/pod-1", dp_rank=1,
                          ttl_ms=30000)
        self.assertEqual(r.listener, "sim/pod-1#1")
        self.assertEqual((r.matched_blocks, r.pending_blocks), (0, 6))
        a = self.c.query(MODEL, tokens)
        self.assertEqual(len(a.workers), 1)
        w = a.workers[0]
        self.assertEqual((w.pod, w.dp_rank), ("sim/pod-1", 1))
        self.assertEqual((w.matched_blocks, w.pending_blocks,
                          w.pending_tokens), (0, 6, 96))
        self.assertEqual(self.c.best_rank(MODEL, tokens), ("sim/pod-1", 1))
        self.assertEqual(a.scores, {})  # exact entries only
        self.assertEqual(self.c.query(MODEL, tokens, pending=False).workers,
                         [])
        # by instance id, on another rank: that one is pending too
        r = self.c.routed(MODEL, tokens, instance_id=w.instance_id,
                          dp_rank=0, ttl_ms=30000)
        self.assertEqual(r.listener, "sim/pod-1#0")
        a = self.c.query(MODEL, tokens)
        self.assertEqual(sorted((x.dp_rank, x.pending_blocks)
                                for x in a.workers), [(0, 6), (1, 6)])
        with self.assertRaises(ValueError):
            self.c.routed(MODEL, tokens)

    def test_query_by_hash_agrees_with_query(self):
        tokens = prompt(7, extra=3)
        ans = CLUSTER.prefill(1, 1, tokens)
        hashes = [int(h) for h in ans["local_hashes"]]
        self.assertEqual(len(hashes), 7)
        by_tokens = self.found(tokens, lambda a: a.best is not None)
        by_hash = self.c.query_by_hash(MODEL, hashes)
        self.assertEqual(by_hash.query_blocks, 7)
        self.assertEqual(by_hash.workers, by_tokens.workers)
        self.assertEqual(by_hash.scores, by_tokens.scores)
        self.assertEqual(by_hash.best.pod, "sim/pod-1")
        # a prefix of the hashes: a prefix of the match
        self.assertEqual(
            self.c.query_by_hash(MODEL, hashes[:3]).best.matched_blocks, 3)
        # routed by hash
        other = prompt(4)
        local = [int(h) for h in CLUSTER.prefill(0, 0, other)["local_hashes"]]
        self.found(other, lambda a: a.best is not None)
        r = self.c.routed_by_hash(MODEL, local + hashes, pod="sim/pod-0",
                                  dp_rank=0, ttl_ms=30000)
        self.assertEqual((r.matched_blocks, r.pending_blocks), (4, 7))

    def test_keys_are_sent(self):
        tokens = prompt(6)
        mm = [MMFeature("img-1", 16, 32)]
        CLUSTER.prefill(0, 1, tokens, cache_salt="tenant-7",
                        mm_features=[{"identifier": "img-1", "offset": 16,
                                      "length": 32}])
        self.found(tokens, lambda a: a.best is not None,
                   cache_salt="tenant-7", mm_features=mm)
        self.assertIsNone(self.c.query(MODEL, tokens).best)
        # the salt alone: the first block only (the item is in the next two)
        self.assertEqual(self.c.query(MODEL, tokens, cache_salt="tenant-7")
                         .best.matched_blocks, 1)
        a = self.c.query(MODEL, tokens, cache_salt="tenant-7",
                         mm_features=[("img-1", 16, 32)])
        self.assertEqual(a.best.matched_blocks, 6)

    def test_retry_on_next_replica(self):
        tokens = prompt(2)
        dead = f"http://127.0.0.1:{free_port()}"
        c = Client([dead, CLUSTER.url], timeout=2, retries=1)
        self.assertEqual(c.query(MODEL, tokens).query_blocks, 2)
        # the replica that answered is asked first from then on: no retry
        # needed
        c.retries = 0
        self.assertEqual(c.query(MODEL, tokens).query_blocks, 2)
        with self.assertRaises(Unreachable) as e:
            Client([dead], timeout=2, retries=2).query(MODEL, tokens)
        self.assertEqual(len(e.exception.causes), 3)
        # no retries: the dead one alone is tried
        with self.assertRaises(Unreachable):
            Client([dead, CLUSTER.url], retries=0).query(MODEL, tokens)
        # a 5xx from a replica: the next one answers
        busy = Stub(lambda h: (503, {"Retry-After": "1"},
                               b'{"error": "too many connections; try again"}'))
        try:
            c = Client([busy.url, CLUSTER.url], timeout=2, retries=1)
            self.assertEqual(c.query(MODEL, tokens).query_blocks, 2)
            self.assertEqual(len(busy.server.seen), 1)
            # every replica 5xx: the last answer is the error
            with self.assertRaises(KvindexError) as e:
                Client([busy.url], retries=1).query(MODEL, tokens)
            self.assertEqual(e.exception.status, 503)
            self.assertEqual(e.exception.message,
                             "too many connections; try again")
        finally:
            busy.close()

    def test_timeout(self):
        silent = Silent()
        try:
            c = Client([silent.url], timeout=0.5, retries=0)
            t0 = time.monotonic()
            with self.assertRaises(Unreachable) as e:
                c.query(MODEL, prompt(2))
            took = time.monotonic() - t0
            self.assertGreaterEqual(took, 0.45)
            self.assertLess(took, 2.0)
            self.assertIsInstance(e.exception.causes[0][1], TimeoutError)
            # timed out on one replica, answered by the next
            c = Client([silent.url, CLUSTER.url], timeout=0.5, retries=1)
            t0 = time.monotonic()
            self.assertIsNotNone(c.query(MODEL, prompt(2)))
            self.assertLess(time.monotonic() - t0, 3.0)
        finally:
            silent.close()

    def test_error_statuses(self):
        with self.assertRaises(KvindexError) as e:
            self.c.query("no-such-model", [1, 2, 3])
        self.assertEqual(e.exception.status, 404)
        self.assertEqual(e.exception.message,
                         "model no-such-model is not served by any "
                         "registered pod")
        with self.assertRaises(KvindexError) as e:
            self.c.query(MODEL, [1, 2, 3], top_k=0)
        self.assertEqual((e.exception.status, e.exception.message),
                         (400, "top_k 0 is not in 1..1048576"))
        with self.assertRaises(KvindexError) as e:
            self.c.query(MODEL, [1, 2, 3], instances=[12345])
        self.assertEqual(e.exception.status, 400)
        self.assertIn("instance 12345 is not registered", e.exception.message)
        with self.assertRaises(KvindexError) as e:
            self.c.routed(MODEL, [1] * 32, pod="sim/pod-9")
        self.assertEqual(e.exception.status, 404)
        with self.assertRaises(KvindexError) as e:
            self.c.query_by_hash(MODEL, [2 ** 64])
        self.assertEqual(e.exception.status, 400)
        self.assertIn("is not a u64", e.exception.message)
        # a 4xx is the answer: not retried on another replica
        stub = Stub(lambda h: (200, {}, b"{}"))
        try:
            c = Client([CLUSTER.url, stub.url], retries=1)
            with self.assertRaises(KvindexError):
                c.query("no-such-model", [1])
            self.assertEqual(stub.server.seen, [])
        finally:
            stub.close()

    def test_workers_paging(self):
        every = self.c.workers(page_size=100000)
        paged = self.c.workers(page_size=1)
        self.assertGreaterEqual(len(every), PODS)
        self.assertEqual([i.instance_id for i in paged],
                         sorted(i.instance_id for i in every))
        raw = http_json("GET", CLUSTER.url + "/workers")
        self.assertEqual(sorted(i.instance_id for i in paged),
                         sorted(int(w["instance_id"]) for w in raw))
        sim = [i for i in paged if i.model_name == MODEL and
               i.name in ("sim/pod-0", "sim/pod-1")]
        self.assertEqual(len(sim), PODS)
        for i in sim:
            self.assertEqual(i.source, "file")
            self.assertEqual(sorted(i.listeners), [0, 1])
            self.assertEqual(i.listeners[1]["status"], "active")
        one = self.c.workers(name="sim/pod-1")
        self.assertEqual([i.name for i in one], ["sim/pod-1"])
        self.assertEqual(self.c.workers(model="nope"), [])

    def test_register_follows_redirect(self):
        # a follower: every write is sent to the leader with a 307
        def follower(h):
            loc = CLUSTER.url + h.path
            return 307, {"Location": loc, "Content-Type": "application/json"},\
                json.dumps({"leader": "coord-a", "location": loc}).encode()
        f = Stub(follower)
        try:
            c = Client([f.url], timeout=5, token="tok")
            name = "test/pod-redirected"
            reg = c.register_pod(name, "127.0.0.1", free_port(), MODEL, BS,
                                 dp_size=2)
            self.assertEqual(reg.http_status, 201)
            self.assertEqual((reg.name, reg.status, reg.existed),
                             (name, "registered", False))
            self.assertEqual(sorted(reg.listeners),
                             [f"{name}#0", f"{name}#1"])
            self.assertIsInstance(reg.instance_id, int)
            self.assertEqual(f.server.seen[-1][:3],
                             ("POST", "/register", "Bearer tok"))
            got = self.c.workers(name=name)
            self.assertEqual([(i.instance_id, i.source) for i in got],
                             [(reg.instance_id, "http")])
            # queries are answered by followers: a 307 there is an error
            with self.assertRaises(KvindexError) as e:
                c.query(MODEL, [1])
            self.assertEqual(e.exception.status, 307)
            self.assertEqual(sorted(c.unregister(name=name)),
                             [f"{name}#0", f"{name}#1"])
            self.assertEqual(self.c.workers(name=name), [])
            # one rank by id
            reg = self.c.register_rank(4242, f"tcp://127.0.0.1:{free_port()}",
                                       MODEL, BS, dp_rank=3)
            self.assertEqual((reg.instance_id, reg.listeners),
                             (4242, ["4242#3"]))
            self.assertEqual(self.c.unregister(instance_id=4242, model=MODEL),
                             ["4242#3"])
        finally:
            f.close()

    def test_router_loop_example(self):
        # examples/router_loop.py runs against the cluster
        example = os.path.join(PKG, "examples", "router_loop.py")
        r = subprocess.run(
            [sys.executable, example, "--coordinator", CLUSTER.url,
             "--control", CLUSTER.control, "--requests", "12",
             "--seed", "7"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cache", r.stdout)
        self.assertIn("least-loaded", r.stdout)



# canned answers of a stub coordinator, for the tests of what is sent
STUB_ANSWER = {"model_name": "m", "block_size": BS, "query_blocks": 0,
               "workers": [], "scores": {}}
STUB_ROUTED = {"listener": "sim/pod-1#1", "matched_blocks": 0,
               "pending_blocks": 0, "predicted_blocks": 0}


def stub_answers(h):
    body = STUB_ROUTED if h.path.startswith("/routed") else STUB_ANSWER
    return 200, {"Content-Type": "application/json"}, \
        json.dumps(body).encode()


class PackedTest(unittest.TestCase):
    """Client(packed=True): the compact request form
    (docs/api.md#compact-request-bodies)."""

    def setUp(self):
        self.stub = Stub(stub_answers)
        self.sent = self.stub.server.seen
        self.c = Client(self.stub.url, timeout=5, packed=True)
        self.real = Client(CLUSTER.url, timeout=5)
        self.packed = Client(CLUSTER.url, timeout=5, packed=True)

    def tearDown(self):
        self.stub.close()

    def last(self):
        """(path with its query string, body, Content-Type) of the last
        request the stub saw."""
        method, path, _, body, ctype = self.sent[-1]
        self.assertEqual(method, "POST")
        return path, body, ctype

    def test_query_bytes_and_parameters(self):
        tokens = [0, 1, 0x01020304, 2 ** 31, 2 ** 32 - 1]
        a = self.c.query("org/my model", tokens, top_k=3, dp_rank=1,
                         instances=[7, 2 ** 64 - 1], lora_name="ad apter",
                         cache_salt="a+b&c=d%", pending=False)
        self.assertEqual(a, Answer.from_json(STUB_ANSWER))
        path, body, ctype = self.last()
        self.assertEqual(ctype, "application/octet-stream")
        self.assertEqual(
            path, "/query?model_name=org%2Fmy%20model&lora_name=ad%20apter"
                  "&cache_salt=a%2Bb%26c%3Dd%25&top_k=3&dp_rank=1"
                  "&instances=7,18446744073709551615&pending=false")
        self.assertEqual(body, bytes([0, 0, 0, 0,
                                      1, 0, 0, 0,
                                      4, 3, 2, 1,
                                      0, 0, 0, 0x80,
                                      0xff, 0xff, 0xff, 0xff]))
        self.assertEqual(body, struct.pack("<5I", *tokens))
        # the defaults send no parameter but the model; pending=True is
        # the default, an empty instances list restricts nothing
        self.c.query("m", range(3), pending=True, instances=[])
        self.assertEqual(self.last(), ("/query?model_name=m",
                                       struct.pack("<3I", 0, 1, 2),
                                       "application/octet-stream"))
        # an empty prompt is an empty body; best_rank sends a query
        self.assertIsNone(self.c.best_rank("m", [], top_k=1))
        self.assertEqual(self.last()[:2], ("/query?model_name=m&top_k=1",
                                           b""))
        # tokens from an array or an iterator
        from array import array
        self.c.query("m", array("L", [5, 2 ** 32 - 2]))
        self.assertEqual(self.last()[1], struct.pack("<2I", 5, 2 ** 32 - 2))
        self.c.query("m", iter([9]))
        self.assertEqual(self.last()[1], struct.pack("<I", 9))

    def test_hash_bytes_and_routed_parameters(self):
        hashes = [1, 0x0102030405060708, 2 ** 63, 2 ** 64 - 1]
        want = struct.pack("<4Q", *hashes)
        self.assertEqual(want[8:24], bytes([8, 7, 6, 5, 4, 3, 2, 1,
                                            0, 0, 0, 0, 0, 0, 0, 0x80]))
        self.c.query_by_hash("m", hashes, top_k=2, dp_rank=0,
                             instances=[3], pending=False)
        self.assertEqual(self.last(), (
            "/query_by_hash?model_name=m&top_k=2&dp_rank=0&instances=3"
            "&pending=false", want, "application/octet-stream"))
        r = self.c.routed("m", [2 ** 31 + 5], pod="sim/pod-1", dp_rank=1,
                          ttl_ms=500, cache_salt="t 1")
        self.assertEqual(r.listener, "sim/pod-1#1")
        self.assertEqual(self.last(), (
            "/routed?model_name=m&cache_salt=t%201&pod=sim%2Fpod-1"
            "&dp_rank=1&ttl_ms=500", struct.pack("<I", 2 ** 31 + 5),
            "application/octet-stream"))
        self.c.routed_by_hash("m", iter(hashes), instance_id=2 ** 64 - 1)
        self.assertEqual(self.last(), (
            "/routed?model_name=m&instance_id=18446744073709551615"
            "&dp_rank=0&prompt=block_hashes", want,
            "application/octet-stream"))

    def test_little_endian_whatever_the_host(self):
        vals = [0x01020304, 2 ** 31]
        self.assertEqual(client_module._pack(vals, "token_ids"),
                         b"\x04\x03\x02\x01\x00\x00\x00\x80")
        # a packer told the host has the other byte order gets the bytes
        # big-endian: it is the host's order that it turns round
        other = "little" if sys.byteorder == "big" else "big"
        with mock.patch.object(client_module, "sys",
                               types.SimpleNamespace(byteorder=other)):
            self.assertEqual(client_module._pack(vals, "token_ids"),
                             struct.pack(">2I", *vals))
            self.assertEqual(client_module._pack([2 ** 63], "block_hashes"),
                             struct.pack(">Q", 2 ** 63))

    def test_values_checked_before_sending(self):
        bad = [
            (lambda: self.c.query("m", [1, 2 ** 32]),
             "token_ids[1]: 4294967296 is not a u32"),
            (lambda: self.c.query("m", [-1]), "token_ids[0]: -1 is not a u32"),
            (lambda: self.c.query("m", iter([3, 1.5])),
             "token_ids[1]: 1.5 is not an integer"),
            (lambda: self.c.query("m", ["7"]),
             "token_ids[0]: '7' is not an integer"),
            (lambda: self.c.routed("m", [2 ** 40], pod="p"),
             "token_ids[0]: 1099511627776 is not a u32"),
            (lambda: self.c.query_by_hash("m", [0, 2 ** 64]),
             "block_hashes[1]: 18446744073709551616 is not a u64"),
            (lambda: self.c.routed_by_hash("m", iter([-2]), pod="p"),
             "block_hashes[0]: -2 is not a u64"),
            (lambda: self.c.query("m", [1], top_k=2.5),
             "top_k must be an integer, got 2.5"),
        ]
        for call, msg in bad:
            with self.subTest(msg=msg):
                with self.assertRaises(ValueError) as e:
                    call()
                self.assertEqual(str(e.exception), msg)
        self.assertEqual(self.sent, [])

    def test_mm_features_sent_as_json(self):
        mm = [MMFeature("img-1", 0, 16)]
        self.c.query("m", [1] * 16, mm_features=mm, top_k=2, pending=False)
        path, body, ctype = self.last()
        self.assertEqual((path, ctype), ("/query", "application/json"))
        self.assertEqual(json.loads(body), {
            "model_name": "m", "token_ids": [1] * 16, "top_k": 2,
            "pending": False, "mm_features": [
                {"identifier": "img-1", "offset": 0, "length": 16}]})
        self.c.routed("m", [2] * 16, pod="p", mm_features=[("i", 0, 1)])
        path, body, ctype = self.last()
        self.assertEqual((path, ctype), ("/routed", "application/json"))
        self.assertEqual(json.loads(body)["mm_features"],
                         [{"identifier": "i", "offset": 0, "length": 1}])
        # no item: nothing the compact form cannot say
        self.c.query("m", [1], mm_features=[])
        self.assertEqual(self.last(), ("/query?model_name=m",
                                       struct.pack("<I", 1),
                                       "application/octet-stream"))

    def test_same_answers_as_json(self):
        tokens = prompt(9, extra=7)
        tokens[3] = 2 ** 32 - 1  # a token id past i32 in the first block
        hashes = [int(h) for h in
                  CLUSTER.prefill(1, 0, tokens, cache_salt="s 1")
                  ["local_hashes"]]
        CLUSTER.prefill(0, 1, tokens[:5 * BS], cache_salt="s 1")
        wait("the index to show the prefills",
             lambda: len(self.real.query(MODEL, tokens,
                                         cache_salt="s 1").workers) == 2)
        a = self.real.query(MODEL, tokens, cache_salt="s 1")
        inst = {w.pod: w.instance_id for w in a.workers}
        cases = [
            {}, {"top_k": 1}, {"pending": False},
            {"instances": [inst["sim/pod-0"]], "dp_rank": 1},
            {"instances": list(inst.values()), "top_k": 2},
        ]
        for args in cases:
            with self.subTest(args=args):
                j = self.real.query(MODEL, tokens, cache_salt="s 1", **args)
                p = self.packed.query(MODEL, tokens, cache_salt="s 1",
                                      **args)
                self.assertEqual(p, j)
                self.assertEqual(
                    self.packed.query_by_hash(MODEL, hashes, **args),
                    self.real.query_by_hash(MODEL, hashes, **args))
        self.assertEqual(a.best.pod, "sim/pod-1")
        self.assertEqual(a.best.matched_blocks, 9)
        self.assertEqual(
            self.packed.best_rank(MODEL, tokens, cache_salt="s 1"),
            ("sim/pod-1", 0))
        # without the salt: another prompt, nothing held
        self.assertEqual(self.packed.query(MODEL, tokens).workers, [])
        # an empty prompt
        self.assertEqual(self.packed.query(MODEL, []),
                         self.real.query(MODEL, []))

    def test_routed(self):
        tokens = prompt(6)
        r = self.packed.routed(MODEL, tokens, pod="sim/pod-1", dp_rank=1,
                               ttl_ms=30000)
        self.assertEqual((r.listener, r.matched_blocks, r.pending_blocks),
                         ("sim/pod-1#1", 0, 6))
        a = self.packed.query(MODEL, tokens)
        self.assertEqual(a, self.real.query(MODEL, tokens))
        self.assertEqual([(w.pod, w.dp_rank, w.pending_blocks)
                          for w in a.workers], [("sim/pod-1", 1, 6)])
        self.assertEqual(self.packed.query(MODEL, tokens,
                                           pending=False).workers, [])
        # by hash and by instance id, on another pod
        other = prompt(4)
        local = [int(h) for h in CLUSTER.prefill(0, 0, other)["local_hashes"]]
        w0 = wait("the index to show the prefill",
                  lambda: self.real.query(MODEL, other).best)
        r = self.packed.routed_by_hash(MODEL, local + [2 ** 63 + 1],
                                       instance_id=w0.instance_id,
                                       dp_rank=0, ttl_ms=30000)
        self.assertEqual((r.listener, r.matched_blocks, r.pending_blocks),
                         ("sim/pod-0#0", 4, 1))

    def test_errors_as_json(self):
        # the model's name percent-encoded, read back whole
        for c in (self.real, self.packed):
            with self.subTest(packed=c.packed):
                with self.assertRaises(KvindexError) as e:
                    c.query("no such/model+1", [1, 2, 3])
                self.assertEqual((e.exception.status, e.exception.message),
                                 (404, "model no such/model+1 is not served "
                                       "by any registered pod"))
                with self.assertRaises(KvindexError) as e:
                    c.query(MODEL, [1, 2, 3], top_k=0)
                self.assertEqual((e.exception.status, e.exception.message),
                                 (400, "top_k 0 is not in 1..1048576"))
                with self.assertRaises(KvindexError) as e:
                    c.routed(MODEL, [1] * 32, pod="sim/pod-9")
                self.assertEqual(e.exception.status, 404)

    def test_retry_and_redirect(self):
        tokens = prompt(3)
        want = struct.pack(f"<{len(tokens)}I", *tokens)
        busy = Stub(lambda h: (503, {}, b'{"error": "busy"}'))
        dead = f"http://127.0.0.1:{free_port()}"
        try:
            c = Client([dead, busy.url, CLUSTER.url], timeout=2, retries=2,
                       packed=True)
            self.assertEqual(c.query(MODEL, tokens, top_k=2),
                             self.real.query(MODEL, tokens, top_k=2))
            # the replica that gave up got the same request
            self.assertEqual(busy.server.seen, [
                ("POST", "/query?model_name=sim-model&top_k=2", None, want,
                 "application/octet-stream")])
            with self.assertRaises(KvindexError) as e:
                Client([busy.url], retries=1, packed=True).query_by_hash(
                    MODEL, [1])
            self.assertEqual((e.exception.status, e.exception.message),
                             (503, "busy"))
            self.assertEqual([x[3] for x in busy.server.seen[1:]],
                             [struct.pack("<Q", 1)] * 2)
        finally:
            busy.close()

        # a follower answers queries itself: a 307 is an error, as for JSON
        def follower(h):
            loc = CLUSTER.url + h.path
            return 307, {"Location": loc}, json.dumps(
                {"leader": "coord-a", "location": loc}).encode()
        f = Stub(follower)
        try:
            with self.assertRaises(KvindexError) as e:
                Client(f.url, packed=True).routed(MODEL, tokens, pod="p")
            self.assertEqual(e.exception.status, 307)
            self.assertEqual(len(f.server.seen), 1)
        finally:
            f.close()

    def test_router_loop_example(self):
        example = os.path.join(PKG, "examples", "router_loop.py")
        r = subprocess.run(
            [sys.executable, example, "--coordinator", CLUSTER.url,
             "--control", CLUSTER.control, "--requests", "12",
             "--seed", "8", "--packed"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cache", r.stdout)
        self.assertNotIn("not recorded", r.stderr)

if __name__ == "__main__":
    # SIGTERM stops the tests as Ctrl-C does: the cluster is stopped and
    # its directory removed
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    unittest.main()
