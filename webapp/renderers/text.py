"""Terminal renderer: one screen of 80 columns for an ordinary job.

The sections in their one order (``sections.SECTIONS``): the headline, the key figures,
the findings with their advice and the next ``#SBATCH`` block; the details (plots,
steps, array tasks, queue, waste, coverage) only with ``details`` and the audit only
with ``audit``, as `jobreport show --details --audit` asks.
"""

from __future__ import annotations

import textwrap
from typing import Any

from webapp.formatting import format_bytes, format_duration, format_percent, visible
from webapp.model import JobReport, Series, SizingSuggestion
from webapp.renderers.node_bands import TOP, extremes
from webapp.renderers.presentation import Gauge, context, evidence_line, sizing_lines
from webapp.renderers.sections import NO_FINDINGS
from webapp.renderers.wording import cpu_source_text, peak_text, time_limit_text

WIDTH = 80
BAR = 20
TASKS_SHOWN = 50  # array tasks listed one by one
SPARK = " ▁▂▃▄▅▆▇█"


def bar(ratio: float | None, width: int = BAR) -> str:
    """``[#########-----------]`` for 0.45; ratios above 1 fill the bar and show ``+``."""
    if ratio is None:
        return "[" + " " * width + "]"
    filled = round(min(max(ratio, 0.0), 1.0) * width)
    return "[" + "#" * filled + "-" * (width - filled) + ("+" if ratio > 1 else "]")


def sparkline(series: Series, width: int = 50, top: float | None = None) -> str:
    """The series resampled to ``width`` block characters, scaled to ``top`` (or its max)."""
    values = series.values
    if not values:
        return ""
    if len(values) > width:  # average consecutive buckets
        step = len(values) / width
        values = [
            sum(chunk) / len(chunk)
            for i in range(width)
            if (chunk := values[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)])
        ]
    top = top or max(values) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, round(v / top * (len(SPARK) - 1)))] for v in values)


# The gauges' names in full, short enough for a bar and its detail within 80 columns.
GAUGE_LABELS = {"Memory peak of requested": "Memory efficiency",
                "Time used of requested": "Time used"}
HEADINGS = {"figures": "Key figures", "findings": "Findings", "sizing": "Next submission",
            "plots": "Plots", "memory": "Memory", "steps": "Steps", "tasks": "Array tasks",
            "queue": "Queue", "waste": "Waste", "coverage": "Coverage", "audit": "Audit"}


def _line(label: str, value: str) -> str:
    return f"  {label:<18}{value}" if len(label) < 18 else f"  {label} {value}"


def printable(text: str | None, missing: str = "-") -> str:
    """Slurm text for a terminal, its control characters shown (``visible``), so a job
    name cannot move the cursor; ``missing`` when there is none."""
    return visible(text or missing)


def _clean(text: str | None) -> str:
    return printable(text, "")


def _wrapped(text: str, indent: str = "  ", more: str = "  ") -> list[str]:
    # Options such as `--cpus-per-task=2` stay whole: no breaks at their hyphens.
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + more,
                         break_on_hyphens=False)


def _rows(rows: list[tuple[str, str]], width: int = 18) -> list[str]:
    out = []
    for label, value in rows:
        out += textwrap.wrap(_clean(value), WIDTH, initial_indent=f"  {label:<{width}}",
                             subsequent_indent=" " * (width + 2), break_on_hyphens=False)
    return out


def _headline(r: JobReport, c: dict[str, Any]) -> list[str]:
    heading = _clean(f"{c['title']} on {r.cluster}")[:WIDTH]
    out = [heading, "=" * len(heading)]
    out += _wrapped(c["headline"], "", "")
    for note in c["gaps"]:
        out += _wrapped(f"Note: {note}", "", "      ")
    return out


def _gauge(g: Gauge) -> str:
    label = GAUGE_LABELS.get(g.label, g.label)
    return f"  {label:<18}{bar(g.ratio)} {g.value:>5}  {g.detail}"[:WIDTH]


def _figures(r: JobReport, c: dict[str, Any], details: bool) -> list[str]:
    out = ["", HEADINGS["figures"]]
    if r.array:
        out += _array_summary(r)
    if c["figures_from"]:
        out += _wrapped(c["figures_from"])
    who = ", ".join(x for x in (
        r.user and _clean(r.user) + (f" (account {_clean(r.account)})" if r.account else ""),
        r.partition and f"{_clean(r.partition)} on {_nodes(r.nodes)}") if x)
    state = _clean(r.state)
    if r.exit_code and r.exit_code != "0:0":
        state += f", exit code {_clean(r.exit_code)}"
    if who or state:
        out += _wrapped(": ".join(x for x in (who, state) if x))
    if r.start_time:
        out.append(f"  Started {r.start_time.strftime('%Y-%m-%d %H:%M UTC')}"
                   + (f" with {r.cpus} CPU{'s' if r.cpus != 1 else ''}" if r.cpus else "")
                   + (f" and {r.gpus} GPU{'s' if r.gpus != 1 else ''}" if r.gpus else ""))
    out += [_gauge(g) for g in c["gauges"]]
    if not any(g.label == "Time used of requested" for g in c["gauges"]):
        # No ratio to draw (not started, or no finite limit): the limit still says something.
        limit = time_limit_text(r)
        out.append(f"  Elapsed {format_duration(r.elapsed_seconds)} of {limit}"
                   if r.elapsed_seconds is not None and not r.unfinished
                   else f"  Time limit: {limit}")
    if c["wait"]:
        out += _wrapped(c["wait"])
    if c["energy"]:
        out += _wrapped(c["energy"])
    if details:
        out += _usage(r)
    return out


def _usage(r: JobReport) -> list[str]:
    """Where the figures come from, and I/O and processes: with ``details`` only."""
    u = r.usage
    out = []
    if r.cpu_source:
        out += _wrapped(f"CPU time from {cpu_source_text(r)}.")
    out += _wrapped(f"Memory peak: {peak_text(r.memory_peak)}.")
    rows = []
    if u.read_bytes is not None:
        rows.append(("Read / written",
                     f"{format_bytes(u.read_bytes)} / {format_bytes(u.write_bytes)}"))
    if u.open_files_max is not None:
        limit = u.open_files_limit_ratio_max
        rows.append(("Open files (max)", f"{u.open_files_max:.0f}" + (
            f"  ({format_percent(limit)} of the limit)" if limit is not None else "")))
    if u.processes_max is not None:
        threads = f" / {u.threads_max:.0f}" if u.threads_max is not None else ""
        rows.append(("Processes/threads", f"{u.processes_max:.0f}{threads}"))
    if u.scratch_in_use is not None:
        rows.append(("Scratch used", "yes" if u.scratch_in_use else "no"))
    return out + _rows(rows)


def _findings(c: dict[str, Any], details: bool) -> list[str]:
    findings = c["findings"]
    if not findings:
        out = ["", f"{HEADINGS['findings']}: none"]
        if c["no_findings"] != NO_FINDINGS:
            out += _wrapped(c["no_findings"])
        return out
    out = ["", f"{HEADINGS['findings']} ({len(findings)})"]
    for f in findings:
        out += _wrapped(f"[{f.severity.value.upper()}] {f.message}", "  ")
        out += _wrapped(f"-> {f.advice}", "    ", "   ")
        evidence = evidence_line(f) if details else ""  # a detail: with ``details`` only
        if evidence:
            out += _wrapped(f"Evidence: {_clean(evidence)}", "    ", "   ")
    return out


def _array_summary(r: JobReport) -> list[str]:
    """The array's summary: what `show <array id>` leads its key figures with."""
    a = r.array
    if a is None:
        return []
    states = ", ".join(f"{n} {_clean(state)}" for state, n in a.state_counts().items())
    out = [f"  Array of {len(a.tasks)} tasks ({states})"]
    out.append(_line("Elapsed p50/p95",
                     f"{format_duration(a.elapsed_p50)} / {format_duration(a.elapsed_p95)}"))
    out.append(_line("Memory p50/p95",
                     f"{format_bytes(a.memory_peak_p50)} / {format_bytes(a.memory_peak_p95)}"))
    out.append(_line("CPU eff. p50/p95",
                     f"{format_percent(a.cpu_efficiency_p50)} / "
                     f"{format_percent(a.cpu_efficiency_p95)}"))
    if a.outliers:
        out.append(_line("Outlier tasks", ", ".join(a.outliers)[: WIDTH - 20]))
    advice = " ".join(x for x in (a.suggested_mem and f"--mem={a.suggested_mem}",
                                  a.suggested_time and f"--time={a.suggested_time}") if x)
    if advice:
        out.append(_line("Next submission", advice))
    return out


def _array_tasks(r: JobReport) -> list[str]:
    a = r.array
    if a is None:
        return []
    out = ["", HEADINGS["tasks"],
           f"  {'task':<16}{'state':<14}{'elapsed':>10}{'CPU eff.':>10}{'peak memory':>14}"]
    for t in a.tasks[:TASKS_SHOWN]:
        out.append(f"  {_clean(t.job_id)[:15]:<16}{_clean(t.state)[:13]:<14}"
                   f"{format_duration(t.elapsed_seconds):>10}"
                   f"{format_percent(t.cpu_efficiency):>10}"
                   f"{format_bytes(t.memory_peak_bytes):>14}")
    if len(a.tasks) > TASKS_SHOWN:
        out.append(f"  ... and {len(a.tasks) - TASKS_SHOWN} more tasks")
    return out


def _left_out(n: int, what: str) -> list[str]:
    return [f"  ({n} {what} between the {TOP} busiest and {TOP} idlest left out)"] if n else []


def _plots(r: JobReport) -> list[str]:
    u = r.usage
    out = []
    top = float(r.cpus or 0) or None
    # Many nodes: the busiest and idlest of each, and how many were left out.
    cpus, cpus_left = extremes(u.cpu_cores)
    for s in cpus:
        out.append(f"  CPU {s.label[:8]:<8} {sparkline(s, 48, top)} max {s.max() or 0.0:.2f} cores")
    out += _left_out(cpus_left, "nodes")
    held, held_left = extremes(u.memory_held)  # anonymous + shared: what the peak is
    for s in held:
        out.append(f"  Mem {_clean(s.label)[:8]:<8} {sparkline(s, 48)} "
                   f"max {format_bytes(s.max())}")
    out += _left_out(held_left, "nodes")
    # GPU figures from elsewhere (Slurm's TRES) are no series: no sparkline to draw
    gpus, gpus_left = extremes(() if u.gpu_figures_from else u.gpu_utilization)
    for s in gpus:
        out.append(f"  GPU {_clean(s.label)[:8]:<8} {sparkline(s, 48, 1.0)} "
                   f"mean {format_percent(s.mean())}")
    out += _left_out(gpus_left, "GPUs")
    return ["", HEADINGS["plots"], *out] if out else []


def _details(r: JobReport, c: dict[str, Any]) -> list[str]:
    """Plots, memory, steps, array tasks, queue, waste and coverage, in SECTIONS'
    order."""
    out = _plots(r)
    if c["memory"]:
        out += ["", HEADINGS["memory"], *_wrapped(c["memory_sentence"])]
        out += _table("", c["memory_header"], c["memory"], (10, 10, 11, 11, 12, 13))[2:]
    out += _table(HEADINGS["steps"], c["step_header"], c["steps"], (8, 11, 11, 6, 9, 5, 9, 12))
    out += _array_tasks(r)
    if c["queue"]:
        out += ["", HEADINGS["queue"], *_rows(c["queue"])]
    if c["waste_sentence"]:
        out += ["", HEADINGS["waste"], *_wrapped(c["waste_sentence"])]
        out += _table("", c["waste_header"], c["waste"], (10, 20, 20, 14, 11))[2:]
        if c["waste_note"]:
            out += _wrapped(c["waste_note"])
    if c["coverage_line"]:
        out += ["", HEADINGS["coverage"], *_wrapped(c["coverage_line"])]
    elif c["coverage"]:
        out += _table(HEADINGS["coverage"], c["coverage_header"], c["coverage"],
                      (20, 9, 10, 9, 30))
    return out


def _audit(c: dict[str, Any]) -> list[str]:
    """What was overridden or withheld (every verdict and the PromQL are in the JSON)."""
    if not c["audit"]:
        return []
    return ["", HEADINGS["audit"], *_rows(c["audit"], 22)]


def render(report: JobReport, details: bool = False, audit: bool = False,
           cluster_named: bool = False, footer: str = "") -> str:
    """The report as terminal text; ``details`` and ``audit`` add those sections.
    ``cluster_named``: the job was asked for with ``--cluster``, and so is its next command.
    ``footer``: the site's (``site_wording.report_footer``), last, wrapped."""
    r = report
    c = context(r, charts=[])
    out = _headline(r, c) + _figures(r, c, details) + _findings(c, details)
    out += sizing_block(r.sizing)
    if details:
        out += _details(r, c)
    if audit:
        out += _audit(c)
    if not (details and audit):
        wanted = " ".join(x for x, shown in (("--details", details), ("--audit", audit))
                          if not shown)
        on = f" --cluster {_clean(r.cluster)}" if cluster_named else ""
        out += ["", f"More: jobreport show {_clean(r.job_id)}{on} {wanted}"]
    lines = [line for line in footer.splitlines() if line.strip()]
    if lines:
        out += [""] + [w for line in lines for w in _wrapped(_clean(line), "", "")]
    return "\n".join(out) + "\n"


def _table(heading: str, header: tuple[str, ...], rows: list[tuple[str, ...]],
           widths: tuple[int, ...]) -> list[str]:
    """A fixed-width table under a heading; nothing when there are no rows."""
    if not rows:
        return []
    def line(cells: tuple[str, ...]) -> str:
        return ("  " + "".join(f"{c[: w - 1]:<{w}}"
                               for c, w in zip(cells, widths, strict=False))).rstrip()
    return ["", heading, line(header), *(line(row) for row in rows)]


def sizing_block(z: SizingSuggestion | None) -> list[str]:
    """The next submission's ``#SBATCH`` lines (presentation's, indented to paste), with
    what they are based on and would have saved, wrapped to WIDTH."""
    if z is None:
        return []
    out = [""] + _wrapped(f"{HEADINGS['sizing']} (from {z.based_on} "
                          f"{_clean(z.basis) or 'past jobs'})", "")
    out += [f"  {line}" for line in sizing_lines(z)]
    if z.saved:
        out += _wrapped("Would have saved: " + "; ".join(z.saved))
    return out


def _nodes(nodes: tuple[str, ...], room: int = WIDTH - 40) -> str:
    """As many node names as fit on the line, then how many more: ``a01, a02 +6 more``."""
    if not nodes:
        return "no node yet"
    shown: list[str] = []
    for i, name in enumerate(nodes):
        rest = len(nodes) - i - 1
        candidate = ", ".join([*shown, _clean(name)]) + (f" +{rest} more" if rest else "")
        if shown and len(candidate) > room:
            return ", ".join(shown) + f" +{len(nodes) - len(shown)} more"
        shown.append(_clean(name))
    return ", ".join(shown)
