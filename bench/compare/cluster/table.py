"""The cluster comparison's table (bench/compare/cluster/run_cluster.sh): for each row, fiber's
figure and each peer's, round by round, as fiber ÷ peer of the time it takes (a ready time, an
overhead per task, the time per task of a throughput run: below 1, fiber is ahead). A row run
several times in a round shows the median of its runs (and how many). A peer that could not do a
row shows the error it gave.

    table.py ROWS_TXT
"""
import collections
import statistics
import sys

TITLES = {
    "ready_4": "4 workers ready on the two nodes (s, from the program's start)",
    "ready_32": "32 workers ready on the two nodes (s, from the program's start)",
    "ready_128": "128 workers ready on the two nodes (s, from the program's start)",
    "overhead_4_0_2000": "overhead per task, 0 ms tasks, chunksize 1 (µs)",
    "overhead_4_1_2000": "overhead per task, 1 ms tasks, chunksize 1 (µs)",
    "throughput_4_100000": "100,000 trivial tasks (tasks/s)",
    "broadcast_4_64": "a 64 MB argument to each of the 4 workers (s)",
    "args_4_64_8": "64 distinct 8 MB arguments on 4 workers (s)",
    "framework_4_200_1": "framework test: rounds of 4 × 1 ms tasks, overhead per round (µs)",
    "kill_4_200_50": "one worker's job cancelled mid-map, 200 × 50 ms: completed, reruns, time beyond ideal (s)",
}
LOAD = "the controller's load: Slurm commands per minute during a {} s map of 100 ms tasks"


def cost(fields):
    """What the row costs, lower is better: seconds, µs, seconds per task, or calls per minute."""
    if "calls_per_min" in fields:
        return max(float(fields["calls_per_min"]), 0.1)
    if "extra_s" in fields:
        return max(float(fields["extra_s"]), 0.001)
    if "tasks_per_s" in fields:
        return 1.0 / float(fields["tasks_per_s"])
    if "overhead_us" in fields:
        return float(fields["overhead_us"])
    return float(fields["seconds"])


def median_run(runs):
    """The run of median cost among `runs` (an error if every run failed), with how many ran."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[-1]
    middle = dict(sorted(good, key=cost)[(len(good) - 1) // 2])
    if len(runs) > 1:
        middle["runs"] = str(len(runs))
    if len(good) > 1 and "seconds" in middle and "overhead_us" not in middle and "tasks_per_s" not in middle:
        middle["seconds"] = f"{statistics.median(float(r['seconds']) for r in good):.3f}"
    return middle


def as_ratio(r):
    """0.123x, or 1/2,345 where three decimals would read 0.000x."""
    return f"{r:.3f}x" if r >= 0.01 else f"1/{1 / r:,.0f}"


def shown(fields):
    if fields.get("completed") == "no":
        return "did not complete: " + fields.get("error", "").replace("_", " ")[:120]
    if "extra_s" in fields:
        value = f"yes, {fields['reruns']} rerun(s), +{fields['extra_s']}"
    elif "calls_per_min" in fields:
        each = ", ".join(f"{k[:-8]} {v}" for k, v in fields.items() if k.endswith("_per_min") and k != "calls_per_min")
        value = fields["calls_per_min"] + (f" ({each})" if each else "")
    else:
        value = fields.get("tasks_per_s") or fields.get("overhead_us") or fields.get("seconds")
    if "capped" in fields:
        value += f" ({fields['capped']} {'rounds' if 'rounds' in fields else 'tasks'})"
    return value + (f" (median of {fields['runs']})" if "runs" in fields else "")


def main(path):
    every = collections.defaultdict(lambda: collections.defaultdict(list))  # (spec, round) -> system -> [fields]
    systems = []
    for line in open(path):
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        every[(fields["spec"], fields["round"])][fields["system"]].append(fields)
        if fields["system"] not in systems:
            systems.append(fields["system"])
    runs = {key: {s: median_run(v) for s, v in by.items()} for key, by in every.items()}
    peers = [s for s in systems if s != "fiber"]
    print("| row | round | fiber | " + " | ".join(f"{p} | fiber ÷ {p}" for p in peers) + " |")
    print("|---|---|---|" + "---|---|" * len(peers))
    for (spec, rnd), by in sorted(runs.items(), key=lambda kv: (list(TITLES).index(kv[0][0]) if kv[0][0] in TITLES else 99, kv[0][1])):
        fib = by.get("fiber", {})
        fib_failed = "error" in fib and "completed" not in fib
        title = LOAD.format(spec.split("_")[-1]) if spec.startswith("load_") else TITLES.get(spec, spec)
        cells = [title, rnd, shown(fib) if not fib_failed else "error: " + fib["error"]]
        for p in peers:
            f = by.get(p, {})
            if not f:
                cells += ["—", "—"]
            elif "error" in f and "completed" not in f:
                cells += ["error: " + f["error"].replace("_", " ")[:120], "—"]
            elif f.get("completed") == "no" or fib.get("completed") == "no":
                cells += [shown(f), "—"]
            elif f.get("calls_per_min") == "0.0":  # no ratio to nothing: say who calls
                cells += [shown(f), "peer calls none" if fib.get("calls_per_min") != "0.0" else "both none"]
            else:
                ratio = as_ratio(cost(fib) / cost(f)) if fib and "error" not in fib else "—"
                cells += [shown(f), ratio]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
