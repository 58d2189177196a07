"""The Python floor for the exporter's per-process /proc work (not a test; run as root).

For the same processes the exporter reads, times the least a Python exporter must do:

- ``naive``: open/read/close ``/proc/<pid>/stat`` and ``io``, list ``/proc/<pid>/fd``;
- ``floor``: ``stat`` and ``io`` kept open and re-read with ``os.pread``, plus listing
  ``/proc/<pid>/fd`` (the floor issue figures are quoted against);
- ``floor-fstat``: the same with the fd count from ``fstat`` of a kept-open
  ``/proc/<pid>/fd`` (Linux >= 6.2 reports the count as its size).

No parsing, no cgroups, no exposition: what is left is system calls and the loop.
``bench/bench_exporter.py`` imports ``Floor`` and times it in the same run as the exporter,
so the ratio holds on a noisy machine. Standalone:

    .venv/bin/python bench/floor_proc.py [--scrapes 30] PID...
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence


class Floor:
    """Kept-open fds for ``pids``; each method does one pass over all of them."""

    def __init__(self, pids: Sequence[int], keep_open: bool = True):
        self.pids = list(pids)
        self.fds: list[tuple[int, int, int]] = []
        for pid in self.pids if keep_open else ():
            try:
                stat = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
                io = os.open(f"/proc/{pid}/io", os.O_RDONLY)
                fd_dir = os.open(f"/proc/{pid}/fd", os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue
            self.fds.append((stat, io, fd_dir))

    def naive(self) -> int:
        n = 0
        for pid in self.pids:
            with open(f"/proc/{pid}/stat", "rb") as f:
                n += len(f.read())
            with open(f"/proc/{pid}/io", "rb") as f:
                n += len(f.read())
            n += len(os.listdir(f"/proc/{pid}/fd"))
        return n

    def floor(self) -> int:
        n = 0
        pread, listdir = os.pread, os.listdir
        for pid, (stat, io, _) in zip(self.pids, self.fds, strict=False):
            n += len(pread(stat, 1024, 0)) + len(pread(io, 1024, 0))
            n += len(listdir(f"/proc/{pid}/fd"))
        return n

    def floor_fstat(self) -> int:
        n = 0
        pread, fstat = os.pread, os.fstat
        for stat, io, fd_dir in self.fds:
            n += len(pread(stat, 1024, 0)) + len(pread(io, 1024, 0)) + fstat(fd_dir).st_size
        return n

    def close(self) -> None:
        for fds in self.fds:
            for fd in fds:
                os.close(fd)
        self.fds.clear()

    def passes(self) -> dict[str, Callable[[], int]]:
        if not self.fds:  # more processes than open files allowed: only the naive pass
            return {"naive": self.naive}
        return {"naive": self.naive, "floor": self.floor, "floor-fstat": self.floor_fstat}


def time_pass(run: Callable[[], int], scrapes: int) -> tuple[float, float]:
    """(p50, p95) wall seconds of ``scrapes`` passes after one warm-up."""
    run()
    walls = []
    for _ in range(scrapes):
        start = time.perf_counter()
        run()
        walls.append(time.perf_counter() - start)
    walls.sort()
    return statistics.median(walls), walls[max(0, int(len(walls) * 0.95) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scrapes", type=int, default=30, help="timed passes per method")
    parser.add_argument("pids", type=int, nargs="+", help="processes to read")
    args = parser.parse_args()
    floor = Floor(args.pids)
    try:
        for name, run in floor.passes().items():
            p50, p95 = time_pass(run, args.scrapes)
            print(f"{name:12s} p50 {p50 * 1000:6.1f} ms  p95 {p95 * 1000:6.1f} ms")
    finally:
        floor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
