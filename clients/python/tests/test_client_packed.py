"""Client(packed=True) against a stub that records what it is sent, and
against the real cluster of support.py: run from test_client.py."""
import json
import struct
import sys
import types
import unittest
from unittest import mock

import support
from support import (BS, MODEL, Stub, free_port, prompt,  # noqa: F401
                     wait)
from kvindex_client import Answer, Client, KvindexError, MMFeature  # noqa: E402
from kvindex_client import client as client_module  # noqa: E402


def setUpModule():
    support.start()


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
        self.real = Client(support.CLUSTER.url, timeout=5)
        self.packed = Client(support.CLUSTER.url, timeout=5, packed=True)

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
                  support.CLUSTER.prefill(1, 0, tokens, cache_salt="s 1")
                  ["local_hashes"]]
        support.CLUSTER.prefill(0, 1, tokens[:5 * BS], cache_salt="s 1")
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
        local = [int(h) for h in support.CLUSTER.prefill(0, 0, other)["local_hashes"]]
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
            c = Client([dead, busy.url, support.CLUSTER.url], timeout=2, retries=2,
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
            loc = support.CLUSTER.url + h.path
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
        r = support.run_router_loop("--seed", "8", "--packed")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cache", r.stdout)
        self.assertNotIn("not recorded", r.stderr)
