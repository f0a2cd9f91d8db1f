"""Shared pieces of the paper-reproduction scripts (scripts/bench-lbtree,
scripts/bench-ni): the registry as `nvindex bench --list-indexes` prints it,
a runner that calls `nvindex bench` / `nvindex verify` with JSON output and
remembers every command and failure for the summary, and the figures'
formatting. Not a program: the scripts import it from their own folder.
"""
import json
import os
import re
import subprocess
import sys


def list_indexes(binary):
    """The rows of `nvindex bench --list-indexes` (tab-separated: name, kind,
    description, capabilities, node sizes, options), test-only doubles left
    out."""
    out = subprocess.run([binary, "bench", "--list-indexes"], check=True, capture_output=True,
                         text=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return [f for f in rows if len(f) >= 2 and f[1] != "test-only"]


def registered(binary):
    """{name: kind} of the registered indexes, kind "persistent" or "volatile"
    (test-only doubles left out)."""
    return {f[0]: f[1] for f in list_indexes(binary)}


def registered_options(binary):
    """{name: {option: [values, default first]}} from the last column of
    --list-indexes ("k=v1|v2" per option, or "-")."""
    opts = {}
    for f in list_indexes(binary):
        opts[f[0]] = {}
        for item in re.split(r"[,; ]+", f[-1]):
            k, eq, v = item.partition("=")
            if eq:
                opts[f[0]][k] = v.split("|")
    return opts


def keep_registered(prog, specs, names, what):
    """The entries of `specs` (name[:k=v;...]) whose index is registered; the
    others dropped with a note on stderr naming the flag `what`."""
    kept = []
    for s in specs:
        if s.split(":")[0] in names:
            kept.append(s)
        else:
            print(f"{prog}: {what}: index '{s}' is not registered; dropped", file=sys.stderr)
    return kept


class Runner:
    """Runs nvindex and remembers every command and failure for the summary.

    args: needs .bin, .threads, .seed and .node_size (0: each index's
    default); out: the results folder; prog: the script's name in messages.
    """

    def __init__(self, args, out, prog):
        self.args = args
        self.out = out
        self.prog = prog
        self.commands = []
        self.failed = []

    def bench(self, name, indexes, extra, threads=None, latency_sample=0.001):
        """One `nvindex bench` over `indexes` with `extra` arguments, timing
        the fraction `latency_sample` of run operations; writes <name>.json
        and <name>.txt; returns the report (None when nvindex could not run
        it). A run whose checks failed is recorded in .failed and its report
        still returned."""
        base = os.path.join(self.out, name)
        cmd = [self.args.bin, "bench", "--quiet", "--index", ",".join(indexes),
               "--threads", str(threads or self.args.threads), "--pm-mode", "emulated",
               "--seed", str(self.args.seed), "--latency-sample", str(latency_sample),
               "--format", "json", "--output", base + ".json"] + extra
        if self.args.node_size and "--node-size" not in extra:
            cmd += ["--node-size", str(self.args.node_size)]
        self.commands.append(" ".join(cmd[1:]))
        print(f"{self.prog}: {name}: {' '.join(cmd[1:])}", file=sys.stderr)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with open(base + ".txt", "w") as f:
            f.write(r.stdout)
            if r.stderr:
                f.write("\n-- stderr --\n" + r.stderr)
        if r.returncode == 2 or not os.path.exists(base + ".json"):
            self.failed.append(f"{name}: nvindex bench exit {r.returncode}: {r.stderr.strip()}")
            print(r.stderr, file=sys.stderr)
            return None
        with open(base + ".json") as f:
            rep = json.load(f)
        if r.returncode != 0:
            why = [f"{e['index']} could not run ({e['error']})" for e in rep.get("errors", [])]
            for x in rep["results"]:
                v = x["verification"]
                if v["failures"] or not v["structure"]["ok"] or x.get("recovery", "ok") != "ok":
                    why.append(f"{x['index']} FAILED its checks ({v['failures']} failures, "
                               f"structure {'ok' if v['structure']['ok'] else 'CORRUPT'}, "
                               f"recovery {x.get('recovery', '-')})")
            self.failed.append(f"{name}: " + ("; ".join(why) or f"exit {r.returncode}") +
                               f" (see {name}.txt)")
        return rep

    def verify(self, name, index, pool, threads, index_opts=()):
        """`nvindex verify` (open + recover + check) of the kept pool `pool`;
        writes <name>.json, returns its JSON (None after a failure, recorded)."""
        cmd = [self.args.bin, "verify", "--index", index, "--pool", pool, "--threads",
               str(threads), "--format", "json"]
        for kv in index_opts:
            cmd += ["--index-opt", kv]
        if self.args.node_size:
            cmd += ["--node-size", str(self.args.node_size)]
        self.commands.append(" ".join(cmd[1:]))
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            self.failed.append(f"{name}: nvindex verify exit {r.returncode}: {r.stderr.strip()}")
            return None
        with open(os.path.join(self.out, name + ".json"), "w") as f:
            f.write(r.stdout)
        return json.loads(r.stdout)


def fmt_ops(v):
    """Operations per second as "1.234 M" or "56.7 K"."""
    return f"{v / 1e6:.3f} M" if v >= 1e5 else f"{v / 1e3:.1f} K"


def by_index(rep):
    """{index label: result} of a report (empty for None)."""
    return {r["index"]: r for r in rep["results"]} if rep else {}


def ratio(a, b):
    return a / b if a and b else None


def fmt_ratio(x):
    return f"{x:.2f}" if x is not None else "-"
