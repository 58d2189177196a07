"""Benchmark of slurm-exporter (not a test): one refresh (parse every source, then the
/metrics exposition) of a cluster of 10,000 nodes and 200,000 jobs, and the cost of each
command on the local stack.

The cluster is made of the real captures in fixtures/slurm/ by repeating their lines and
renaming nodes (n00001...), jobs (sequential ids), users (500) and accounts (50); GRES and
states stay as captured. Prints the median of --runs refreshes and the peak RSS.

    .venv/bin/python bench/bench_slurm_exporter.py [--runs 5] [--nodes 10000] [--jobs 200000]
                                       [--distinct] [--command-runs 10] [--no-commands]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python bench/bench_slurm_exporter.py): from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slurm_exporter.commands import COMMAND_ENV, COMMANDS  # noqa: E402
from slurm_exporter.exposition import render  # noqa: E402
from slurm_exporter.registry import PARSERS, SlurmCollector  # noqa: E402
from slurm_exporter.throttle import ThrottledSource  # noqa: E402

FIXTURES = ROOT / "fixtures" / "slurm"


def captured_lines(kind: str) -> list[str]:
    lines = []
    for path in sorted(FIXTURES.glob(f"*.{kind}.txt")):
        lines += [line for line in path.read_text().splitlines() if line.strip()]
    return lines


def scaled_sinfo(nodes: int) -> str:
    out = []
    for i, line in zip(range(nodes), itertools.cycle(captured_lines("sinfo")), strict=False):
        out.append(f"n{i:05d}|" + line.split("|", 1)[1])
    return "\n".join(out) + "\n"


def scaled_squeue(jobs: int, distinct: bool = False) -> str:
    """``distinct``: the worst case, every line different (memory request = job number)."""
    out = []
    for i, line in zip(range(jobs), itertools.cycle(captured_lines("squeue")), strict=False):
        fields = line.split("|")
        job_id = str(1_000_000 + i)
        fields[0] = fields[1] = job_id
        fields[3] = f"user{i % 500:03d}"
        fields[4] = f"acct{i % 50:02d}"
        if distinct:
            fields[8] = ",".join(f"mem={i + 1}M" if item.startswith("mem=") else item
                                 for item in fields[8].split(","))
        out.append("|".join(fields))
    return "\n".join(out) + "\n"


def scaled_sshare(users: int = 500, accounts: int = 50) -> str:
    out = ["root||||0|0.000000||0.000000", " root|root|1||0|0.000000|0.000000|0.000000"]
    for a in range(accounts):
        out.append(f" acct{a:02d}||1||0|0.000000||0.000000")
        for u in range(a, users, accounts):
            out.append(f"  acct{a:02d}|user{u:03d}|1||0|0.000000|0.000000|0.000000")
    return "\n".join(out) + "\n"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_refresh(nodes: int, jobs: int, runs: int, distinct: bool) -> None:
    texts = {
        "sinfo": scaled_sinfo(nodes),
        "squeue": scaled_squeue(jobs, distinct),
        "sshare": scaled_sshare(),
        "sdiag": (FIXTURES / "queue-pending.sdiag.txt").read_text(),
    }
    print(f"input: {nodes:,} nodes ({len(texts['sinfo']) / 2**20:.1f} MiB of sinfo), "
          f"{jobs:,} jobs ({len(texts['squeue']) / 2**20:.1f} MiB of squeue); "
          f"RSS before: {rss_mib():.0f} MiB")
    times, parse_times, sizes, body = [], [], [], b""
    for _ in range(runs):
        start = time.perf_counter()
        for name, text in texts.items():
            PARSERS[name](text)
        parse_times.append(time.perf_counter() - start)
        # A fresh exporter per run: its first scrape runs (here: parses) every source.
        sources = {
            name: ThrottledSource(name, lambda p=PARSERS[name], t=text: p(t), poll_limit=60)
            for name, text in texts.items()
        }
        collector = SlurmCollector("bench", sources)
        start = time.perf_counter()
        body = render(collector.collect())
        times.append(time.perf_counter() - start)
        sizes.append(len(body))
        assert all(s.health.up for s in sources.values())
        del sources, collector
    samples = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
    print(f"refresh (parse all four + collect + expose), median of {runs}: "
          f"{statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); "
          f"parsing alone {statistics.median(parse_times) * 1000:.0f} ms; "
          f"exposition {sizes[0] / 2**20:.1f} MiB, {samples:,} samples")
    print(f"peak RSS: {rss_mib():.0f} MiB")


def bench_commands(runs: int) -> None:
    env = {**os.environ, **COMMAND_ENV}
    variants = [(name, list(argv)) for name, argv in COMMANDS.items()]
    variants += [("sinfo --json", ["sinfo", "--json"]), ("squeue --json", ["squeue", "--json"])]
    print(f"command costs on the local stack, median of {runs} runs:")
    for name, argv in variants:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(argv, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"  {name:14s} {statistics.median(times) * 1000:6.1f} ms   {shlex.join(argv)}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--jobs", type=int, default=200_000)
    p.add_argument("--command-runs", type=int, default=10)
    p.add_argument("--no-commands", action="store_true")
    p.add_argument("--distinct", action="store_true",
                   help="worst case: no two squeue lines alike (each job its own memory)")
    args = p.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}")
    bench_refresh(args.nodes, args.jobs, args.runs, args.distinct)
    if not args.no_commands:
        bench_commands(args.command_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
