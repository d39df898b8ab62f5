"""What multiprocessing's side of bench/compare/run.sh shares: the clock, the median, and the one
line a figure is printed as (`NAME lib=mp(METHOD) key=value ...`, which run.sh's parsers read)."""
import argparse
import statistics
import time

clock = time.perf_counter
median = statistics.median


def arguments(doc, **extra):
    """--repeat (timed runs, the median is reported) and the script's own integer options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    for name, default in extra.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return parser.parse_args()


def emit(name, method, **fields):
    print(f"{name:16s} lib=mp({method})", *(f"{k}={v}" for k, v in fields.items()), flush=True)
