"""`nvindex serve` processes for the client tests (pymemcache_test.py, twemproxy_test.py).

Stdlib only. A Server runs on 127.0.0.1 (HOST) at a free port, or at a port
given (a restart on the same address), over a pool file; its stdout and
stderr go to temp files. Every wait is bounded in time; close() kills what
is left, so a test registers it as a cleanup, as it does remove_file for
the pool.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HOST = "127.0.0.1"
START_TIMEOUT = 10.0        # seconds for a server to accept connections
STOP_TIMEOUT = 10.0         # seconds for it to exit after a signal
PORT_ATTEMPTS = 5           # ports tried when the one picked is taken meanwhile


def nvindex_binary_from_argv():
    """The nvindex binary a client test runs: its first argument when that is
    not an option (taken out of sys.argv, so unittest sees the rest), else
    $NVINDEX_BIN; None, after a usage line on stderr, when neither names an
    executable."""
    path = os.environ.get("NVINDEX_BIN", "")
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        path = sys.argv.pop(1)
    if not path or not os.access(path, os.X_OK):
        print(f"usage: {sys.argv[0]} NVINDEX_BIN [unittest options] "
              f"(or $NVINDEX_BIN); no binary at {path!r}", file=sys.stderr)
        return None
    return path


def run_unittest():
    """Runs the test module's cases (verbose) with the rest of sys.argv as
    unittest's options; the exit code, 0 when every one passed."""
    result = unittest.main(argv=sys.argv, exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


def free_port():
    """A port that was free a moment ago (bound to 0, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def new_pool_path(prefix, tag):
    """A fresh pool path in /dev/shm: prefix, this pid, a random part, tag."""
    return f"/dev/shm/{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}-{tag}.pool"


def remove_file(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class Server:
    """`nvindex serve --index INDEX` on HOST; stdout and stderr in temp files
    (written through their own descriptors, read through others while it runs).
    `pool` None: a volatile index, no --pool."""

    def __init__(self, nvindex, index, pool, args=(), prefix="nvindex-serve"):
        self.nvindex, self.index, self.pool = nvindex, index, pool
        self.args = list(args)
        self.proc = None
        self.port = 0
        self.dir = tempfile.TemporaryDirectory(prefix=prefix + "-")
        self.out_path = os.path.join(self.dir.name, "stdout")
        self.err_path = os.path.join(self.dir.name, "stderr")

    def start(self, port=None):
        """Starts it and waits until it accepts connections; AssertionError if not.
        At `port` when given (a taken port is tried again, 0.2 s apart), else at a
        free port (another one when it is taken meanwhile)."""
        assert self.proc is None
        fresh = self.pool is not None and not os.path.exists(self.pool)
        for _ in range(PORT_ATTEMPTS):
            if fresh:
                remove_file(self.pool)  # made by an attempt that found its port taken
            self.port = port or free_port()
            args = [self.nvindex, "serve", "--index", self.index, "--listen", HOST,
                    "--port", str(self.port), "--threads", "2"] + self.args
            if self.pool is not None:
                args += ["--pool", self.pool, "--pool-size", "64M"]
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=err)
            if self._wait_accepting():
                return self
            rc = self.proc.wait()
            self.proc = None
            if "Address already in use" not in self.stderr():
                raise AssertionError(f"nvindex serve --index {self.index} exited {rc} "
                                     f"before accepting connections; stderr:\n{self.stderr()}")
            if port:
                time.sleep(0.2)
        raise AssertionError(f"nvindex serve: port {port or 'free'} taken in {PORT_ATTEMPTS} "
                             f"attempts; stderr:\n{self.stderr()}")

    def _wait_accepting(self):
        """True once it says it listens on the port and a connection is accepted
        (not by another listener there), False if it exited."""
        listening = f"listening on {HOST}:{self.port},"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if listening in self.stdout():
                try:
                    socket.create_connection((HOST, self.port), timeout=0.5).close()
                    return True
                except OSError:
                    pass
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"nvindex serve --index {self.index} did not accept connections "
                             f"on {HOST}:{self.port} within {START_TIMEOUT:.0f} s; "
                             f"stderr:\n{self.stderr()}")

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, sig=signal.SIGTERM):
        """Sends `sig`, waits (bounded) and returns the exit status (-N: killed by N)."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"nvindex serve did not exit within {STOP_TIMEOUT:.0f} s "
                                 f"of signal {sig}; stderr:\n{self.stderr()}")
        finally:
            self.proc = None
        return rc

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stdout(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self):
        self.kill()
        self.dir.cleanup()


def check_clean_stop(server):
    """Stops `server` by SIGTERM: exit 0 and its 'closed cleanly' line, else AssertionError."""
    rc = server.stop(signal.SIGTERM)
    if rc != 0:
        raise AssertionError(f"nvindex serve exited {rc} on SIGTERM; "
                             f"stderr:\n{server.stderr()}")
    if "closed cleanly" not in server.stdout():
        raise AssertionError(f"no 'closed cleanly' line; stdout:\n{server.stdout()}")
