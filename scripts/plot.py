#!/usr/bin/python3
"""Plots and a summary table from `nvindex bench` JSON reports (schema nvindex.bench/1).

Usage: plot.py [--summary FILE] [--tpcc] OUTDIR REPORT.json...

Reads only the JSON files (one per workload, e.g. results/<stamp>/ycsb-a.json)
and writes into OUTDIR:
  throughput.png   run throughput (Mops/s) per workload, grouped bars per index
  latency.png      run latency percentiles (ns, log scale) per index, one panel per workload
  pm_per_op.png    flushes, lines flushed and fences per run operation per index
  key_types.png    (only when the reports hold both key types) string-key run
                   throughput over integer-key run throughput per index and workload
and, with --summary, a text table: throughput per index per workload, ratios
to btree and to absl-btree, PM counters per operation, and user-space
instructions per run operation and IPC ("n/a" where the machine could not
count them; the reason is printed under the table); with both key types,
also load and run throughput per key type with string / integer ratios per
index and workload, and the fastest index per workload, phase (load, run)
and key type with its ratio to the runner-up.

With --tpcc, reads `nvindex tpcc` JSON reports (schema nvindex.tpcc/1, one per
client count, e.g. results/<stamp>/tpcc/c1.json and c2.json) instead, and
writes OUTDIR/tpcc.png (tx/s per index, one bar per client count) and, with
--summary, a table per index: load time, tx/s per client count, the ratio of
the largest client count's tx/s to the smallest's, the ratio to btree, aborts
(and their share of the attempts), and the consistency check.

Key types: a report's options.key_type and options.key_size (added to
nvindex.bench/1; a report without them has integer keys). A workload is
named "<workload>" for integer keys and "<workload>/str<key_size>" for
string keys (e.g. "ycsb-a/str24"), so one call can plot both.
Uses matplotlib's Agg backend (no display needed).
"""
import argparse
import json
import os
import sys

PERCENTILES = [("p50", "50"), ("p90", "90"), ("p99", "99"), ("p99_9", "99.9"),
               ("p99_99", "99.99"), ("p99_999", "99.999"), ("max", "max")]
BASELINES = ["btree", "absl-btree"]


def reports_of(paths, schema):
    """Yields (path, report) for each file of `paths` that exists and holds
    a report of `schema`, saying on stderr why any other is skipped."""
    for p in paths:
        if not os.path.isfile(p):
            print(f"plot.py: skipping missing {p}", file=sys.stderr)
            continue
        with open(p) as f:
            rep = json.load(f)
        if rep.get("schema") != schema:
            print(f"plot.py: skipping {p}: schema {rep.get('schema')!r}", file=sys.stderr)
            continue
        yield p, rep


def load(paths):
    """Returns [(workload name, report)] for the readable reports, in order."""
    out = []
    for p, rep in reports_of(paths, "nvindex.bench/1"):
        name = rep.get("workload", {}).get("name") or os.path.splitext(os.path.basename(p))[0]
        kind, size = key_type(rep)
        if kind == "string":
            name += f"/str{size}"
        out.append((name, rep))
    return out


def key_type(rep):
    """(key type, key size in bytes) of a report: options.key_type and
    options.key_size; ("integer", 8) for reports that predate them."""
    o = rep.get("options", {})
    return o.get("key_type", "integer"), o.get("key_size", 8)


def key_type_ratios(reports):
    """[(workload, index, {"load": (integer Mops/s, string Mops/s), "run": (...)},
    key size)] for every index run on the same workload with both key types."""
    by = {}
    for wname, rep in reports:
        kind, size = key_type(rep)
        base = wname.split("/")[0]
        for r in rep["results"]:
            by.setdefault((base, r["index"]), {})[kind] = (
                r["load"]["throughput"], r["run"]["throughput"], size)
    rows = []
    for (w, i), d in by.items():
        if "integer" in d and "string" in d and d["integer"][1] > 0 and d["integer"][0] > 0:
            tp = {"load": (d["integer"][0] / 1e6, d["string"][0] / 1e6),
                  "run": (d["integer"][1] / 1e6, d["string"][1] / 1e6)}
            rows.append((w, i, tp, d["string"][2]))
    return rows


def fastest(ratios):
    """[(workload, phase, key type, index, Mops/s, runner-up, its Mops/s)]:
    the fastest index per workload, phase (load, run) and key type among the
    indexes that ran with both key types."""
    out = []
    for w in dict.fromkeys(r[0] for r in ratios):
        rows = [r for r in ratios if r[0] == w]
        for phase in ("load", "run"):
            for k, kind in enumerate(("integer", "string")):
                ranked = sorted(rows, key=lambda r: -r[2][phase][k])
                second = ranked[1] if len(ranked) > 1 else None
                out.append((w, phase, kind, ranked[0][1], ranked[0][2][phase][k],
                            second[1] if second else "-", second[2][phase][k] if second else 0.0))
    return out


def indexes_of(reports):
    names = []
    for _, rep in reports:
        for r in rep["results"]:
            if r["index"] not in names:
                names.append(r["index"])
    return names


def result(rep, index):
    for r in rep["results"]:
        if r["index"] == index:
            return r
    return None


OP_ORDER = ["insert (load)", "insert", "update", "rmw", "remove", "read", "scan"]


def pm_by_type(reports):
    """{index: {operation: {ops, flushes, lines_flushed, fences (per op)}}}, summed
    over every report: load-phase inserts as "insert (load)", run operations by
    type (from run.by_type.*.pm, the driver's exact per-operation attribution)."""
    sums = {}
    for _, rep in reports:
        for r in rep.get("results", []):
            if "flushes" not in r["load"]["pm"]:
                continue  # a PiBench wrapper: {"available": false, "reason": "n/a: plugin"}
            d = sums.setdefault(r["index"], {})
            rows = [("insert (load)", r["load"]["operations"], r["load"]["pm"])]
            for t, c in r["run"]["by_type"].items():
                if "flushes" in c.get("pm", {}):
                    rows.append((t, c["completed"], c["pm"]))
            for t, ops, pm in rows:
                if ops == 0:
                    continue
                acc = d.setdefault(t, {"ops": 0, "flushes": 0, "lines_flushed": 0, "fences": 0})
                acc["ops"] += ops
                for k in ("flushes", "lines_flushed", "fences"):
                    acc[k] += pm[k]
    out = {}
    for i, d in sums.items():
        out[i] = {}
        for t, acc in d.items():
            n = acc["ops"]
            out[i][t] = {"ops": n, **{k: acc[k] / n for k in ("flushes", "lines_flushed", "fences")}}
    return out


def cpu_cells(r):
    """(instructions/op, IPC, reason) of a result's run phase as table cells:
    "n/a" and the reason when not counted (reports without "cpu" included)."""
    cpu = r["run"].get("cpu")
    if cpu is None:
        return "n/a", "n/a", "not measured (report without CPU counters)"
    ins = cpu["instructions"]
    if not ins["available"] or ins["per_op"] is None:
        return "n/a", "n/a", ins.get("reason") or "not measured"
    ipc = cpu.get("ipc")
    return f"{ins['per_op']:.1f}", (f"{ipc:.2f}" if ipc is not None else "n/a"), None


def summary(reports, path):
    idx = indexes_of(reports)
    lines = []
    lines.append("Run throughput (Mops/s) per workload; ratio = index / baseline")
    head = f"{'workload':<10} {'index':<14} {'Mops/s':>9}"
    for b in BASELINES:
        head += f" {'/' + b:>12}"
    head += (f" {'flush/op':>9} {'lines/op':>9} {'fence/op':>9} {'p50 ns':>8} {'p99 ns':>8}"
             f" {'instr/op':>9} {'IPC':>5} {'failures':>8}")
    lines.append(head)
    cpu_reasons = []
    for wname, rep in reports:
        base = {}
        for b in BASELINES:
            r = result(rep, b)
            base[b] = r["run"]["throughput"] if r else None
        for i in idx:
            r = result(rep, i)
            if r is None:
                continue
            tp = r["run"]["throughput"]
            row = f"{wname:<10} {i:<14} {tp / 1e6:>9.3f}"
            for b in BASELINES:
                row += f" {tp / base[b]:>12.2f}" if base[b] else f" {'-':>12}"
            # A PiBench wrapper's PM counters are not known: "n/a" cells.
            po = r["run"]["pm"].get("per_op") or {k: None for k in ("flushes", "lines_flushed", "fences")}
            lat = r["run"]["latency_ns"]
            ins, ipc, why = cpu_cells(r)
            if why and why not in cpu_reasons:
                cpu_reasons.append(why)
            row += "".join(f" {po[k]:>9.2f}" if po[k] is not None else f" {'n/a':>9}"
                           for k in ("flushes", "lines_flushed", "fences"))
            row += (f" {lat['p50']:>8} {lat['p99']:>8} {ins:>9} {ipc:>5}"
                    f" {r['verification']['failures']:>8}")
            lines.append(row)
        for e in rep.get("errors", []):
            lines.append(f"{wname:<10} {e['index']:<14} could not run: {e['error']}")
    lines.append("instr/op, IPC: user-space instructions per run operation and per cycle "
                 "(perf_event_open, worker threads, harness loop included)")
    for why in cpu_reasons:
        lines.append(f"  n/a: not available ({why})")
    costs = pm_by_type(reports)
    if any(costs.values()):
        lines.append("")
        lines.append("PM cost per operation type (insert (load) = the load phases; the others = run "
                     "phases, all workloads together)")
        lines.append(f"{'index':<14} {'operation':<14} {'ops':>10} {'flush/op':>9} {'lines/op':>9} "
                     f"{'fence/op':>9}")
        for i in idx:
            if not any(c["flushes"] or c["fences"] for c in costs.get(i, {}).values()):
                continue  # a volatile index: nothing to show
            for t in OP_ORDER:
                c = costs.get(i, {}).get(t)
                if c:
                    lines.append(f"{i:<14} {t:<14} {c['ops']:>10} {c['flushes']:>9.2f} "
                                 f"{c['lines_flushed']:>9.2f} {c['fences']:>9.2f}")
    ratios = key_type_ratios(reports)
    if ratios:
        lines.append("")
        lines.append("Key types: load and run throughput (Mops/s) with integer and string keys "
                     "(same workload, same index)")
        lines.append(f"{'workload':<10} {'index':<14} {'load int':>9} {'load str':>9} "
                     f"{'str/int':>8} {'run int':>9} {'run str':>9} {'str/int':>8} "
                     f"{'str bytes':>9}")
        for w, i, tp, size in ratios:
            (li, ls), (ri, rs) = tp["load"], tp["run"]
            lines.append(f"{w:<10} {i:<14} {li:>9.3f} {ls:>9.3f} {ls / li:>8.2f} {ri:>9.3f} "
                         f"{rs:>9.3f} {rs / ri:>8.2f} {size:>9}")
        lines.append("")
        lines.append("Fastest index per workload, phase and key type (ratio = fastest / "
                     "runner-up)")
        lines.append(f"{'workload':<10} {'phase':<5} {'keys':<8} {'fastest':<14} {'Mops/s':>8} "
                     f"{'runner-up':<14} {'Mops/s':>8} {'ratio':>6}")
        for w, phase, kind, best, bt, second, st in fastest(ratios):
            ratio = f"{bt / st:>6.2f}" if st > 0 else f"{'-':>6}"
            lines.append(f"{w:<10} {phase:<5} {kind:<8} {best:<14} {bt:>8.3f} {second:<14} "
                         f"{st:>8.3f} {ratio}")
    if reports:
        m = reports[0][1]["machine"]
        o = reports[0][1]["options"]
        lines.append("")
        lines.append(f"machine: {m['hostname']}, {m['cpu_model']}, {m['cores']} cores, "
                     f"flush {m['flush_instruction']}, {m['kernel']}, nvindex {m['version']}")
        kinds = sorted({f"{k} ({s} B)" for k, s in (key_type(rep) for _, rep in reports)})
        lines.append(f"options: records {o['records']}, operations {o['operations']}, "
                     f"threads {o['threads']}, pm mode {o['pm_mode']}, node size {o['node_size']} B, "
                     f"keys {', '.join(kinds)}, date {m['date']}")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    sys.stdout.write(text)


def plots(reports, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = indexes_of(reports)
    wnames = [w for w, _ in reports]
    width = 0.8 / max(1, len(idx))

    # Throughput: grouped bars.
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(wnames)), 4))
    for k, i in enumerate(idx):
        ys = []
        for _, rep in reports:
            r = result(rep, i)
            ys.append(r["run"]["throughput"] / 1e6 if r else 0)
        xs = [x + (k - (len(idx) - 1) / 2) * width for x in range(len(wnames))]
        ax.bar(xs, ys, width, label=i)
    ax.set_xticks(range(len(wnames)))
    ax.set_xticklabels(wnames)
    ax.set_ylabel("run throughput (Mops/s)")
    ax.set_title("Throughput per workload")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "throughput.png"), dpi=120)
    plt.close(fig)

    # Latency percentiles, log scale, one panel per workload.
    fig, axes = plt.subplots(1, len(reports), figsize=(4.5 * len(reports), 4), squeeze=False)
    for ax, (wname, rep) in zip(axes[0], reports):
        for i in idx:
            r = result(rep, i)
            if r is None or r["run"]["latency_ns"]["samples"] == 0:
                continue
            lat = r["run"]["latency_ns"]
            ax.plot([lbl for _, lbl in PERCENTILES], [max(1, lat[k]) for k, _ in PERCENTILES],
                    marker="o", label=i)
        ax.set_yscale("log")
        ax.set_xlabel("percentile")
        ax.set_ylabel("latency (ns)")
        ax.set_title(wname)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "latency.png"), dpi=120)
    plt.close(fig)

    # PM cost per operation type (inserts of the load phase, and each run
    # operation type over all workloads), one panel per type.
    costs = pm_by_type(reports)
    pidx = [i for i in idx if i in costs]  # a PiBench wrapper has no PM counters: left out
    types = [t for t in OP_ORDER if any(t in costs.get(i, {}) for i in pidx)]
    metrics = [("flushes", "flushes/op"), ("lines_flushed", "lines/op"), ("fences", "fences/op")]
    fig, axes = plt.subplots(1, max(1, len(types)), figsize=(4.5 * max(1, len(types)), 4),
                             squeeze=False)
    mw = 0.8 / len(metrics)
    for ax, t in zip(axes[0], types):
        for k, (key, label) in enumerate(metrics):
            ys = [costs.get(i, {}).get(t, {}).get(key, 0) for i in pidx]
            xs = [x + (k - (len(metrics) - 1) / 2) * mw for x in range(len(pidx))]
            ax.bar(xs, ys, mw, label=label)
        ax.set_xticks(range(len(pidx)))
        ax.set_xticklabels(pidx, rotation=20)
        ax.set_ylim(bottom=0)
        ax.set_title(t)
        ax.set_ylabel("per operation")
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "pm_per_op.png"), dpi=120)
    plt.close(fig)

    # String over integer throughput, grouped bars per workload.
    ratios = key_type_ratios(reports)
    if ratios:
        ws = []
        for w, *_ in ratios:
            if w not in ws:
                ws.append(w)
        ris = [i for i in idx if any(r[1] == i for r in ratios)]
        rw = 0.8 / max(1, len(ris))
        fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(ws)), 4))
        for k, i in enumerate(ris):
            ys = [next((tp["run"][1] / tp["run"][0] for w2, i2, tp, _ in ratios
                        if w2 == w and i2 == i), 0) for w in ws]
            xs = [x + (k - (len(ris) - 1) / 2) * rw for x in range(len(ws))]
            ax.bar(xs, ys, rw, label=i)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(ws)))
        ax.set_xticklabels(ws)
        ax.set_ylabel("string / integer run throughput")
        ax.set_title(f"String keys ({ratios[0][3]} B) vs integer keys")
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "key_types.png"), dpi=120)
        plt.close(fig)


def load_tpcc(paths):
    """Returns [(clients, report)] of the readable nvindex.tpcc/1 reports,
    sorted by client count."""
    out = [(rep["options"]["clients"], rep) for _, rep in reports_of(paths, "nvindex.tpcc/1")]
    return sorted(out, key=lambda x: x[0])


def tpcc_results(reports):
    """{index: {clients: result}} over the reports, and the indexes in first-seen order."""
    by_index, order = {}, []
    for c, rep in reports:
        for r in rep.get("results", []):
            if r["index"] not in by_index:
                by_index[r["index"]] = {}
                order.append(r["index"])
            by_index[r["index"]][c] = r
    return by_index, order


def tpcc_tps(r):
    """tx/s of one result, None when the index could not run."""
    return None if r is None or "error" in r else r["run"]["tx_per_s"]


def tpcc_summary(reports, path):
    by_index, order = tpcc_results(reports)
    clients = [c for c, _ in reports]
    lo, hi = clients[0], clients[-1]
    base = by_index.get("btree", {})
    ratio = f"; c{hi}/c{lo} = tx/s with {hi} clients over {lo}" if hi != lo else ""
    lines = [f"TPC-C (nvindex tpcc): tx/s per index and client count{ratio}; /btree = ratio to "
             f"btree with as many clients"]
    head = f"{'index':<14} {'load s':>7}"
    for c in clients:
        head += f" {f'tx/s c{c}':>10}"
    if hi != lo:
        head += f" {f'c{hi}/c{lo}':>7}"
    for c in clients:
        head += f" {f'/btree c{c}':>11}"
    for c in clients:
        head += f" {f'aborts c{c}':>16}"
    head += f" {'check':>6}"
    lines.append(head)
    errors = []
    for i in order:
        rs = by_index[i]
        first = next((rs[c] for c in clients if tpcc_tps(rs.get(c)) is not None), None)
        row = f"{i:<14} " + (f"{first['load']['seconds']:>7.2f}" if first else f"{'-':>7}")
        for c in clients:
            t = tpcc_tps(rs.get(c))
            row += f" {t:>10.0f}" if t is not None else f" {'-':>10}"
        if hi != lo:
            a, b = tpcc_tps(rs.get(lo)), tpcc_tps(rs.get(hi))
            row += f" {b / a:>7.2f}" if a and b is not None else f" {'-':>7}"
        for c in clients:
            t, bt = tpcc_tps(rs.get(c)), tpcc_tps(base.get(c))
            row += f" {t / bt:>11.2f}" if t is not None and bt else f" {'-':>11}"
        for c in clients:
            r = rs.get(c)
            if tpcc_tps(r) is None:
                row += f" {'-':>16}"
                continue
            ab = sum(r["run"]["aborts"].values())
            attempts = r["run"]["transactions"] + ab
            row += f" {f'{ab} ({100.0 * ab / attempts:.2f}%)' if attempts else '0':>16}"
        ok = all(r.get("check", {}).get("ok", False) for r in rs.values() if "error" not in r)
        row += f" {'ok' if ok else 'FAILED':>6}"
        lines.append(row)
        for c, r in sorted(rs.items()):
            if "error" in r:
                errors.append(f"  {i} with {c} client(s): {r['error']}")
    if errors:
        lines.append("could not run:")
        lines.extend(errors)
    lines.append("load s: loading the warehouses (clause 4.3.3.1) with the smallest client "
                 "count; aborts: NO_WAIT lock conflicts, each retried (share of the attempts); "
                 "check: the 12 consistency conditions of clause 3.3.2 after every run")
    m = reports[0][1]["machine"]
    o = reports[0][1]["options"]
    lines.append(f"machine: {m['hostname']}, {m['cpu_model']}, {m['cores']} cores, "
                 f"flush {m['flush_instruction']}, {m['kernel']}, nvindex {m['version']}")
    runs = "; ".join(f"{c} client(s): {r['options']['warehouses']} warehouse(s), "
                     f"{r['options']['transactions']} transactions" for c, r in reports)
    lines.append(f"options: {runs}; pm mode {o['pm_mode']}, "
                 f"node size {o['node_size']} B, seed {o['seed']}, date {m['date']}")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    sys.stdout.write(text)


def tpcc_plot(reports, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_index, order = tpcc_results(reports)
    clients = [c for c, _ in reports]
    width = 0.8 / max(1, len(clients))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(order)), 4))
    for k, c in enumerate(clients):
        ys = [(tpcc_tps(by_index[i].get(c)) or 0) / 1e3 for i in order]
        xs = [x + (k - (len(clients) - 1) / 2) * width for x in range(len(order))]
        ax.bar(xs, ys, width, label=f"{c} client{'s' if c != 1 else ''}")
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(order, rotation=20)
    ax.set_ylabel("thousand transactions/s")
    c, r = reports[0]
    w = r["options"]["warehouses"] / c
    ax.set_title(f"TPC-C, {w:g} warehouse{'s' if w != 1 else ''} per client: tx/s per index")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "tpcc.png"), dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", help="write the summary table to this file")
    ap.add_argument("--tpcc", action="store_true",
                    help="the reports are nvindex tpcc reports (nvindex.tpcc/1)")
    ap.add_argument("outdir")
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    if a.tpcc:
        treports = load_tpcc(a.reports)
        if not treports:
            print("plot.py: no readable nvindex.tpcc/1 report", file=sys.stderr)
            return 1
        os.makedirs(a.outdir, exist_ok=True)
        if a.summary:
            tpcc_summary(treports, a.summary)
        tpcc_plot(treports, a.outdir)
        return 0
    reports = load(a.reports)
    if not reports:
        print("plot.py: no readable nvindex.bench/1 report", file=sys.stderr)
        return 1
    os.makedirs(a.outdir, exist_ok=True)
    if a.summary:
        summary(reports, a.summary)
    plots(reports, a.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
