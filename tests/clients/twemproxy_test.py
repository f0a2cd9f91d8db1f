#!/usr/bin/python3
"""Three `nvindex serve` processes behind twemproxy (Debian's nutcracker 0.5.0).

Usage: /usr/bin/python3 tests/clients/twemproxy_test.py [NVINDEX_BIN] [unittest options]
(the binary from the first argument, else $NVINDEX_BIN; nutcracker from
$NUTCRACKER, else /usr/sbin/nutcracker). Runs under Debian's /usr/bin/python3,
which sees python3-pymemcache; exits 77 (ctest's skip) when nutcracker is
missing or that interpreter cannot import pymemcache.

The proxy runs docs/examples/twemproxy.yml (ketama over fnv1a_64, servers
named nv1..nv3, no ejection, a timeout) with its ports replaced by free
ones, checked by `nutcracker -t` first, then run in the foreground with its
log in a temp file (-o, -v 6) and its stats listener on 127.0.0.1 (-s, -a).
Three servers over lbtree, each on a fresh pool in /dev/shm removed at the
end, failed or not, serve both tests (numbered, so that they run in order).
test_1 checks what the proxy does not forward (flush_all, stats, verbosity,
meta commands, gat, rget, delete with a time): it closes the connection and the servers keep
their items. test_2 sets 10,000 keys through the proxy, reads them back
through it and from each server directly: each key is on exactly one server
with its value, and each server holds more than 10% of them; a few hundred
deletes through the proxy are seen on the servers. One server is then
killed with SIGKILL: its keys get an error through the proxy (not a miss,
and a write of one is not stored elsewhere), the others' keys are served;
it is restarted on the same pool and port, reports an unclean last shutdown
and its item count, and every acknowledged key that was not deleted is found
again, directly and (after a bounded reconnect window) through the proxy.
Every loop and wait is bounded in count and time.
"""

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from serve_util import (HOST, PORT_ATTEMPTS, STOP_TIMEOUT, Server, check_clean_stop, free_port,
                        new_pool_path, nvindex_binary_from_argv, remove_file, run_unittest)

SKIP = 77  # ctest's SKIP_RETURN_CODE for this test

NUTCRACKER = os.environ.get("NUTCRACKER") or shutil.which("nutcracker") or "/usr/sbin/nutcracker"
if not os.access(NUTCRACKER, os.X_OK):
    print(f"SKIP: no nutcracker (twemproxy) at {NUTCRACKER}; install Debian's nutcracker "
          "(scripts/install-deps)")
    sys.exit(SKIP)

try:
    import pymemcache
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheServerError
except ImportError as e:
    print(f"SKIP: {sys.executable} cannot import pymemcache ({e}); "
          "install Debian's python3-pymemcache (scripts/install-deps)")
    sys.exit(SKIP)

NVINDEX = None  # the binary, set by main() (serve_util.nvindex_binary_from_argv)
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                       "examples", "twemproxy.yml")
INDEX = "lbtree"
SERVERS = 3
KEYS = 10000                # set through the proxy
DELETE_EVERY = 33           # every 33rd key deleted through the proxy (304 keys)
BATCH = 100                 # keys per get_many
MIN_SHARE = 0.10            # of the keys, on each server (ketama over 3 equal servers)
REPLY_TIMEOUT = 10.0        # seconds for any one reply (client side)
PROXY_START_TIMEOUT = 10.0  # seconds for nutcracker to answer
RECONNECT_WINDOW = 10.0     # seconds for the proxy to serve a restarted server's keys
RETRY_PAUSE = 0.1           # seconds between those tries
NOT_FORWARDED = [b"flush_all", b"flush_all 0", b"stats", b"stats settings", b"verbosity 1",
                 b"mn", b"mg %s v", b"ms %s 1", b"md %s", b"gat 0 %s", b"gats 0 %s",
                 b"rget a z 0 0 10", b"delete %s 0"]  # delete: only <key> [noreply]


def proxy_config(text, listen_port, server_ports):
    """The example's text with its listen port and its servers' ports replaced;
    AssertionError when it lacks what docs/kv.md says it has."""
    for setting in (r"hash: fnv1a_64", r"distribution: ketama", r"auto_eject_hosts: false",
                    r"timeout: [1-9][0-9]*"):
        if not re.search(rf"^\s+{setting}\s*$", text, re.M):
            raise AssertionError(f"{EXAMPLE}: no '{setting}' line")
    text, n = re.subn(r"^(\s+listen: 127\.0\.0\.1:)\d+\s*$", rf"\g<1>{listen_port}", text,
                      flags=re.M)
    if n != 1:
        raise AssertionError(f"{EXAMPLE}: {n} 'listen: 127.0.0.1:PORT' lines, not 1")
    ports = iter(server_ports)
    text, n = re.subn(r"^(\s*- 127\.0\.0\.1:)\d+(:1 nv\d)\s*$",
                      lambda m: f"{m.group(1)}{next(ports)}{m.group(2)}", text, flags=re.M)
    if n != len(server_ports):
        raise AssertionError(f"{EXAMPLE}: {n} '- 127.0.0.1:PORT:1 nvN' server lines, "
                             f"not {len(server_ports)}")
    return text


class Proxy:
    """nutcracker in the foreground on HOST: a listen port and a stats port, both
    free; its config, log (-o) and stdout/stderr in a temp directory."""

    def __init__(self, server_ports):
        with open(EXAMPLE) as f:
            self.example = f.read()
        self.server_ports = server_ports
        self.proc = None
        self.port = self.stats_port = 0
        self.dir = tempfile.TemporaryDirectory(prefix="nvindex-twemproxy-")
        self.conf = os.path.join(self.dir.name, "nutcracker.yml")
        self.log_path = os.path.join(self.dir.name, "nutcracker.log")
        self.out_path = os.path.join(self.dir.name, "stdout")

    def start(self):
        assert self.proc is None
        for _ in range(PORT_ATTEMPTS):
            self.port, self.stats_port = free_port(), free_port()
            if self.port == self.stats_port:
                continue
            with open(self.conf, "w") as f:
                f.write(proxy_config(self.example, self.port, self.server_ports))
            test = subprocess.run([NUTCRACKER, "-c", self.conf, "-t"], capture_output=True,
                                  text=True, timeout=10)
            said = test.stdout + test.stderr
            if test.returncode != 0 or "syntax is ok" not in said:
                raise AssertionError(f"nutcracker -t exited {test.returncode}: {said}")
            remove_file(self.log_path)
            # -v 6, LOG_INFO, as twemproxy's notes advise; Debian's build has no debug
            # logging, so it logs the same at every level: its start, a server's EOF
            # ("s N active 0 is done"), the signal that stops it.
            with open(self.out_path, "wb") as out:
                self.proc = subprocess.Popen(
                    [NUTCRACKER, "-c", self.conf, "-o", self.log_path, "-v", "6",
                     "-s", str(self.stats_port), "-a", HOST],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            if self._wait_answering():
                return self
            rc = self.proc.wait()
            self.proc = None
            if "Address already in use" not in self.log():
                raise AssertionError(f"nutcracker exited {rc} before answering:\n{self.log()}")
        raise AssertionError(f"nutcracker: no free ports in {PORT_ATTEMPTS} attempts:\n"
                             f"{self.log()}")

    def _wait_answering(self):
        """True once a get through it gets END, False if it exited."""
        deadline = time.monotonic() + PROXY_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((HOST, self.port), timeout=1.0) as s:
                    s.sendall(b"get nvindex:proxy-probe\r\n")
                    if s.recv(64) == b"END\r\n":
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"nutcracker did not answer on {HOST}:{self.port} within "
                             f"{PROXY_START_TIMEOUT:.0f} s:\n{self.log()}")

    def stop(self):
        """SIGINT (nutcracker 0.5.0 logs it and exits 1; it has no SIGTERM handler)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"nutcracker did not exit within {STOP_TIMEOUT:.0f} s "
                                 f"of SIGINT:\n{self.log()}") from None
        finally:
            self.kill()

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def log(self, tail=40):
        text = ""
        for path in (self.out_path, self.log_path):
            try:
                with open(path, "rb") as f:
                    text += f.read().decode(errors="replace")
            except FileNotFoundError:
                pass
        return "\n".join(text.splitlines()[-tail:])

    def close(self):
        self.kill()
        self.dir.cleanup()


def chunks(items, n):
    for i in range(0, len(items), n):
        yield items[i:i + n]


def first(items, n=5):
    items = list(items)
    return f"{items[:n]!r}{' ...' if len(items) > n else ''} ({len(items)})"


def reply_until_close(port, request, timeout=5.0):
    """Sends `request` on a new connection; (bytes received, whether the peer closed)
    within `timeout` seconds."""
    got = b""
    deadline = time.monotonic() + timeout
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(request)
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(4096)
            except socket.timeout:
                break
            except ConnectionResetError:
                return got, True
            if not chunk:
                return got, True
            got += chunk
    return got, False


class BehindTwemproxy(unittest.TestCase):
    """SERVERS servers over INDEX, fresh pools, and nutcracker in front, for the class."""

    @classmethod
    def setUpClass(cls):
        cls.servers = []
        for i in range(SERVERS):
            pool = new_pool_path("nvindex-twemproxy", f"nv{i + 1}")
            cls.addClassCleanup(remove_file, pool)
            server = Server(NVINDEX, INDEX, pool, prefix="nvindex-twemproxy")
            cls.addClassCleanup(server.close)
            cls.servers.append(server.start())
        cls.proxy = Proxy([s.port for s in cls.servers])
        cls.addClassCleanup(cls.proxy.close)
        cls.proxy.start()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        for server in cls.servers:
            if server.proc is not None:  # a failed test may leave one killed
                check_clean_stop(server)

    def client(self, port):
        """A pymemcache Client, noreply off (pymemcache's default is on)."""
        c = Client((HOST, port), default_noreply=False, connect_timeout=5,
                   timeout=REPLY_TIMEOUT)
        self.addCleanup(c.close)
        return c

    def get_all(self, client, keys):
        """get_many over `keys` in batches: {key: value} of those found."""
        got = {}
        for batch in chunks(keys, BATCH):
            got.update(client.get_many(batch))
        return got

    def check_found(self, got, model, where):
        wrong = [k for k in model if got.get(k) != model[k]]
        extra = [k for k in got if k not in model]
        self.assertEqual(wrong, [], f"{where}: keys missing or with another value: "
                                    f"{first(wrong)}")
        self.assertEqual(extra, [], f"{where}: keys that should be absent: {first(extra)}")

    def proxy_error(self, fn):
        """fn(a fresh proxy client) must raise MemcacheServerError; its message."""
        c = self.client(self.proxy.port)
        with self.assertRaises(MemcacheServerError) as e:
            fn(c)
        c.close()
        return e.exception.args[0] if e.exception.args else b""

    def test_2_keys_by_ketama_survive_kill9(self):
        rnd = random.Random(2026)
        proxy = self.client(self.proxy.port)
        keys = [b"twem:%05d" % i for i in range(KEYS)]
        model = {}
        for i, key in enumerate(keys):
            # Any bytes, \r\n among them: the proxy frames a data block by its length.
            value = b"%d:" % i + rnd.randbytes(rnd.randint(0, 200)) + b"\r\nEND\r\n" * (i % 2)
            self.assertIs(proxy.set(key, value), True, key)  # STORED, acknowledged
            model[key] = value
        self.check_found(self.get_all(proxy, keys), model, "through the proxy")

        # Each key on exactly one server, with its value; each a share > MIN_SHARE.
        owner = {}
        for i, server in enumerate(self.servers):
            got = self.get_all(self.client(server.port), keys)
            for k, v in got.items():
                self.assertEqual(v, model[k], f"{k!r} on server nv{i + 1}")
                self.assertNotIn(k, owner, f"{k!r} on nv{owner.get(k, 0) + 1} and nv{i + 1}")
                owner[k] = i
        self.assertEqual([k for k in keys if k not in owner], [], "keys on no server")
        shares = [sum(1 for o in owner.values() if o == i) for i in range(SERVERS)]
        print(f"\n  ketama shares of {KEYS} keys: "
              + ", ".join(f"nv{i + 1} {n}" for i, n in enumerate(shares)), file=sys.stderr)
        for i, n in enumerate(shares):
            self.assertGreater(n, MIN_SHARE * KEYS, f"nv{i + 1} holds {n} of {KEYS}: {shares}")

        # Deletes through the proxy, gone from every server.
        deleted = keys[::DELETE_EVERY]
        for k in deleted:
            self.assertIs(proxy.delete(k), True, k)
            del model[k]
        for i, server in enumerate(self.servers):
            self.assertEqual(self.get_all(self.client(server.port), deleted), {},
                             f"deleted keys still on nv{i + 1}")
        self.assertEqual(self.get_all(proxy, deleted), {}, "deleted keys through the proxy")
        proxy.close()

        # Kill one server.
        v = 1
        victim = self.servers[v]
        port = victim.port
        mine = sorted(k for k in model if owner[k] == v)
        others = sorted(k for k in model if owner[k] != v)
        self.assertEqual(victim.stop(signal.SIGKILL), -signal.SIGKILL)

        # While it is down: an error for its keys (not a miss), a write of one of
        # them refused and not placed elsewhere (no ejection), the others served.
        said = self.proxy_error(lambda c: c.get(mine[0]))
        print(f"  nv{v + 1} down: get through the proxy -> SERVER_ERROR {said.decode()}",
              file=sys.stderr)
        self.proxy_error(lambda c: c.set(mine[0], b"written while down"))
        self.proxy_error(lambda c: c.get_many([mine[1], others[0]]))  # the whole get fails
        c = self.client(self.proxy.port)
        self.assertEqual(c.get(others[0]), model[others[0]])
        self.assertEqual(self.get_all(c, others[:BATCH]), {k: model[k] for k in others[:BATCH]})
        c.close()
        for i, server in enumerate(self.servers):
            if i != v:
                self.assertIsNone(self.client(server.port).get(mine[0]),
                                  f"a write for down nv{v + 1} reached nv{i + 1}")

        # Restart on the same pool and port.
        victim.start(port=port)
        out = victim.stdout()
        m = re.search(r"recovered: last shutdown NOT clean \(crash or kill\), (\d+) items", out)
        self.assertIsNotNone(m, f"no unclean-shutdown line in nv{v + 1}'s start-up:\n{out}")
        self.assertEqual(int(m.group(1)), len(mine), out)
        direct = self.client(victim.port)
        st = direct.stats()
        self.assertEqual(st[b"last_shutdown_clean"], b"no")
        self.assertEqual(st[b"curr_items"], len(mine))
        self.check_found(self.get_all(direct, keys), {k: model[k] for k in mine},
                         f"nv{v + 1} directly after its restart")
        for i, server in enumerate(self.servers):
            if i != v:
                self.check_found(self.get_all(self.client(server.port), keys),
                                 {k: model[k] for k in model if owner[k] == i},
                                 f"nv{i + 1} directly")

        # Through the proxy: a bounded window for it to reach the server again.
        start, tries, last = time.monotonic(), 0, None
        while True:
            tries += 1
            c = Client((HOST, self.proxy.port), default_noreply=False, connect_timeout=5,
                       timeout=REPLY_TIMEOUT)
            try:
                if c.get(mine[0]) == model[mine[0]]:
                    break
                last = "a miss or another value"
            except (MemcacheServerError, OSError) as e:
                last = f"{type(e).__name__}: {e}"
            finally:
                c.close()
            if time.monotonic() - start > RECONNECT_WINDOW or tries >= 200:
                self.fail(f"the proxy did not serve {mine[0]!r} from restarted nv{v + 1} "
                          f"within {RECONNECT_WINDOW:.0f} s ({tries} tries); last: {last}\n"
                          f"nutcracker log:\n{self.proxy.log()}")
            time.sleep(RETRY_PAUSE)
        print(f"  nv{v + 1} restarted: served through the proxy at try {tries}, after "
              f"{time.monotonic() - start:.3f} s", file=sys.stderr)
        proxy = self.client(self.proxy.port)
        self.check_found(self.get_all(proxy, keys), model, "through the proxy after the restart")

    def test_1_not_forwarded(self):
        """What nutcracker 0.5.0 does not parse: it closes the client's connection
        without a reply, sends nothing on, and still serves new connections."""
        c = self.client(self.proxy.port)
        key = b"twem:kept"
        self.assertIs(c.set(key, b"kept"), True)
        for form in NOT_FORWARDED:
            request = (form % key if b"%s" in form else form) + b"\r\n"
            got, closed = reply_until_close(self.proxy.port, request)
            self.assertEqual((got, closed), (b"", True), request)
        self.assertEqual(self.client(self.proxy.port).get(key), b"kept")
        held = [s for s in self.servers if self.client(s.port).get(key) == b"kept"]
        self.assertEqual(len(held), 1, "after flush_all and delete through the proxy")
        for i, server in enumerate(self.servers):
            st = self.client(server.port).stats()
            self.assertEqual((st[b"cmd_flush"], st[b"cmd_meta"]), (0, 0),
                             f"flush_all or a meta command reached nv{i + 1}")
        # version is forwarded, to one server.
        self.assertEqual(reply_until_close(self.proxy.port, b"version\r\n", 1.0),
                         (b"VERSION 1.6.0\r\n", False))
        self.assertIs(c.delete(key), True)  # test_2 counts the items of a server


def main():
    global NVINDEX
    NVINDEX = nvindex_binary_from_argv()
    if NVINDEX is None:
        return 2
    version = subprocess.run([NUTCRACKER, "-V"], capture_output=True, text=True, timeout=10)
    said = (version.stdout + version.stderr).split("\n")[0]
    print(f"{said} at {NUTCRACKER}, pymemcache {pymemcache.__version__} "
          f"(Python {sys.version.split()[0]}), {NVINDEX}, index {INDEX}", flush=True)
    return run_unittest()


if __name__ == "__main__":
    sys.exit(main())
