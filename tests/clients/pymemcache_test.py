#!/usr/bin/python3
"""`nvindex serve` driven by a stock client, pymemcache (Debian's python3-pymemcache).

Usage: /usr/bin/python3 tests/clients/pymemcache_test.py [NVINDEX_BIN] [unittest options]
(the binary from the first argument, else $NVINDEX_BIN). Runs under Debian's
/usr/bin/python3, which sees the python3-* packages; exits 77 (ctest's skip) when
that interpreter cannot import pymemcache.

Each test class runs one index (lbtree, fptree, wbtree, p-masstree; $NVINDEX_PYMC_INDEXES
overrides, comma-separated) on its own server: 127.0.0.1, a free port, a fresh
pool in /dev/shm removed at the end, failed or not, stopped by SIGTERM with exit 0
checked. Through pymemcache's Client: every storage and retrieval command,
cas, delete, incr/decr, touch, flags, expiry, flush_all, stats, version, noreply,
key lengths. Through a plain socket: what pymemcache 3.5 cannot send (gat and
gats, the rget range extension against a sorted model) and the server-side
error replies. A persistence test writes 2,000 keys, kills the server with
SIGKILL and reads them back after a restart on the same pool. Every wait is
bounded in time and count. The servers are serve_util.py's, shared with
twemproxy_test.py.
"""

import os
import random
import signal
import socket
import subprocess
import sys
import time
import unittest

from serve_util import (HOST, Server, check_clean_stop, new_pool_path, nvindex_binary_from_argv,
                        remove_file, run_unittest)

SKIP = 77  # ctest's SKIP_RETURN_CODE for this test

try:
    import pymemcache
    from pymemcache.client.base import Client
    from pymemcache.exceptions import (
        MemcacheClientError,
        MemcacheIllegalInputError,
        MemcacheServerError,
        MemcacheUnknownCommandError,
    )
except ImportError as e:
    print(f"SKIP: {sys.executable} cannot import pymemcache ({e}); "
          "install Debian's python3-pymemcache (scripts/install-deps)")
    sys.exit(SKIP)

NVINDEX = None  # the binary, set by main() (serve_util.nvindex_binary_from_argv)
INDEXES = [i for i in os.environ.get("NVINDEX_PYMC_INDEXES",
                                     "lbtree,fptree,wbtree,p-masstree").split(",") if i]
MAX_ITEM = 1 << 20          # --max-item-size, bytes (memcached's -I default)
VERSION = b"1.6.0"          # what `version` reports (docs/kv.md)
REPLY_TIMEOUT = 10.0        # seconds for any one reply
# Whitespace (pymemcache refuses it in keys, the server splits at spaces) and
# NUL: the bytes a key cannot hold. Every other byte is a key byte.
NOT_KEY_BYTES = b" \t\n\v\f\r\x00"
KEY_BYTES = bytes(b for b in range(256) if b not in NOT_KEY_BYTES)


def sleep_until(wall):
    """Sleeps until time.time() >= wall (at most 10 s, a bound on mistakes).

    The expiry tests count on the server reading the Unix clock (whole seconds)
    at each request, as nvindex serve does: an item given exptime N at second s
    is gone from second s + N on. (memcached ticks a clock of its own once a
    second, so there an item may live up to a second longer.)"""
    delay = wall - time.time()
    assert delay < 10, f"sleep of {delay:.1f} s asked"
    if delay > 0:
        time.sleep(delay)


class Raw:
    """A plain socket to the server, for what pymemcache cannot send."""

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=REPLY_TIMEOUT)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        late = f"no whole reply within {REPLY_TIMEOUT:.0f} s; got {self.buf[:200]!r}"
        if time.monotonic() > deadline:
            raise AssertionError(late)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            raise AssertionError(late) from None
        if not chunk:
            raise AssertionError(f"server closed the connection; got {self.buf[:200]!r}")
        self.buf += chunk

    def line(self):
        deadline = time.monotonic() + REPLY_TIMEOUT
        while b"\r\n" not in self.buf:
            self._fill(deadline)
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def exact(self, n):
        deadline = time.monotonic() + REPLY_TIMEOUT
        while len(self.buf) < n:
            self._fill(deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def nothing_within(self, seconds):
        """True when no reply byte arrives within `seconds`."""
        if self.buf:
            return False
        self.sock.settimeout(seconds)
        try:
            self.buf += self.sock.recv(1 << 16)
        except socket.timeout:
            pass
        finally:
            self.sock.settimeout(REPLY_TIMEOUT)
        return not self.buf

    def ask(self, request):
        """Sends `request` then `version`; the reply lines before VERSION."""
        self.send(request + b"version\r\n")
        lines = []
        for _ in range(100):
            line = self.line()
            if line.startswith(b"VERSION "):
                return lines
            lines.append(line)
        raise AssertionError(f"no VERSION after 100 reply lines: {lines[:5]!r}...")

    def retrieve(self, request):
        """Sends a get-like `request`; [(key, flags, value, cas or None)] up to END."""
        self.send(request)
        items = []
        for _ in range(100000):
            line = self.line()
            if line == b"END":
                return items
            parts = line.split(b" ")
            if parts[0] != b"VALUE" or len(parts) not in (4, 5):
                raise AssertionError(f"{request[:60]!r}: unexpected line {line[:100]!r}")
            value = self.exact(int(parts[3]) + 2)
            if value[-2:] != b"\r\n":
                raise AssertionError(f"data block of {parts[1]!r} not ended by \\r\\n")
            items.append((parts[1], int(parts[2]), value[:-2],
                          int(parts[4]) if len(parts) == 5 else None))
        raise AssertionError("no END after 100,000 items")


class FlagsSerde:
    """Values stay bytes; get hands back (value, flags), so flags can be checked."""

    def serialize(self, key, value):
        return value, 0

    def deserialize(self, key, value, flags):
        return value, flags


def model_range(model, lo, hi, lo_open, hi_open, limit):
    """The items rget must give: model's keys in [lo, hi] (ends open or closed),
    in byte order (shorter first on a tie, as Python compares bytes), at most `limit`."""
    out = []
    for k in sorted(model):
        if k < lo or (lo_open and k == lo):
            continue
        if k > hi or (hi_open and k == hi):
            break
        out.append((k, model[k]))
        if len(out) == limit:
            break
    return out


def rget(raw, lo, hi, lo_open, hi_open, limit):
    items = raw.retrieve(b"rget %s %s %d %d %d\r\n" % (lo, hi, lo_open, hi_open, limit))
    for _, _, _, cas in items:
        assert cas is None, "rget gives no CAS unique"
    return [(k, v) for k, _, v, _ in items]


class ServerCase(unittest.TestCase):
    """One server per test class over INDEX; helpers for clients."""

    INDEX = None

    @classmethod
    def setUpClass(cls):
        cls.server = cls.start_server(cls.INDEX, cls.addClassCleanup)

    @classmethod
    def tearDownClass(cls):
        cls.check_clean_stop(cls.server)

    @staticmethod
    def start_server(index, add_cleanup, pool=True):
        path = new_pool_path("nvindex-pymemcache", index) if pool else None
        if path is not None:
            add_cleanup(remove_file, path)
        server = Server(NVINDEX, index, path, ["--max-item-size", str(MAX_ITEM)],
                        prefix="nvindex-pymemcache")
        add_cleanup(server.close)
        return server.start()

    check_clean_stop = staticmethod(check_clean_stop)

    def client(self, server=None, **kw):
        """A pymemcache Client; noreply off unless asked (pymemcache's default is on)."""
        kw.setdefault("default_noreply", False)
        c = Client((HOST, (server or self.server).port), connect_timeout=5,
                   timeout=REPLY_TIMEOUT, **kw)
        self.addCleanup(c.close)
        return c

    def raw(self, server=None):
        r = Raw((server or self.server).port)
        self.addCleanup(r.close)
        return r

    def key(self, name):
        """A key of this test's own (the class's tests share a server)."""
        return f"{self._testMethodName}:{name}".encode()


class Commands:
    """The tests, run by one TestCase class per index (see the end of the file)."""

    # ---------------------------------------------------------------- set, get

    def test_set_get_values(self):
        c = self.client()
        values = {
            "empty": b"",
            "crlf": b"\r\n",
            "crlf-inside": b"a\r\nb\r\n\r\nc",
            "protocol-like": b"END\r\nVALUE x 0 1\r\ny\r\n",
            "all-bytes": bytes(range(256)) * 3,
        }
        for name, value in values.items():
            self.assertIs(c.set(self.key(name), value), True, name)
        for name, value in values.items():
            self.assertEqual(c.get(self.key(name)), value, name)
        self.assertIs(c.set(self.key("text"), "ascii text"), True)
        self.assertEqual(c.get(self.key("text")), b"ascii text")
        self.assertIs(c.set(self.key("empty"), b"now longer"), True)
        self.assertEqual(c.get(self.key("empty")), b"now longer")
        self.assertIsNone(c.get(self.key("missing")))
        self.assertEqual(c.get(self.key("missing"), default=b"dflt"), b"dflt")

    def test_large_value_up_to_max_item_size(self):
        c = self.client()
        big = random.Random(1).randbytes(MAX_ITEM)
        self.assertIs(c.set(self.key("big"), big), True)
        self.assertEqual(c.get(self.key("big")), big)
        value, cas = c.gets(self.key("big"))
        self.assertEqual(value, big)
        self.assertTrue(cas.isdigit())
        with self.assertRaises(MemcacheServerError) as e:
            c.set(self.key("big"), big + b"!")
        self.assertEqual(e.exception.args[0], b"object too large for cache")
        # A refused set keeps the old item (docs/kv.md: memcached unlinks it).
        self.assertEqual(c.get(self.key("big")), big)
        self.assertEqual(c.get_many([self.key("big"), self.key("missing")]),
                         {self.key("big"): big})

    def test_get_many_gets_many(self):
        c = self.client()
        model = {self.key(f"k{i}"): b"v%d" % i * i for i in range(20)}
        self.assertEqual(c.set_many(model), [])
        asked = list(model) + [self.key("missing1"), self.key("missing2")]
        self.assertEqual(c.get_many(asked), model)
        self.assertEqual(c.get_many([]), {})
        got = c.gets_many(asked)
        self.assertEqual(set(got), set(model))
        self.assertEqual({k: v for k, (v, _) in got.items()}, model)
        tokens = [cas for _, cas in got.values()]
        self.assertEqual(len(set(tokens)), len(tokens), "CAS uniques are unique")
        self.assertEqual(got[self.key("k3")], c.gets(self.key("k3")))

    # ------------------------------------------------- add, replace, append, prepend

    def test_add(self):
        c = self.client()
        self.assertIs(c.add(self.key("a"), b"first"), True)
        self.assertEqual(c.get(self.key("a")), b"first")
        self.assertIs(c.add(self.key("a"), b"second"), False)
        self.assertEqual(c.get(self.key("a")), b"first")
        # add over an expired item stores.
        self.assertIs(c.set(self.key("expired"), b"old", expire=-1), True)
        self.assertIs(c.add(self.key("expired"), b"new"), True)
        self.assertEqual(c.get(self.key("expired")), b"new")

    def test_replace(self):
        c = self.client()
        self.assertIs(c.replace(self.key("r"), b"x"), False)
        self.assertIsNone(c.get(self.key("r")))
        c.set(self.key("r"), b"old")
        self.assertIs(c.replace(self.key("r"), b"new"), True)
        self.assertEqual(c.get(self.key("r")), b"new")
        c.set(self.key("expired"), b"old", expire=-1)
        self.assertIs(c.replace(self.key("expired"), b"new"), False)
        self.assertIsNone(c.get(self.key("expired")))

    def test_append_prepend(self):
        c = self.client(serde=FlagsSerde())
        self.assertIs(c.append(self.key("missing"), b"x"), False)
        self.assertIs(c.prepend(self.key("missing"), b"x"), False)
        self.assertIsNone(c.get(self.key("missing")))
        self.assertIs(c.set(self.key("k"), b"mid", flags=7), True)
        self.assertIs(c.append(self.key("k"), b"\r\nend", flags=9), True)
        self.assertIs(c.prepend(self.key("k"), b"start\r\n", flags=9), True)
        # The flags (and expiry) of the item are kept; the command's are ignored.
        self.assertEqual(c.get(self.key("k")), (b"start\r\nmid\r\nend", 7))
        self.assertIs(c.append(self.key("k"), b""), True)
        self.assertEqual(c.get(self.key("k")), (b"start\r\nmid\r\nend", 7))

    # ------------------------------------------------------------- cas, delete

    def test_cas(self):
        c = self.client()
        c.set(self.key("c"), b"v1")
        value, token = c.gets(self.key("c"))
        self.assertEqual(value, b"v1")
        self.assertIs(c.cas(self.key("c"), b"v2", token), True)
        self.assertEqual(c.get(self.key("c")), b"v2")
        self.assertIs(c.cas(self.key("c"), b"v3", token), False)  # stale token: EXISTS
        self.assertEqual(c.get(self.key("c")), b"v2")
        _, token2 = c.gets(self.key("c"))
        self.assertNotEqual(token2, token)
        self.assertIsNone(c.cas(self.key("missing"), b"x", token2))  # NOT_FOUND
        self.assertIsNone(c.get(self.key("missing")))
        # touch keeps the CAS unique (docs/kv.md), so a cas after it still succeeds.
        self.assertIs(c.touch(self.key("c"), 1000), True)
        self.assertEqual(c.gets(self.key("c")), (b"v2", token2))
        self.assertIs(c.cas(self.key("c"), b"v4", token2), True)
        self.assertEqual(c.get(self.key("c")), b"v4")

    def test_delete(self):
        c = self.client()
        c.set(self.key("d"), b"x")
        self.assertIs(c.delete(self.key("d")), True)
        self.assertIsNone(c.get(self.key("d")))
        self.assertIs(c.delete(self.key("d")), False)
        self.assertIs(c.delete(self.key("never")), False)
        c.set(self.key("expired"), b"x", expire=-1)
        self.assertIs(c.delete(self.key("expired")), False)
        c.set_many({self.key("m1"): b"1", self.key("m2"): b"2"})
        self.assertIs(c.delete_many([self.key("m1"), self.key("m2")]), True)
        self.assertEqual(c.get_many([self.key("m1"), self.key("m2")]), {})

    # --------------------------------------------------------------- incr, decr

    def test_incr_decr(self):
        c = self.client(serde=FlagsSerde())
        k = self.key("n")
        self.assertIsNone(c.incr(self.key("missing"), 1))
        self.assertIsNone(c.decr(self.key("missing"), 1))
        c.set(k, b"41", flags=5)
        self.assertEqual(c.incr(k, 1), 42)
        self.assertEqual(c.get(k), (b"42", 5))  # flags kept
        self.assertEqual(c.decr(k, 2), 40)
        self.assertEqual(c.decr(k, 100), 0)  # decr stops at 0
        self.assertEqual(c.get(k), (b"0", 5))
        c.set(k, b"18446744073709551615")
        self.assertEqual(c.incr(k, 1), 0)  # incr wraps at 2^64
        c.set(k, b"1")
        self.assertEqual(c.incr(k, 2**64 - 1), 0)
        self.assertEqual(c.incr(k, 2**64 - 1), 2**64 - 1)
        c.set(k, b"100")
        self.assertEqual(c.decr(k, 1), 99)
        # The exact number, no padding (docs/kv.md; memcached may pad with spaces).
        self.assertEqual(c.get(k), (b"99", 0))
        for bad in (b"abc", b"", b"-1", b"18446744073709551616"):
            c.set(k, bad)
            with self.assertRaises(MemcacheClientError) as e:
                c.incr(k, 1)
            self.assertEqual(e.exception.args[0],
                             b"cannot increment or decrement non-numeric value", bad)
            self.assertEqual(c.get(k), (bad, 0))
        c.set(k, b"5")
        for delta in (-1, 2**64):
            with self.assertRaises(MemcacheClientError) as e:
                c.incr(k, delta)
            self.assertEqual(e.exception.args[0], b"invalid numeric delta argument")
        self.assertEqual(c.get(k), (b"5", 0))

    # -------------------------------------------------- touch, gat, gats, expiry

    def test_touch(self):
        c = self.client()
        self.assertIs(c.touch(self.key("missing"), 10), False)
        c.set(self.key("extended"), b"e", expire=2)
        self.assertIs(c.touch(self.key("extended"), 100), True)
        c.set(self.key("shortened"), b"s")
        self.assertIs(c.touch(self.key("shortened"), 2), True)
        t = time.time()
        c.set(self.key("now"), b"x")
        self.assertIs(c.touch(self.key("now"), -1), True)
        self.assertIsNone(c.get(self.key("now")))
        # Expiry 2 s from at most int(t): gone once the server's clock reads int(t) + 2.
        sleep_until(int(t) + 2.05)
        self.assertEqual(c.get(self.key("extended")), b"e")
        self.assertIsNone(c.get(self.key("shortened")))
        self.assertIs(c.touch(self.key("shortened"), 100), False)

    def test_gat_gats(self):
        # pymemcache 3.5 has no gat or gats (4.0 added them): a plain socket.
        c = self.client(serde=FlagsSerde())
        r = self.raw()
        c.set(self.key("g"), b"gv", flags=3, expire=2)
        c.set(self.key("h"), b"hv\r\n", flags=4)
        _, cas_g = c.gets(self.key("g"))
        keys = b"%s %s %s" % (self.key("g"), self.key("missing"), self.key("h"))
        self.assertEqual(r.retrieve(b"gat 100 " + keys + b"\r\n"),
                         [(self.key("g"), 3, b"gv", None), (self.key("h"), 4, b"hv\r\n", None)])
        self.assertEqual(r.retrieve(b"gats 100 " + self.key("g") + b"\r\n"),
                         [(self.key("g"), 3, b"gv", int(cas_g))])  # CAS unique kept
        self.assertEqual(r.retrieve(b"gat 100 " + self.key("missing") + b"\r\n"), [])
        self.assertEqual(r.retrieve(b"gat 2 " + self.key("h") + b"\r\n"),
                         [(self.key("h"), 4, b"hv\r\n", None)])
        sleep_until(int(time.time()) + 2.05)  # h's expiry: at most the second now + 2
        self.assertEqual(c.get(self.key("g")), (b"gv", 3))  # gat 100 extended it
        self.assertIsNone(c.get(self.key("h")))             # gat 2 shortened it

    # protocol.txt ("Get And Touch"): gat fetches the item and updates its
    # expiration time; a negative exptime returns it and expires it (memcached
    # 1.6.18 does so).
    def test_gat_negative_exptime_returns_the_item(self):
        c = self.client()
        r = self.raw()
        c.set(self.key("g"), b"v")
        self.assertEqual(r.retrieve(b"gat -1 " + self.key("g") + b"\r\n"),
                         [(self.key("g"), 0, b"v", None)])
        self.assertIsNone(c.get(self.key("g")))

    def test_expiry(self):
        c = self.client()
        r = self.raw()
        c.set(self.key("one"), b"1", expire=1)   # a TTL of 1 may expire at once
        t0 = time.time()
        c.set(self.key("two"), b"2", expire=2)   # expiry: a second in [int(t0), int(t1)] + 2
        t1 = time.time()
        if int(time.time()) < int(t0) + 2:       # still before its expiry second
            self.assertEqual(c.get(self.key("two")), b"2")
        c.set(self.key("relative"), b"r", expire=100)
        c.set(self.key("absolute"), b"a", expire=int(t1) + 3600)  # above 30 days: Unix time
        c.set(self.key("past"), b"p", expire=30 * 86400 + 1)     # absolute, in 1970
        self.assertIsNone(c.get(self.key("past")))
        self.assertIs(c.set(self.key("negative"), b"n", expire=-1), True)
        self.assertIsNone(c.get(self.key("negative")))
        self.assertEqual(r.ask(b"set %s 0 -5 1\r\nx\r\n" % self.key("raw-negative")), [b"STORED"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % self.key("raw-negative")), [])
        sleep_until(int(t1) + 2.05)
        self.assertEqual(c.get_many([self.key(k) for k in
                                     ("one", "two", "relative", "absolute", "past")]),
                         {self.key("relative"): b"r", self.key("absolute"): b"a"})

    # ------------------------------------------------------------------- flags

    def test_flags_roundtrip(self):
        c = self.client(serde=FlagsSerde())
        for flags in (0, 1, 0xFFFF, 0x10000, 0xDEADBEEF, 2**32 - 1):
            k = self.key(f"f{flags}")
            self.assertIs(c.set(k, b"v", flags=flags), True)
            self.assertEqual(c.get(k), (b"v", flags))
            self.assertEqual(c.gets(k)[0], (b"v", flags))
            self.assertIs(c.replace(k, b"w", flags=flags ^ 1), True)
            self.assertEqual(c.get(k), (b"w", flags ^ 1))
        # Flags above 32 bits are refused and change nothing (docs/kv.md; memcached
        # truncates them).
        with self.assertRaises(MemcacheClientError) as e:
            c.set(self.key("f1"), b"x", flags=2**32)
        self.assertEqual(e.exception.args[0], b"bad command line format")
        self.assertEqual(c.get(self.key("f1")), (b"w", 0))

    # --------------------------------------------------------------- flush_all

    def test_flush_all(self):
        c = self.client()
        c.set_many({self.key("a"): b"1", self.key("b"): b"2"})
        self.assertIs(c.flush_all(), True)
        self.assertEqual(c.get_many([self.key("a"), self.key("b")]), {})
        self.assertIs(c.add(self.key("a"), b"again"), True)  # flushed: absent to add
        self.assertEqual(c.get(self.key("a")), b"again")

    def test_flush_all_with_delay(self):
        # Its own server: a delayed flush hides everything stored up to its time.
        server = self.start_server(self.INDEX, self.addCleanup)
        c = self.client(server)
        c.set_many({self.key("a"): b"1", self.key("b"): b"2"})
        t0 = time.time()
        self.assertIs(c.flush_all(delay=2), True)  # flush time F in [int(t0), int(t1)] + 2
        t1 = time.time()
        if int(time.time()) < int(t0) + 2:
            self.assertEqual(c.get(self.key("a")), b"1")
        sleep_until(int(t1) + 2.05)  # F has come: what was stored up to F is hidden
        self.assertEqual(c.get_many([self.key("a"), self.key("b")]), {})
        sleep_until(int(t1) + 3.05)
        c.set(self.key("later"), b"3")  # stored after F: stays
        self.assertEqual(c.get(self.key("later")), b"3")
        self.check_clean_stop(server)

    # ---------------------------------------------------------- stats, version

    def test_stats(self):
        c = self.client()
        r = self.raw()
        self.assertEqual(r.ask(b""), [])  # a second connection, accepted
        before = c.stats()
        for field in (b"pid", b"uptime", b"time", b"version", b"curr_items", b"total_items",
                      b"cmd_get", b"cmd_set", b"get_hits", b"get_misses",
                      b"curr_connections", b"index", b"last_shutdown_clean"):
            self.assertIn(field, before)
        self.assertEqual(before[b"pid"], self.server.pid)
        self.assertEqual(before[b"version"], VERSION)
        self.assertEqual(before[b"index"], self.INDEX.encode())
        self.assertEqual(before[b"last_shutdown_clean"], b"new")
        self.assertIsInstance(before[b"uptime"], int)
        self.assertGreaterEqual(before[b"uptime"], 0)
        self.assertLessEqual(abs(before[b"time"] - time.time()), 2)
        self.assertGreaterEqual(before[b"curr_connections"], 2)
        # The pool's page backing, as pymemcache parses it (numbers).
        self.assertIn(before[b"pool_page_bytes"], (4096, 2 << 20, 1 << 30))
        self.assertIsInstance(before[b"pool_resident_bytes"], int)
        self.assertLessEqual(before[b"pool_huge_bytes"], before[b"pool_resident_bytes"])
        c.set_many({self.key(f"s{i}"): b"x" for i in range(3)})
        got = c.get_many([self.key("s0"), self.key("s1"), self.key("missing")])
        self.assertEqual(len(got), 2)
        after = c.stats()
        counted = (b"cmd_set", b"cmd_get", b"get_hits", b"get_misses", b"curr_items",
                   b"total_items")
        delta = {f: after[f] - before[f] for f in counted}
        self.assertEqual(delta, {b"cmd_set": 3, b"cmd_get": 3, b"get_hits": 2, b"get_misses": 1,
                                 b"curr_items": 3, b"total_items": 3})
        settings = c.stats("settings")
        self.assertEqual(settings[b"item_size_max"], MAX_ITEM)
        self.assertEqual(settings[b"index"], self.INDEX.encode())
        with self.assertRaises(MemcacheUnknownCommandError):
            c.stats("bogus")  # stats takes no argument but settings (docs/kv.md)

    def test_version(self):
        self.assertEqual(self.client().version(), VERSION)

    # ----------------------------------------------------------------- noreply

    def test_noreply(self):
        # pymemcache's default: noreply for set, add, replace, append, prepend,
        # delete, touch and flush_all; none for cas, incr, decr unless asked.
        c = self.client(default_noreply=True)
        k, n = self.key("k"), self.key("n")
        self.assertIs(c.set(k, b"v1"), True)
        self.assertEqual(c.get(k), b"v1")  # the next command on the connection sees it
        self.assertIs(c.add(k, b"ignored"), True)
        self.assertEqual(c.get(k), b"v1")
        self.assertIs(c.add(self.key("new"), b"added"), True)
        self.assertEqual(c.get(self.key("new")), b"added")
        self.assertIs(c.replace(k, b"v2"), True)
        self.assertIs(c.append(k, b"+"), True)
        self.assertIs(c.prepend(k, b"-"), True)
        self.assertEqual(c.get(k), b"-v2+")
        _, token = c.gets(k)
        self.assertIs(c.cas(k, b"v3", token, noreply=True), True)
        self.assertEqual(c.get(k), b"v3")
        self.assertEqual(c.set_many({n: b"10", self.key("other"): b"o"}), [])
        self.assertIsNone(c.incr(n, 5, noreply=True))
        self.assertEqual(c.get(n), b"15")
        self.assertIsNone(c.decr(n, 20, noreply=True))
        self.assertEqual(c.get(n), b"0")
        self.assertIs(c.delete(self.key("new")), True)
        self.assertIsNone(c.get(self.key("new")))
        self.assertIs(c.touch(self.key("other"), -1), True)
        self.assertIsNone(c.get(self.key("other")))
        # An error is hidden too: a too large value gets no reply, the next get
        # reads its own reply.
        self.assertIs(c.set(k, b"x" * (MAX_ITEM + 1)), True)
        self.assertEqual(c.get(k), b"v3")
        self.assertIsNone(c.incr(self.key("text"), 1, noreply=True))  # NOT_FOUND hidden
        self.assertIs(c.add(k, b"x", noreply=False), False)  # asked for the reply
        self.assertIs(c.flush_all(), True)
        self.assertIsNone(c.get(k))
        r = self.raw()
        self.assertEqual(r.ask(b"set %s 0 0 1 noreply\r\na\r\n" % k), [])
        self.assertEqual(r.ask(b"incr %s 1 noreply\r\nverbosity 1 noreply\r\n" % k), [])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"a", None)])

    # -------------------------------------------------------------------- keys

    def test_key_lengths_and_bytes(self):
        c = self.client()
        k250 = b"k" * 250
        self.assertIs(c.set(k250, b"250"), True)
        self.assertEqual(c.get(k250), b"250")
        self.assertEqual(c.get_many([k250]), {k250: b"250"})
        self.assertIs(c.delete(k250), True)
        # Every byte a key may hold, 250 in all; bytes keys pass as they are with
        # allow_unicode_keys (else pymemcache takes ASCII only).
        b = self.client(allow_unicode_keys=True)
        every = (KEY_BYTES + KEY_BYTES)[:250]
        self.assertEqual(len(every), 250)
        self.assertIs(b.set(every, b"every byte"), True)
        self.assertEqual(b.get(every), b"every byte")
        self.assertEqual(b.gets_many([every])[every][0], b"every byte")
        self.assertIs(b.delete(every), True)
        self.assertIsNone(b.get(every))
        # pymemcache refuses 251 bytes itself, before sending anything.
        k251 = b"k" * 251
        for call in (lambda: c.set(k251, b"x"), lambda: c.get(k251), lambda: c.delete(k251),
                     lambda: c.incr(k251, 1), lambda: c.get_many([b"ok", k251])):
            with self.assertRaises(MemcacheIllegalInputError):
                call()
        with self.assertRaises(MemcacheIllegalInputError):
            c.set(b"with space", b"x")

    # ------------------------------------------------ errors (a plain socket)

    def test_error_unknown_command(self):
        r = self.raw()
        self.assertEqual(r.ask(b"bogus\r\n"), [b"ERROR"])
        self.assertEqual(r.ask(b"GET x\r\n"), [b"ERROR"])  # commands are lower case
        self.assertEqual(r.ask(b"bogus a b c\r\nbogus2\r\n"), [b"ERROR", b"ERROR"])

    def test_error_key_too_long(self):
        r = self.raw()
        k251 = b"k" * 251
        bad = b"CLIENT_ERROR bad command line format"
        for line in (b"get %s\r\n", b"gets a %s\r\n", b"delete %s\r\n", b"incr %s 1\r\n",
                     b"touch %s 1\r\n", b"gat 1 %s\r\n"):
            self.assertEqual(r.ask(line % k251), [bad], line)
        # The refused line's data block is swallowed (docs/kv.md, "The protocol").
        self.assertEqual(r.ask(b"set %s 0 0 1\r\na\r\n" % k251), [bad])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k251[:250]), [])

    def test_error_data_block_longer_than_announced(self):
        r = self.raw()
        k = self.key("k")
        self.assertEqual(r.ask(b"set %s 0 0 3\r\nold\r\n" % k), [b"STORED"])
        # <bytes> + 2 bytes are read ("abcdefg"), not ended by \r\n; the "\r\n" left
        # over is then an empty line (memcached 1.6.18 answers it ERROR).
        self.assertEqual(r.ask(b"set %s 0 0 5\r\nabcdefg\r\n" % k),
                         [b"CLIENT_ERROR bad data chunk", b"CLIENT_ERROR bad command line format"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"old", None)])
        self.assertEqual(r.ask(b"set %s 0 0 2\r\nabcd" % k), [b"CLIENT_ERROR bad data chunk"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"old", None)])

    def test_error_data_block_shorter_than_announced(self):
        r = self.raw()
        k = self.key("k")
        r.send(b"set %s 0 0 10\r\nabc\r\n" % k)
        self.assertTrue(r.nothing_within(0.3), "the server waits for the rest of the block")
        # The next command's bytes complete the 12: "abc\r\nversi" + "on", no \r\n;
        # the "\r\n" left over is an empty line (memcached 1.6.18: ERROR).
        self.assertEqual(r.ask(b"version\r\n"), [b"CLIENT_ERROR bad data chunk",
                                      b"CLIENT_ERROR bad command line format"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [])
        # A short block that the next bytes happen to complete is data, as in memcached.
        self.assertEqual(r.ask(b"set %s 0 0 7\r\nab\r\n" % k + b"get\r\n"), [b"STORED"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"ab\r\nget", None)])

    def test_error_object_too_large(self):
        r = self.raw()
        k = self.key("k")
        too_large = b"SERVER_ERROR object too large for cache"
        store = b"%s %s 0 0 %d\r\n%s\r\n"
        over = MAX_ITEM + 1
        self.assertEqual(r.ask(store % (b"set", k, over, b"x" * over)),
                         [too_large])  # the block swallowed as it arrives
        self.assertEqual(r.ask(store % (b"set", k, MAX_ITEM, b"y" * MAX_ITEM)), [b"STORED"])
        self.assertEqual(r.ask(store % (b"append", k, over, b"z" * over)), [too_large])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"y" * MAX_ITEM, None)])
        # Refused at the line, before any data arrives.
        r2 = self.raw()
        r2.send(b"set %s 0 0 2000000000\r\n" % k)
        self.assertEqual(r2.line(), too_large)

    def test_error_bad_arguments(self):
        r = self.raw()
        k = self.key("k")
        r.ask(b"set %s 0 0 1\r\n5\r\n" % k)
        self.assertEqual(r.ask(b"incr %s abc\r\n" % k),
                         [b"CLIENT_ERROR invalid numeric delta argument"])
        self.assertEqual(r.ask(b"touch %s abc\r\n" % k),
                         [b"CLIENT_ERROR invalid exptime argument"])
        self.assertEqual(r.ask(b"get\r\n"), [b"CLIENT_ERROR bad command line format"])
        self.assertEqual(r.ask(b"set %s 0 0\r\n" % k), [b"CLIENT_ERROR bad command line format"])
        self.assertEqual(r.retrieve(b"get %s\r\n" % k), [(k, 0, b"5", None)])

    # ------------------------------------------------ rget (MemcacheDB's form)

    def test_rget_ends_and_max(self):
        c = self.client(serde=FlagsSerde())
        r = self.raw()
        p = self.key("")
        for i, name in enumerate((b"a", b"b", b"c", b"d")):
            c.set(p + name, name * 2, flags=i)
        a, b, cc, d = (p + x for x in (b"a", b"b", b"c", b"d"))
        items = r.retrieve(b"rget %s %s 0 0 10\r\n" % (a, d))
        self.assertEqual(items, [(a, 0, b"aa", None), (b, 1, b"bb", None),
                                 (cc, 2, b"cc", None), (d, 3, b"dd", None)])

        def keys(*args):
            return [k for k, _ in rget(r, *args)]

        self.assertEqual(keys(a, d, 1, 0, 10), [b, cc, d])
        self.assertEqual(keys(a, d, 0, 1, 10), [a, b, cc])
        self.assertEqual(keys(a, d, 1, 1, 10), [b, cc])
        self.assertEqual(keys(a, d, 0, 0, 2), [a, b])
        self.assertEqual(keys(a, d, 1, 1, 1), [b])
        self.assertEqual(keys(b, b, 0, 0, 10), [b])
        self.assertEqual(keys(b, b, 1, 0, 10), [])
        self.assertEqual(keys(d, a, 0, 0, 10), [])  # start above end
        self.assertEqual(keys(p + b"a0", p + b"c0", 0, 0, 10), [b, cc])  # ends not stored
        c.delete(b)
        c.set(cc, b"gone", expire=-1)
        self.assertEqual(keys(a, d, 0, 0, 10), [a, d])  # deleted and expired: absent

    def test_rget_against_model(self):
        rnd = random.Random(7)
        c = self.client(allow_unicode_keys=True)
        r = self.raw()
        p = self.key("")
        model = {}
        for i in range(300):
            suffix = bytes(rnd.choice(KEY_BYTES) for _ in range(rnd.randint(1, 12)))
            model[p + suffix] = b"%d" % i
        for stem in (b"x", b"xx", b"xxx", b"x\x01", b"x\x7f", b"x\x80", b"x\xff", b"\xff\xff"):
            model[p + stem] = stem  # prefixes of each other, bytes above 0x7f
        self.assertEqual(c.set_many(model), [])
        keys = sorted(model)
        bounds = keys + [p + bytes(rnd.choice(KEY_BYTES) for _ in range(rnd.randint(1, 6)))
                         for _ in range(50)] + [p[:-1] + b"\x01"]  # p minus its ":" : below all
        for i in range(200):
            lo, hi = rnd.choice(bounds), rnd.choice(bounds)
            if i % 4 != 0 and lo > hi:
                lo, hi = hi, lo
            lo_open, hi_open = rnd.randint(0, 1), rnd.randint(0, 1)
            limit = rnd.choice((1, 2, 5, 50, 1000))
            self.assertEqual(rget(r, lo, hi, lo_open, hi_open, limit),
                             model_range(model, lo, hi, lo_open, hi_open, limit),
                             (lo, hi, lo_open, hi_open, limit))
        self.assertEqual(rget(r, keys[0], keys[-1], 0, 0, 1000), sorted(model.items()))

    def test_rget_bad_arguments(self):
        r = self.raw()
        bad = b"CLIENT_ERROR bad command line format"
        for line in (b"rget a z 0 0 0", b"rget a z 2 0 10", b"rget a z 0 -1 10",
                     b"rget a z 0 0", b"rget a z 0 0 x", b"rget a z 0 0 10 11",
                     b"rget %s z 0 0 10" % (b"k" * 251)):
            self.assertEqual(r.ask(line + b"\r\n"), [bad], line)

    def test_rget_unordered_index(self):
        listing = subprocess.run([NVINDEX, "bench", "--list-indexes"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
        unordered = []  # (name, kind) of every index with string keys and no order
        for line in listing.splitlines():
            cols = line.split("\t")
            if len(cols) > 3 and cols[1] in ("persistent", "volatile"):
                props = cols[3].split(", ")
                if "string keys" in props and "ordered" not in props:
                    unordered.append((cols[0], cols[1]))
        if not unordered:
            self.skipTest("no string-key index without order is registered (nvindex bench "
                          "--list-indexes): every index a store takes is ordered")
        for name, kind in unordered:
            server = self.start_server(name, self.addCleanup, pool=kind == "persistent")
            r = self.raw(server)
            self.assertEqual(r.ask(b"rget a z 0 0 10\r\n"),
                             [b"SERVER_ERROR range reads need an ordered index"], name)
            self.check_clean_stop(server)

    # ------------------------------------------------------------- persistence

    def test_persistence_after_sigkill(self):
        server = self.start_server(self.INDEX, self.addCleanup)
        c = self.client(server)
        model = {b"persist:%05d" % i: b"v%d:" % i + bytes([i % 256]) * (i % 97) + b"\r\n"
                 for i in range(2000)}
        self.assertEqual(c.set_many(model, noreply=False), [])
        c.close()
        self.assertEqual(server.stop(signal.SIGKILL), -signal.SIGKILL)
        server.start()  # the same pool, recovered
        c = self.client(server)
        self.assertEqual(c.get_many(list(model)), model)
        st = c.stats()
        self.assertEqual(st[b"last_shutdown_clean"], b"no")
        self.assertEqual(st[b"items_at_open"], len(model))
        self.assertEqual(st[b"curr_items"], len(model))
        c.close()
        self.check_clean_stop(server)
        server.start()
        c = self.client(server)
        self.assertEqual(c.stats()[b"last_shutdown_clean"], b"yes")
        self.assertEqual(c.get_many(list(model)), model)
        c.close()
        self.check_clean_stop(server)


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for index in INDEXES:
        name = "Serve_" + index.replace("-", "_")
        cls = type(name, (Commands, ServerCase), {"INDEX": index, "__module__": __name__})
        globals()[name] = cls
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


def main():
    global NVINDEX
    NVINDEX = nvindex_binary_from_argv()
    if NVINDEX is None:
        return 2
    print(f"pymemcache {pymemcache.__version__} (Python {sys.version.split()[0]}), "
          f"{NVINDEX}, indexes {', '.join(INDEXES)}", flush=True)
    return run_unittest()


if __name__ == "__main__":
    sys.exit(main())
