#!/usr/bin/env python3
"""The Python client against a real cluster: the simulator (two DP=2 pods,
its layout file as the coordinator's --discovery-file), two shards and a
coordinator, as deploy/local-cluster.sh runs them, on loopback and in a
temporary directory (support.py). The compact form's tests are in
test_client_packed.py, run from here against the same cluster.

The binaries come from KVI_SIM_BIN, KVI_SHARD_BIN and KVI_COORD_BIN (ctest
sets them: clients/CMakeLists.txt), else from the build tree KVI_BIN_DIR
(default: build/ at the repository's root). Without them the tests fail
and say so. KVI_KEEP_TMP=1 keeps the directory (logs, data) for a look
afterwards.

    python3 clients/python/tests/test_client.py [-v] [Test.name]
"""
import json
import signal
import time
import unittest

import support
from support import (BS, MODEL, PODS, Silent, Stub, free_port,  # noqa: F401
                     http_json, prompt, wait)
from kvindex_client import (Answer, Client, KvindexError, MMFeature,  # noqa: E402
                            Unreachable)
from test_client_packed import PackedTest  # noqa: E402,F401


def setUpModule():
    support.start()


class ClientTest(unittest.TestCase):

    def setUp(self):
        self.c = Client(support.CLUSTER.url, timeout=5)

    def found(self, tokens, check, **query_args):
        """Queries until `check(answer)` holds: the simulator's events
        reach the index a moment after /prefill answers."""
        return wait("the index to show the prefill",
                    lambda: (lambda a: a if check(a) else None)(
                        self.c.query(MODEL, tokens, **query_args)))

    def test_query_finds_rank(self):
        tokens = prompt(10, extra=5)
        self.assertIsNone(self.c.query(MODEL, tokens).best)
        support.CLUSTER.prefill(0, 1, tokens)
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
        support.CLUSTER.prefill(1, 0, tokens[:4 * BS])
        support.CLUSTER.prefill(0, 0, tokens)
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
        ans = support.CLUSTER.prefill(1, 1, tokens)
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
        local = [int(h) for h in support.CLUSTER.prefill(0, 0, other)["local_hashes"]]
        self.found(other, lambda a: a.best is not None)
        r = self.c.routed_by_hash(MODEL, local + hashes, pod="sim/pod-0",
                                  dp_rank=0, ttl_ms=30000)
        self.assertEqual((r.matched_blocks, r.pending_blocks), (4, 7))

    def test_keys_are_sent(self):
        tokens = prompt(6)
        mm = [MMFeature("img-1", 16, 32)]
        support.CLUSTER.prefill(0, 1, tokens, cache_salt="tenant-7",
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
        c = Client([dead, support.CLUSTER.url], timeout=2, retries=1)
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
            Client([dead, support.CLUSTER.url], retries=0).query(MODEL, tokens)
        # a 5xx from a replica: the next one answers
        busy = Stub(lambda h: (503, {"Retry-After": "1"},
                               b'{"error": "too many connections; try again"}'))
        try:
            c = Client([busy.url, support.CLUSTER.url], timeout=2, retries=1)
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
            c = Client([silent.url, support.CLUSTER.url], timeout=0.5, retries=1)
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
            c = Client([support.CLUSTER.url, stub.url], retries=1)
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
        raw = http_json("GET", support.CLUSTER.url + "/workers")
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
            loc = support.CLUSTER.url + h.path
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
        r = support.run_router_loop("--seed", "7")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cache", r.stdout)
        self.assertIn("least-loaded", r.stdout)


if __name__ == "__main__":
    # SIGTERM stops the tests as Ctrl-C does: the cluster is stopped and
    # its directory removed
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    unittest.main()
