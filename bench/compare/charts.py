#!/usr/bin/env python3
"""The charts at the head of docs/performance.md, drawn from one comparison run's own files.

    charts.py [--peers FOLDER] [--cluster ROWS_TXT ...] [--out FOLDER] [--stamp TEXT]

--peers: what `bench/compare/run.sh build peers` keeps (build/peers-last: fiber's benchmark
JSON, the peers' lines, the machine's floors, two rounds); --cluster: the rows.txt of
`bench/compare/run.sh build cluster` (build/cluster-last/rows.txt). Each group of rows becomes
one SVG in --out (default docs/images): for every row and every peer, fiber's time ÷ the peer's,
on a log scale, a bar at the geometric mean of the rounds and a tick at each round; left of 1,
fiber is faster. The figures are read with the same code that prints the tables (peers/table.py,
cluster/table.py), so a chart and its table cannot disagree. --stamp goes under each title (the
date and machine of the run). Needs matplotlib: the peers' environment has it
(bench/compare/peers/requirements.txt).
"""
import argparse
import collections
import importlib.util
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = {"multiprocessing": "#4c72b0", "uber/fiber": "#dd8452", "Ray": "#55a868", "Dask": "#c44e52",
          "loky": "#8172b3", "dask": "#c44e52", "submitit": "#937860", "hyperqueue": "#da8bc3", "ray": "#55a868"}


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_groups(folder):
    """{group: [(row label, {peer: [ratio of round 1, ratio of round 2]})]} from a peers run."""
    table = load_module("peers_table", os.path.join(HERE, "peers", "table.py"))
    rounds = [table.load(folder, r) for r in (1, 2)]
    tables = [table.rows(*r) + table.program_rows(*r) for r in rounds]
    groups = collections.OrderedDict((g, []) for g in ("latency", "throughput", "data", "ready"))
    for i, (label, unit, _, _, _, workload) in enumerate(tables[0]):
        ratios = collections.OrderedDict()
        for name, peer_label in table.PEERS:
            for r in (0, 1):
                mine = tables[r][i][2]
                if workload == "pi":
                    mine = table.peer_figure(rounds[r][1], "fiber_beside_" + name, "pi", "s")
                theirs = tables[r][i][3].get(name)
                if mine and theirs:
                    ratios.setdefault(peer_label, []).append(mine / theirs)
        if ratios:
            groups[group_of(label, workload)].append((short(label, unit), ratios))
    return groups


def group_of(label, workload):
    if workload == "ready":
        return "ready"
    if workload in ("es", "payload"):
        return "data"
    if workload in ("start", "rtt", "managers") or "round trip" in label:
        return "latency"
    return "throughput"


def short(label, unit):
    """A row's label without its notes on how a peer ran it, with its unit, wrapped for the axis."""
    text = re.sub(r" \((?:Ray|fiber|median|Dask)[^)]*\)", "", label)
    words, lines, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) > 48:
            lines.append(line)
            line = w
        else:
            line = (line + " " + w).strip()
    lines.append(line)
    return "\n".join(lines) + f" [{unit}]"


def cluster_group(paths):
    """[(row label, {peer: [ratios]})] from cluster runs' rows.txt files, as cluster/table.py reads
    them. Each peer is set beside fiber's figures of its own run only."""
    table = load_module("cluster_table", os.path.join(HERE, "cluster", "table.py"))
    rows = collections.OrderedDict()
    for path in paths:
        every = collections.defaultdict(lambda: collections.defaultdict(list))
        for line in open(path):
            fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
            every[fields["spec"]][fields["round"], fields["system"]].append(fields)
        for spec, runs in every.items():
            by = {key: table.median_run(r) for key, r in runs.items()}
            ratios = rows.setdefault(spec, collections.OrderedDict())
            for (rnd, system), fields in sorted(by.items(), key=lambda kv: kv[0][0]):
                fib = by.get((rnd, "fiber"))
                if system == "fiber" or not fib or "error" in fib and "completed" not in fib:
                    continue
                if "error" in fields and "completed" not in fields or fields.get("completed") == "no":
                    continue
                if fields.get("calls_per_min") == "0.0":
                    continue  # a peer that calls Slurm not at all has no ratio; the table says so
                ratios.setdefault(system, []).append(table.cost(fib) / table.cost(fields))
    order = sorted(rows, key=lambda s: list(table.TITLES).index(s) if s in table.TITLES else 99)
    out = []
    for spec in order:
        title = table.LOAD.format(spec.split("_")[-1]) if spec.startswith("load_") else table.TITLES.get(spec, spec)
        if rows[spec]:
            out.append((short(title.replace(" (", " [").split(" [")[0], unit_of(title)), rows[spec]))
    return out


def unit_of(title):
    unit = title[title.rfind("(") + 1:-1] if title.endswith(")") else "calls per minute"
    return "time per task" if unit == "tasks/s" else unit


def draw(rows, title, stamp, path):
    peers = []
    for _, ratios in rows:
        peers += [p for p in ratios if p not in peers]
    height = 0.32 * sum(len(r) for _, r in rows) + 0.5 * len(rows) + 1.4
    fig, ax = plt.subplots(figsize=(10, max(2.5, height)))
    y, ticks, labels = 0.0, [], []
    for label, ratios in rows:
        top = y
        for peer in peers:
            if peer not in ratios:
                continue
            values = ratios[peer]
            mean = math.exp(sum(math.log(v) for v in values) / len(values))
            # From the line at 1 to the ratio: left of it fiber is faster, right of it the peer.
            ax.barh(y, mean - 1, height=0.8, left=1, color=COLORS.get(peer, "#999999"), label=peer)
            ax.plot(values, [y] * len(values), "|", color="black", markersize=9)
            faster = mean < 1
            at = min(values + [mean]) / 1.2 if faster else max(values + [mean]) * 1.2
            shown = f"{mean:.3g}×" if 0.5 < mean < 2 else f"{mean:.2g}×"
            ax.text(at, y, shown, va="center", ha="right" if faster else "left", fontsize=7)
            y += 1
        ticks.append((top + y - 1) / 2)
        labels.append(label)
        y += 0.7
    ax.set_xscale("log")
    low = min(min(v) for _, r in rows for v in r.values())
    high = max(max(v) for _, r in rows for v in r.values())
    ax.set_xlim(min(low, 0.5) / 12, max(high, 2) * 3)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(numticks=7))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}×"))
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("fiber's time ÷ the peer's (log scale): left of 1, fiber is faster", fontsize=9)
    ax.set_title(f"{title}\n{stamp}" if stamp else title, fontsize=10)
    handles = {}
    for h, lab in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(lab, h)
    ax.legend(handles.values(), handles.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="x", which="major", alpha=0.3)
    fig.tight_layout()
    plt.rcParams["svg.hashsalt"] = "fiber"
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    print(path)


TITLES = {"latency": "Latency: a process, a task, a round trip, a manager call",
          "throughput": "Throughput: overhead per task, trivial tasks, the framework test, a program",
          "data": "Data: an evolution-strategies generation, 64 × 8 MB arguments",
          "ready": "Workers ready: each has run a task"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers")
    ap.add_argument("--cluster", action="append", help="a rows.txt; again for another run")
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "..", "docs", "images")))
    ap.add_argument("--stamp", default="")
    args = ap.parse_args()
    if not args.peers and not args.cluster:
        sys.exit("charts.py: give --peers FOLDER (build/peers-last) and/or --cluster ROWS_TXT "
                 "(build/cluster-last/rows.txt), from bench/compare/run.sh build peers|cluster")
    if args.peers:
        for group, rows in peer_groups(args.peers).items():
            if rows:
                draw(rows, TITLES[group], args.stamp, os.path.join(args.out, f"perf-{group}.svg"))
    if args.cluster:
        draw(cluster_group(args.cluster), "The cluster path: two Slurm nodes, four workers", args.stamp,
             os.path.join(args.out, "perf-cluster.svg"))


if __name__ == "__main__":
    main()
