"""Plots of a report's time series as matplotlib figures, SVG strings or PDF files.

Pure functions of a ``JobReport``. Figures are built with ``matplotlib.figure.Figure``
and the Agg canvas, never ``pyplot``: nothing is registered globally, so there is no
figure to leak and concurrent requests in one process do not share state.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from jobreport_common.units import GIB, MIB
from webapp.model import JobReport, Series
from webapp.renderers.node_bands import MAX_LINES, bands

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

MAX_LEGEND = 8
SIZE = (7.5, 2.8)  # inches: a full-width web plot
# Half an A4 text width at print size (so 8-point labels print at 8 points): the PDF grid.
GRID_SIZE = (3.4, 1.6)


@dataclass(frozen=True)
class Chart:
    """One rendered plot: ``name`` is stable (css id, file name), ``summary`` is alt text."""

    name: str
    title: str
    summary: str
    svg: str


def _time_axis(report: JobReport, series: Sequence[Series]) -> tuple[float, float, str]:
    """Origin (unix s), divisor and unit label for the x axis."""
    starts = [s.points[0][0] for s in series if s.points]
    ends = [s.points[-1][0] for s in series if s.points]
    origin = report.start_time.timestamp() if report.start_time else min(starts, default=0.0)
    span = max(ends, default=origin) - origin
    if span > 3 * 3600:
        return origin, 3600.0, "hours since start"
    return origin, 60.0, "minutes since start"


@cache
def _matplotlib() -> tuple[type[Figure], type[FigureCanvasAgg]]:
    """(Figure, FigureCanvasAgg), imported at the first plot: matplotlib is ~0.3 s of
    import that most commands (the job list, email batches without PDFs) never need."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


def _figure(title: str, size: tuple[float, float] = SIZE) -> tuple[Figure, Axes]:
    figure, canvas = _matplotlib()
    if size == SIZE:
        fig = figure(figsize=size)
        fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.17)
    else:  # small figures: let matplotlib fit the labels
        fig = figure(figsize=size, layout="constrained")
    canvas(fig)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    return fig, ax


def _lines(ax: Axes, report: JobReport, series: Sequence[Series], scale: float = 1.0,
           **kw: Any) -> None:
    series = bands(series)  # many nodes: quantile bands, not one line per node
    origin, div, unit = _time_axis(report, series)
    for i, s in enumerate(series):
        xs = [(t - origin) / div for t, _ in s.points]
        ys = [v / scale for _, v in s.points]
        ax.plot(xs, ys, label=s.label if i < MAX_LEGEND else None, **kw)
    ax.set_xlabel(unit, fontsize=8)


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        # A small (PDF grid) figure has no empty corner to spare: let matplotlib pick one.
        # _figure's axes are on a Figure (a SubFigure would have no width of its own).
        fig = ax.figure
        small = isinstance(fig, _matplotlib()[0]) and fig.get_figwidth() < SIZE[0]
        ax.legend(fontsize=7, loc="best" if small else "upper right", ncols=2)


# Each plot is two functions of the report: its one-line summary (None when the report
# has no data for it), cheap, what a page lists; and its drawing, ~20 ms to build and
# ~0.1 s to draw, only for the image or the PDF that shows it.


def _cpu_summary(report: JobReport) -> str | None:
    series = report.usage.cpu_cores
    if not any(s.points for s in series):
        return None
    peak = max(s.max() or 0.0 for s in series)
    return f"Peak {peak:.1f} cores busy of {report.cpus or '?'} allocated."


def _cpu_draw(report: JobReport, size: tuple[float, float]) -> Figure:
    """Cores busy per node, against the allocated CPUs."""
    fig, ax = _figure("CPU: cores busy per node", size)
    _lines(ax, report, report.usage.cpu_cores, linewidth=1.2)
    if report.cpus:
        ax.axhline(report.cpus, color="tab:red", linestyle="--", linewidth=1,
                   label=f"allocated ({report.cpus})")
    ax.set_ylabel("cores", fontsize=8)
    ax.set_ylim(bottom=0)
    _legend(ax)
    return fig


def _core_means(report: JobReport) -> list[tuple[str, float]]:
    return [(s.label, m) for s in report.usage.cpu_per_core if (m := s.mean()) is not None]


def _cpu_core_summary(report: JobReport) -> str | None:
    cores = _core_means(report)
    if not cores:
        return None
    idle = sum(1 for _, m in cores if m < 0.05)
    return f"{len(cores)} cores plotted; {idle} were idle (under 5% on average)."


def _cpu_core_draw(report: JobReport, size: tuple[float, float]) -> Figure:
    """Mean busy fraction of every allocated core over the job (cgroup v1 nodes only)."""
    cores = _core_means(report)
    fig, ax = _figure("CPU: mean busy per core", size)
    nodes = sorted({label.rpartition("/")[0] for label, _ in cores})
    if len(nodes) > MAX_LINES:  # thousands of bars: the cores sorted, as one area
        ax.fill_between(range(len(cores)), sorted((m * 100 for _, m in cores), reverse=True),
                        step="mid", color="C0")
        cores_sorted = True
    else:
        index = {n: i for i, n in enumerate(nodes)}
        colors = [f"C{index[label.rpartition('/')[0]] % 10}" for label, _ in cores]
        ax.bar(range(len(cores)), [m * 100 for _, m in cores], color=colors, width=0.85)
        cores_sorted = False
    ax.set_ylabel("% busy", fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_xlabel(f"cores of {len(nodes)} nodes, busiest first" if cores_sorted else
                  f"cores ({len(nodes)} node{'s' if len(nodes) != 1 else ''}, one colour each)",
                  fontsize=8)
    if len(cores) <= 32:
        ax.set_xticks(range(len(cores)), [label.rpartition("/")[2] for label, _ in cores])
    return fig


def _request_per_node(report: JobReport) -> int | None:
    """--mem is per node and the lines are per node; the model keeps the total."""
    return (report.memory_requested_bytes // max(1, len(report.nodes))
            if report.memory_requested_bytes else None)


def _memory_summary(report: JobReport) -> str | None:
    held = report.usage.memory_held
    if not any(s.points for s in held):
        return None
    per_node = _request_per_node(report)
    peak = max(s.max() or 0.0 for s in held)
    of = f" of {per_node / GIB:.1f} GiB requested per node" if per_node else ""
    return f"Peak memory held {peak / GIB:.2f} GiB on one node{of}."


def _memory_draw(report: JobReport, size: tuple[float, float]) -> Figure:
    """Memory held per node (anonymous + shared: what the kernel cannot reclaim) against
    the request and the cgroup limit."""
    usage = report.usage
    fig, ax = _figure("Memory held per node", size)  # anonymous + shared (its summary)
    _lines(ax, report, usage.memory_held, scale=GIB, linewidth=1.2)
    per_node = _request_per_node(report)
    if per_node:
        ax.axhline(per_node / GIB, color="tab:orange", linestyle="--",
                   linewidth=1, label="requested per node")
    if usage.memory_limit_bytes and usage.memory_limit_bytes != per_node:
        ax.axhline(usage.memory_limit_bytes / GIB, color="tab:red", linestyle=":",
                   linewidth=1, label="limit")
    ax.set_ylabel("GiB", fontsize=8)
    ax.set_ylim(bottom=0)
    _legend(ax)
    return fig


def _gpu_summary(report: JobReport) -> str | None:
    series = report.usage.gpu_utilization
    if report.usage.gpu_figures_from or not any(s.points for s in series):
        return None  # figures from elsewhere (Slurm's TRES) are no series: nothing to draw
    means = ", ".join(f"{s.label} {100 * (s.mean() or 0.0):.0f}%" for s in series[:MAX_LEGEND])
    return f"Mean utilization: {means}."


def _gpu_draw(report: JobReport, size: tuple[float, float]) -> Figure:
    """Utilization of every allocated GPU."""
    fig, ax = _figure("GPU utilization per GPU", size)
    _lines(ax, report, report.usage.gpu_utilization, scale=0.01, linewidth=1.2)
    ax.set_ylabel("% busy", fontsize=8)
    ax.set_ylim(0, 105)
    _legend(ax)
    return fig


def _io_summary(report: JobReport) -> str | None:
    usage = report.usage
    if not any(s.points for s in (*usage.io_read_rate, *usage.io_write_rate)):
        return None
    total = (usage.read_bytes or 0.0) + (usage.write_bytes or 0.0)
    return f"{(usage.read_bytes or 0) / MIB:.0f} MiB read, " \
        f"{(usage.write_bytes or 0) / MIB:.0f} MiB written ({total / MIB:.0f} MiB in all)."


def _io_draw(report: JobReport, size: tuple[float, float]) -> Figure:
    """Read and write throughput per node."""
    usage = report.usage
    fig, ax = _figure("I/O: read and write rate per node", size)
    _lines(ax, report, [Series(f"read {s.label}", s.points) for s in usage.io_read_rate],
           scale=MIB, linewidth=1.2)
    _lines(ax, report, [Series(f"write {s.label}", s.points) for s in usage.io_write_rate],
           scale=MIB, linewidth=1.2, linestyle="--")
    ax.set_ylabel("MiB/s", fontsize=8)
    ax.set_ylim(bottom=0)
    _legend(ax)
    return fig


@dataclass(frozen=True)
class Plot:
    """One plot a report may have: ``name`` is stable (css id, file and URL name)."""

    name: str
    title: str
    summary: Callable[[JobReport], str | None]  # None: the report has no data for it
    draw: Callable[[JobReport, tuple[float, float]], Figure]

    def build(self, report: JobReport,
              size: tuple[float, float] = SIZE) -> tuple[Figure, str] | None:
        """The drawn figure and its summary, or None without data."""
        summary = self.summary(report)
        return None if summary is None else (self.draw(report, size), summary)


FIGURES: tuple[Plot, ...] = (
    Plot("cpu", "CPU per node", _cpu_summary, _cpu_draw),
    Plot("cpu-cores", "CPU per core", _cpu_core_summary, _cpu_core_draw),
    Plot("memory", "Memory", _memory_summary, _memory_draw),
    Plot("gpu", "GPU utilization", _gpu_summary, _gpu_draw),
    Plot("io", "I/O", _io_summary, _io_draw),
)
PLOTS = {p.name: p for p in FIGURES}


def to_svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog or doctype)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def to_file(fig: Figure, path: str) -> None:
    """Write the figure in the format the file name's extension names (pdf, png)."""
    fig.savefig(path, metadata={"CreationDate": None} if path.endswith(".pdf") else None)


def chart_refs(report: JobReport) -> list[Chart]:
    """Every plot the report has data for, named and summed up but not drawn (``svg``
    empty): what a page that loads each plot as an image of its own lists. No figure is
    built: the summaries are arithmetic on the series (0.02 ms, against ~20 ms a figure
    and ~0.3 s for matplotlib's import in a worker that draws nothing else)."""
    return [Chart(p.name, p.title, summary, "") for p in FIGURES
            if (summary := p.summary(report)) is not None]


def svg_charts(report: JobReport) -> list[Chart]:
    """Every plot the report has data for, as SVG."""
    return [Chart(p.name, p.title, built[1], to_svg(built[0])) for p in FIGURES
            if (built := p.build(report)) is not None]


class ChartCache:
    """LRU of rendered charts keyed by a digest of the data they plot.

    An ended job's series never change, and SVG rendering is the slowest part of a page,
    so repeated views of one report cost a digest instead of a matplotlib run.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: OrderedDict[str, list[Chart]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(report: JobReport) -> str:
        parts = (report.job_id, report.cpus, report.memory_requested_bytes,
                 report.start_time, report.usage)
        return hashlib.sha256(repr(parts).encode()).hexdigest()

    def get(self, report: JobReport) -> list[Chart]:
        key = self.key(report)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        charts = svg_charts(report)
        with self._lock:
            self._items[key] = charts
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return charts
