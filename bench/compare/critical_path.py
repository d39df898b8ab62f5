#!/usr/bin/env python3
"""Where a round trip's or a framework round's time goes, from the system calls' timestamps.

A wall-clock figure moves 2-4x with the machine's phase and hides which side is slow. This script
runs one benchmark under `perf record` with a few syscall tracepoints (sendmsg, recvfrom or read,
epoll_wait, clock_nanosleep) and splits each round at the messages it sends:

    critical_path.py rtt BUILD        queue_bench pipe_rtt_16B: per round trip, how long the
                                      master takes from the reply to the next item, the child from
                                      the item to its reply, and each message in between
    critical_path.py framework BUILD  pool_bench framework_rounds: the round's dispatch, the
                                      workers' wake-up, their sleeps' spread, the results' return
    critical_path.py floor BUILD      framework_floor (no library) split the same way

Each tracepoint costs a little, so the figures are longer than untraced ones; compare two
builds with the same script, alternating. Needs perf and the right to trace (root).
"""
import re
import statistics
import subprocess
import sys
import tempfile

LINE = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+syscalls:(\w+):\s*(.*)")


def trace(command, tracepoints):
    with tempfile.NamedTemporaryFile(suffix=".data") as data:
        record = ["perf", "record", "-q", "-o", data.name]
        for e in tracepoints:
            record += ["-e", "syscalls:" + e]
        subprocess.run(record + ["--"] + command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(["perf", "script", "-i", data.name, "-F", "comm,pid,tid,time,event,trace"],
                             check=True, capture_output=True, text=True).stdout
    events = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            comm, _, tid, t, name, rest = m.groups()
            events.append((float(t) * 1e6, comm, int(tid), name, rest.strip()))
    return events


def failed(rest):
    return rest.startswith("0xfff")  # a negative return: EAGAIN and the like


def report(rows):
    for name, values in rows.items():
        if not values:
            continue
        values = sorted(values)
        p = lambda q: values[min(len(values) - 1, int(q * len(values)))]
        # perf's timestamps are whole microseconds: the mean of the middle 90 % resolves less.
        middle = values[len(values) // 20: len(values) - len(values) // 20] or values
        print(f"{name:42s} mean {statistics.mean(middle):7.2f} us (middle 90 %)   p10 {p(0.1):5.0f}   p90 {p(0.9):5.0f}")


def round_trips(build):
    ev = trace([f"{build}/bench/queue_bench", "--benchmark_filter=pipe_rtt_16B"],
               ["sys_enter_sendmsg", "sys_exit_recvfrom"])
    master = min(tid for _, comm, tid, _, _ in ev if comm == "queue_bench")
    rows = {k: [] for k in ("master: reply in -> next item out", "child: item in -> reply out",
                            "item: master out -> child in", "reply: child out -> master in", "round trip")}
    sent = got = answered = back = None
    for t, _, tid, name, rest in ev:
        mine = tid == master
        if name == "sys_enter_sendmsg" and mine:
            if None not in (sent, got, answered, back):
                rows["item: master out -> child in"].append(got - sent)
                rows["child: item in -> reply out"].append(answered - got)
                rows["reply: child out -> master in"].append(back - answered)
                rows["master: reply in -> next item out"].append(t - back)
                rows["round trip"].append(t - sent)
            sent, got, answered, back = t, None, None, None
        elif name == "sys_exit_recvfrom" and not failed(rest) and sent is not None:
            if not mine and got is None:
                got = t
            elif mine and answered is not None and back is None:
                back = t
        elif name == "sys_enter_sendmsg" and not mine and got is not None and answered is None:
            answered = t
    report(rows)


def rounds(build, floor):
    if floor:
        command, main_comm = [f"{build}/bench/framework_floor"], "framework_floor"
        sends, reads = ("sys_enter_write",), ("sys_exit_read",)
    else:
        command = [f"{build}/bench/pool_bench", "--benchmark_filter=framework_rounds"]
        main_comm = "pool_bench"
        sends, reads = ("sys_enter_sendmsg",), ("sys_exit_recvfrom",)
    ev = trace(command, list(sends + reads) + ["sys_enter_clock_nanosleep", "sys_exit_clock_nanosleep"])
    # The master is the thread of the main command that sends most.
    counts = {}
    for _, comm, tid, name, _ in ev:
        if comm == main_comm and name in sends:
            counts[tid] = counts.get(tid, 0) + 1
    master = max(counts, key=counts.get)
    # A round starts with the master's first send after it has all five results of the last.
    all_rounds, cur, results = [], None, 0
    for t, comm, tid, name, rest in ev:
        if tid == master and name in sends:
            if cur is None or results >= 5:
                if cur:
                    all_rounds.append(cur)
                cur, results = {"sends": [], "results": [], "slept": {}, "woke": {}}, 0
            cur["sends"].append(t)
        elif cur is None:
            continue
        elif tid == master and name in reads and not failed(rest):
            cur["results"].append(t)
            results += 1
        elif tid != master and name == "sys_enter_clock_nanosleep":
            cur["slept"][tid] = t
        elif tid != master and name == "sys_exit_clock_nanosleep":
            cur["woke"][tid] = t
    whole = [r for r in all_rounds if len(r["sends"]) == 5 and len(r["results"]) >= 5 and len(r["slept"]) == 5
             and len(r["woke"]) == 5][5:]  # the first rounds warm up
    rows = {k: [] for k in ("dispatch: first send -> last send", "first send -> first worker asleep",
                            "first send -> last worker asleep", "first worker's sleep",
                            "sleeps' ends: first -> last", "last sleep's end -> master has all",
                            "master has all -> next round's first send", "round")}
    for r, nxt in zip(whole, whole[1:]):
        sends, slept, woke = sorted(r["sends"]), sorted(r["slept"].values()), sorted(r["woke"].values())
        all_in = sorted(r["results"])[4]
        rows["dispatch: first send -> last send"].append(sends[-1] - sends[0])
        rows["first send -> first worker asleep"].append(slept[0] - sends[0])
        rows["first send -> last worker asleep"].append(slept[-1] - sends[0])
        rows["first worker's sleep"].append(woke[0] - slept[0])
        rows["sleeps' ends: first -> last"].append(woke[-1] - woke[0])
        rows["last sleep's end -> master has all"].append(all_in - woke[-1])
        rows["master has all -> next round's first send"].append(nxt["sends"][0] - all_in)
        rows["round"].append(nxt["sends"][0] - sends[0])
    report(rows)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("rtt", "framework", "floor"):
        sys.exit("usage: critical_path.py rtt|framework|floor BUILD")
    what, build = sys.argv[1], sys.argv[2]
    if what == "rtt":
        round_trips(build)
    else:
        rounds(build, what == "floor")


if __name__ == "__main__":
    main()
