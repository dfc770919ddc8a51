"""What the Python client's tests share: a real cluster - the simulator (two DP=2 pods,
its layout file as the coordinator's --discovery-file), two shards and a
coordinator, as deploy/local-cluster.sh runs them, on loopback and in a
temporary directory.

The binaries come from KVI_SIM_BIN, KVI_SHARD_BIN and KVI_COORD_BIN (ctest
sets them: clients/CMakeLists.txt), else from the build tree KVI_BIN_DIR
(default: build/ at the repository's root). Without them the tests fail
and say so. KVI_KEEP_TMP=1 keeps the directory (logs, data) for a look
afterwards.

The cluster is started once, by the first test module that needs it
(start), and stopped when the tests' process ends.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)


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


def start():
    """Starts the cluster, once (a module's setUpModule); it is stopped
    when the process ends."""
    global CLUSTER
    if CLUSTER is not None:
        if CLUSTER.failed:
            raise unittest.SkipTest("the cluster did not start")
        return
    CLUSTER = Cluster()
    atexit.register(CLUSTER.stop)
    try:
        CLUSTER.start()
    except BaseException:
        CLUSTER.failed = True
        CLUSTER.stop()
        raise


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


def run_router_loop(*extra):
    """Runs examples/router_loop.py against the cluster for 12 requests,
    with extra arguments; returns the finished process."""
    example = os.path.join(PKG, "examples", "router_loop.py")
    return subprocess.run(
        [sys.executable, example, "--coordinator", CLUSTER.url,
         "--control", CLUSTER.control, "--requests", "12", *extra],
        capture_output=True, text=True, timeout=60)
