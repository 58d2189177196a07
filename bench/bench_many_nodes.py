"""Rendering the report of a job on 10, 100 and 1,000 nodes (not a test; needs no stack).

The report is the tests' two-node sample job (``tests/helpers/reports.py``) spread over
``K`` nodes for 24 h at the plots' resolution (500 points a series, what the report's
range queries return): CPU, memory and I/O per node, 32 cores per node, two GPUs per
node, one coverage row per node and GPU. Times, ``--runs`` rounds each (p50 / p95):
the text report, the five SVG plots, and the PDF (pylatex + latexmk); with
``--per-node`` also the previous rendering (one line per node, one bar per core) for
comparison. Building the report from Prometheus is measured by ``bench_report.py``.

    .venv/bin/python bench/bench_many_nodes.py [--nodes 10,100,1000] [--runs 5] [--per-node]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from datetime import timedelta

if not __package__:  # run as a file (python bench/bench_many_nodes.py): import from the checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.helpers.reports import START, sample_report  # noqa: E402
from webapp.model import Coverage, Series, SeriesCoverage  # noqa: E402
from webapp.renderers import charts, node_bands, pdf, sections, text  # noqa: E402

LIMIT = node_bands.MAX_LINES

POINTS = 500
CORES = 32


def many_nodes(k: int):  # noqa: ANN201 - a JobReport
    t0, step = START.timestamp(), 86400 / POINTS

    def series(label: str, f) -> Series:  # noqa: ANN001
        return Series(label, tuple((t0 + step * i, float(f(i))) for i in range(POINTS)))

    names = [f"n{i:04d}" for i in range(k)]
    base = sample_report(n=POINTS)
    usage = replace(
        base.usage,
        cpu_cores=tuple(series(n, lambda i, j=j: 20 + (j % 13) + (i % 7)) for j, n in
                        enumerate(names)),
        cpu_per_core=tuple(Series(f"{n}/cpu{c}", ((t0 + 86400, (c * 7 + j) % 100 / 100),))
                           for j, n in enumerate(names) for c in range(CORES)),
        memory_rss=tuple(series(n, lambda i, j=j: 2**30 * (8 + j % 5)) for j, n in
                         enumerate(names)),
        io_read_rate=tuple(series(n, lambda i: 1e6 * (i % 10)) for n in names),
        io_write_rate=tuple(series(n, lambda i: 2e5) for n in names),
        gpu_utilization=tuple(series(f"{n}/gpu{g}", lambda i, j=j: (j % 10) / 10)
                              for j, n in enumerate(names) for g in range(2)),
    )
    cover = Coverage(
        nodes=tuple(SeriesCoverage(n, 2880, 30.0, 86400.0 - j % 3 * 60, 1 - j % 3 * 0.001)
                    for j, n in enumerate(names)),
        gpus=tuple(SeriesCoverage(f"{n}/gpu{g}", 2880, 30.0, 86400.0, 1.0)
                   for n in names for g in range(2)))
    return replace(base, nodes=tuple(names), cpus=CORES * k, gpus=2 * k, usage=usage,
                   coverage=cover, end_time=START + timedelta(days=1), elapsed_seconds=86400.0)


def timed(fn, runs: int) -> tuple[float, float]:  # noqa: ANN001
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="10,100,1000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--per-node", action="store_true")
    args = ap.parse_args()
    modes = [("bands", LIMIT)]
    if args.per_node:
        modes.append(("per node", 10**9))
    for k in (int(x) for x in args.nodes.split(",")):
        report = many_nodes(k)
        for mode, limit in modes:
            # The previous rendering: every node its own line, bar and row.
            charts.MAX_LINES = sections.MAX_LINES = node_bands.MAX_LINES = limit
            node_bands.TOP = 10 if mode == "bands" else 10**9
            out = {}
            for name, fn in (("text", lambda: text.render(report, details=True)),  # noqa: B023
                             ("plots", lambda: charts.svg_charts(report)),  # noqa: B023
                             ("pdf", lambda: pdf.render(report))):  # noqa: B023
                out[name] = timed(fn, args.runs if name != "pdf" else max(1, args.runs // 2))
            print(f"{k:>5} nodes, {mode}: " + ", ".join(
                f"{n} p50 {a * 1000:.0f} ms p95 {b * 1000:.0f} ms" for n, (a, b) in out.items()),
                flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
