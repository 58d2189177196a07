"""Parsing throughput of ``parse_sacct`` on 100,000 lines of real ``--parsable2`` output.

The lines are real captures from fixtures/sacct repeated with renumbered job ids and
shifted timestamps (so the parsers' small caches see realistic, mostly-new times);
caches are cleared before every run. Prints lines/s, median of 5 runs.

    .venv/bin/python bench/bench_sacct.py [--lines N] [--runs N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from webapp.sources import sacct
from webapp.sources.sacct import FIELDS, parse_sacct

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
# SacctSource's own command and field list (FIELDS, no header, Unix-second times), on the
# local Slurm 22.05 stack, taken before FIELDS ended with QOS: its columns but that one.
CAPTURED = [f for f in FIELDS if f != "QOS"]
LOCAL = ("local-multitask-132-sacctsource-argv.psv",
         "local-multitask-array-133-sacctsource-argv.psv")
# The richest public capture: 37 columns, GPU TRES, multi-node steps.
WIDE = "DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv"
_ID = re.compile(r"^(\d+)")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def _shift(line: str, seconds: int) -> str:
    def repl(m: re.Match[str]) -> str:
        t = datetime.fromisoformat(m.group(0)) + timedelta(seconds=seconds)
        return t.isoformat()

    return _TIME.sub(repl, line)


def read_capture(name: str) -> tuple[list[str], list[str]]:
    """(columns, data lines) of a capture: its header, else SacctSource's argv's then."""
    lines = (FIX / name).read_text().splitlines()
    if lines[0].startswith("JobID|"):
        return lines[0].split("|"), lines[1:]
    return list(CAPTURED), lines


def build_input(files: tuple[str, ...], n_lines: int) -> tuple[list[str], str]:
    """(fields, text): ``n_lines`` data lines made by repeating the captures' lines."""
    header, rows = None, []
    for name in files:
        columns, lines = read_capture(name)
        header = header or columns
        assert columns == header, f"{name}: different columns"
        rows.extend(lines)
    id_cols = [i for i, f in enumerate(header) if f in ("JobID", "JobIDRaw")]
    # Unix-second times (SLURM_TIME_FORMAT=%s) shift by column, ISO ones by _shift.
    epoch_cols = [i for i, f in enumerate(header) if f in ("Start", "End", "Submit")]
    out: list[str] = []
    r = 0
    while len(out) < n_lines:
        r += 1
        for row in rows:
            parts = _shift(row, 7 * r).split("|")
            for i in epoch_cols:
                if parts[i].isdigit():
                    parts[i] = str(int(parts[i]) + 7 * r)
            for i in id_cols:  # 29 -> 100000029, 200000029, ...: every job new
                m = _ID.match(parts[i])
                parts[i] = str(r * 10**8 + int(m.group(1))) + parts[i][m.end() :]
            out.append("|".join(parts))
            if len(out) == n_lines:
                break
    return header, "\n".join(out) + "\n"


def clear_caches() -> None:
    for fn in vars(sacct).values():  # every lru_cache the parser reads through
        if callable(getattr(fn, "cache_clear", None)):
            fn.cache_clear()


def bench(files: tuple[str, ...], n_lines: int, runs: int) -> tuple[float, int]:
    fields, text = build_input(files, n_lines)
    times = []
    for _ in range(runs):
        clear_caches()
        start = time.perf_counter()
        jobs = parse_sacct(text, fields, tz=UTC)
        times.append(time.perf_counter() - start)
        count = len(jobs)
        del jobs  # a report process holds one answer at a time, not the previous run's too
    return n_lines / statistics.median(times), count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    assert len(CAPTURED) == len(build_input(LOCAL, 1)[0])
    cases = (("local stack, FIELDS (22 cols)", LOCAL), ("hb-jobinfo (37 cols)", (WIDE,)))
    for label, files in cases:
        rate, jobs = bench(files, args.lines, args.runs)
        print(f"{label:34s} {args.lines:,} lines -> {jobs:,} jobs: "
              f"{rate:,.0f} lines/s (median of {args.runs})")


if __name__ == "__main__":
    main()
