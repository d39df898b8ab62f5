#!/usr/bin/env python3
"""multiprocessing's channels between a parent and one child: a 16-byte round trip and 1 MB one way.

Two channels: a SimpleQueue each way, and one duplex Pipe. The child echoes every small message,
counts every large one, and answers a "count" request with (messages, bytes).
  rtt:  --n round trips of 16 bytes after 200 to warm up, microseconds a trip (median of --repeat);
  bulk: --bulk messages of 10**6 bytes, then the count request; MB/s (10**6 bytes, median).
One line a channel:

    queue_pingpong   lib=mp(fork) channel=SimpleQueue rtt=40.1us rtt_min=39.0us n=10000 bulk_1MB=900MB/s bulk_msgs=200
"""
import multiprocessing

import timing

SMALL = b"0123456789abcdef"
LARGE = bytes(range(256)) * (10**6 // 256) + bytes(10**6 % 256)


def echo(receive, send):
    messages = nbytes = 0
    while (m := receive()) is not None:
        if m == "count":
            send((messages, nbytes))
            messages = nbytes = 0
        elif len(m) > len(SMALL):
            messages, nbytes = messages + 1, nbytes + len(m)
        else:
            send(m)


def queue_child(down, up):
    echo(down.get, up.put)


def pipe_child(end):
    echo(end.recv, end.send)


def start_child(lib, channel, on_queues, on_pipe):
    """A started child of `lib` (a multiprocessing context, or a library with its API) running
    on_queues(down, up) on a SimpleQueue each way, or on_pipe(end) on a Pipe; and this side's
    send and receive."""
    if channel == "SimpleQueue":
        down, up = lib.SimpleQueue(), lib.SimpleQueue()
        child = lib.Process(target=on_queues, args=(down, up))
        send, receive = down.put, up.get
    else:
        here, there = lib.Pipe()
        child = lib.Process(target=on_pipe, args=(there,))
        send, receive = here.send, here.recv
    child.start()
    return child, send, receive


def measure(context, channel, args):
    child, send, receive = start_child(context, channel, queue_child, pipe_child)
    for _ in range(200):
        send(SMALL)
        assert receive() == SMALL
    trips = []
    for _ in range(args.repeat):
        began = timing.clock()
        for _ in range(args.n):
            send(SMALL)
            receive()
        trips.append((timing.clock() - began) / args.n)
    rates = []
    for _ in range(args.repeat + 1):  # the first run warms the large-message path
        began = timing.clock()
        for _ in range(args.bulk):
            send(LARGE)
        send("count")
        assert receive() == (args.bulk, args.bulk * len(LARGE))
        rates.append(args.bulk * len(LARGE) / 1e6 / (timing.clock() - began))
    send(None)
    child.join()
    timing.emit("queue_pingpong", context.get_start_method(), channel=f"{channel:11s}",
                rtt=f"{timing.median(trips) * 1e6:.1f}us", rtt_min=f"{min(trips) * 1e6:.1f}us", n=args.n,
                bulk_1MB=f"{timing.median(rates[1:]):.0f}MB/s", bulk_msgs=args.bulk)


if __name__ == "__main__":
    args = timing.arguments(__doc__, n=10000, bulk=200)
    context = multiprocessing.get_context("fork")
    for channel in ("SimpleQueue", "Pipe"):
        measure(context, channel, args)
