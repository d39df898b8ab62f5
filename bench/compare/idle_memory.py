"""multiprocessing's master after a map of 1,000,000 trivial tasks on Pool(4), measured as
bench/idle_memory_bench measures fiber's: resident memory before the map, after it, and idle
1.5 s later (and after malloc_trim, for the floor of what the process could give back)."""
import ctypes
import multiprocessing as mp
import sys
import time


def identity(x):
    return x


def resident_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024


if __name__ == "__main__":
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with mp.Pool(4) as pool:
        before = resident_mb()
        result = pool.map(identity, range(items))
        assert len(result) == items
        del result
        after = resident_mb()
        time.sleep(1.5)
        idle = resident_mb()
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        print(f"multiprocessing  before the map {before:6.1f} MB  after it {after:6.1f} MB  idle 1.5 s later "
              f"{idle:6.1f} MB  after malloc_trim {resident_mb():6.1f} MB")
