"""Terminal renderer: readable at 80 columns, with small bars for efficiencies."""

from __future__ import annotations

import textwrap

from webapp.formatting import format_bytes, format_duration, format_percent, visible
from webapp.model import JobReport, Series, SizingSuggestion
from webapp.renderers.node_bands import TOP, extremes
from webapp.renderers.presentation import evidence_line, sizing_lines
from webapp.renderers.queue import queue_rows
from webapp.renderers.sections import (
    COVERAGE_HEADER,
    NO_FINDINGS,
    STEP_HEADER,
    WASTE_HEADER,
    audit_rows,
    coverage_rows,
    no_findings_text,
    step_rows,
    verdict_rows,
    waste_note,
    waste_rows,
)
from webapp.renderers.wording import (
    cpu_source_text,
    figures_from,
    gap_text,
    peak_text,
    time_limit_text,
    title,
)

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


def _line(label: str, value: str) -> str:
    return f"  {label:<18}{value}" if len(label) < 18 else f"  {label} {value}"


def printable(text: str | None, missing: str = "-") -> str:
    """Slurm text for a terminal, its control characters shown (``visible``), so a job
    name cannot move the cursor; ``missing`` when there is none."""
    return visible(text or missing)


def _clean(text: str | None) -> str:
    return printable(text, "n/a")


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def _array(r: JobReport) -> list[str]:
    """The array's summary and its tasks' spread: what `show <array id>` leads with."""
    a = r.array
    if a is None:
        return []
    states = ", ".join(f"{n} {_clean(state)}" for state, n in a.state_counts().items())
    out = [f"Array of {len(a.tasks)} tasks ({states})"]
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
    out.append("")
    out.append(f"  {'task':<16}{'state':<14}{'elapsed':>10}{'CPU eff.':>10}{'peak memory':>14}")
    for t in a.tasks[:TASKS_SHOWN]:
        out.append(f"  {_clean(t.job_id)[:15]:<16}{_clean(t.state)[:13]:<14}"
                   f"{format_duration(t.elapsed_seconds):>10}"
                   f"{format_percent(t.cpu_efficiency):>10}"
                   f"{format_bytes(t.memory_peak_bytes):>14}")
    if len(a.tasks) > TASKS_SHOWN:
        out.append(f"  ... and {len(a.tasks) - TASKS_SHOWN} more tasks")
    return out


def render(report: JobReport) -> str:
    r, u = report, report.usage
    out: list[str] = []
    heading = f"{title(r)} on {r.cluster}"
    out += [_clean(heading)[:WIDTH], "=" * min(len(heading), WIDTH)]
    if r.array:
        out += _array(r)
        out.append("")
    note = figures_from(r)
    if note:
        out += _wrapped(note, "")
        out.append("")
    out.append(_line("Owner", f"{_clean(r.user)} (account {_clean(r.account)})"))
    out.append(_line("Partition", f"{_clean(r.partition)} on {_nodes(r.nodes)}"))
    state = _clean(r.state)
    if r.exit_code and r.exit_code != "0:0":
        state += f", exit code {r.exit_code}"
    out.append(_line("State", state))
    used = (
        r.elapsed_seconds / r.time_limit_seconds
        if r.elapsed_seconds is not None and r.time_limit_seconds
        else None
    )
    out.append(
        _line(
            "Elapsed",
            f"{format_duration(r.elapsed_seconds)} of {time_limit_text(r)}"
            + (f" ({format_percent(used)})" if used is not None else ""),
        )
    )
    if r.start_time:
        out.append(_line("Started", r.start_time.strftime("%Y-%m-%d %H:%M:%S UTC")))
    out.append(_line("CPUs", str(r.cpus or "n/a")))
    out.append(_line("GPUs", str(r.gpus)))
    out.append("")
    out.append("Efficiency")
    eff = r.cpu_efficiency
    out.append(
        _line(
            "CPU efficiency",
            f"{bar(eff)} {format_percent(eff)}  ({format_duration(r.cpu_seconds)} CPU time)",
        )
    )
    if r.cpu_source:
        out += _wrapped(f"CPU time from {cpu_source_text(r)}", " " * 20)
    mem = r.memory_efficiency
    per_node = " per node" if len(r.nodes) > 1 else ""
    out.append(
        _line(
            "Memory efficiency",
            f"{bar(mem)} {format_percent(mem)}  "
            f"({format_bytes(r.memory_peak_bytes)} of "
            f"{format_bytes(r.memory_requested_per_node)}{per_node})",
        )
    )
    out += _wrapped(f"Peak: {peak_text(r.memory_peak)}", " " * 20)
    gpus_shown, gpus_left = extremes(u.gpu_utilization)
    for s in gpus_shown:
        out.append(_line("GPU utilisation",
                         f"{bar(s.mean())} {format_percent(s.mean())} mean, GPU {_clean(s.label)}"))
    if gpus_left:
        out.append(_line("", f"({gpus_left} GPUs between the {TOP} busiest and {TOP} idlest "
                         "left out)"))
    if u.read_bytes is not None or u.open_files_max is not None:
        out.append("")
        out.append("I/O and processes")
        out.append(
            _line("Read / written", f"{format_bytes(u.read_bytes)} / {format_bytes(u.write_bytes)}")
        )
        out.append(
            _line(
                "Open files (max)",
                f"{_num(u.open_files_max)}"
                f"  ({format_percent(u.open_files_limit_ratio_max)} of the limit)",
            )
        )
        out.append(_line("Processes/threads", f"{_num(u.processes_max)} / {_num(u.threads_max)}"))
        scratch = {True: "yes", False: "no", None: "n/a"}[u.scratch_in_use]
        out.append(_line("Scratch used", scratch))
    if u.cpu_cores:
        out.append("")
        out.append("CPU usage over time (cores busy)")
        top = float(r.cpus or 0) or None
        shown, left_out = extremes(u.cpu_cores)  # many nodes: the busiest and idlest
        for s in shown:
            peak = s.max() or 0.0
            out.append(f"  {s.label[:12]:<12} {sparkline(s, 50, top)} max {peak:.2f}")
        if left_out:
            out.append(f"  ({left_out} nodes between the {TOP} busiest and {TOP} idlest "
                       "left out)")
    out += _queue(r)
    out += _table("Steps", STEP_HEADER, step_rows(r), (8, 11, 11, 6, 9, 5, 9, 12))
    out += _table("Waste", WASTE_HEADER, waste_rows(r), (9, 20, 20, 14, 11))
    note = waste_note(r)
    if note:
        out += _wrapped(note)
    out += sizing_block(r.sizing)
    out.append("")
    if r.findings:
        out.append(f"Findings ({len(r.findings)})")
        for f in r.findings:
            out += textwrap.wrap(
                f"[{f.severity.value.upper()}] {f.message}",
                WIDTH,
                initial_indent="  ",
                subsequent_indent="    ",
            )
            # Options such as `--cpus-per-task=2` stay whole: no breaks at their hyphens.
            out += textwrap.wrap(
                f"-> {f.advice}", WIDTH, initial_indent="    ", subsequent_indent="       ",
                break_on_hyphens=False,
            )
            evidence = evidence_line(f)
            if evidence:
                out += textwrap.wrap(f"Evidence: {_clean(evidence)}", WIDTH,
                                     initial_indent="    ", subsequent_indent="       ",
                                     break_on_hyphens=False)
    else:
        out.append("Findings: none")
        if no_findings_text(r) != NO_FINDINGS:
            out += _wrapped(no_findings_text(r))
    for g in r.gaps:
        out += textwrap.wrap(f"Note: {gap_text(g)}", WIDTH, subsequent_indent="      ")
    for note in r.notes:
        out += textwrap.wrap(f"Note: {note}", WIDTH, subsequent_indent="      ")
    out += _audit(r)
    return "\n".join(out) + "\n"


def _table(heading: str, header: tuple[str, ...], rows: list[tuple[str, ...]],
           widths: tuple[int, ...]) -> list[str]:
    """A fixed-width table under a heading; nothing when there are no rows."""
    if not rows:
        return []
    def line(cells: tuple[str, ...]) -> str:
        return "  " + "".join(f"{c[: w - 1]:<{w}}" for c, w in zip(cells, widths, strict=False))
    return ["", heading, line(header), *(line(row) for row in rows)]


def _audit(report: JobReport) -> list[str]:
    """Coverage and audit: what the verdicts rest on (the PromQL is in the JSON)."""
    if report.audit is None and report.coverage is None:
        return []
    out = _table("Coverage", COVERAGE_HEADER, coverage_rows(report), (20, 9, 10, 9, 30))
    out += ["", "Audit"]
    for label, value in audit_rows(report):
        out += textwrap.wrap(_clean(value), WIDTH, initial_indent=f"  {label:<22}",
                             subsequent_indent=" " * 24)
    for name, rests_on, verdict in verdict_rows(report):
        if verdict != "given" or "Prometheus" in rests_on:
            out += textwrap.wrap(f"{name}: {verdict}; rests on {rests_on}", WIDTH,
                                 initial_indent="  ", subsequent_indent="    ")
    return out


def sizing_block(z: SizingSuggestion | None) -> list[str]:
    """The next submission's ``#SBATCH`` lines (presentation's, indented to paste), with
    what they are based on and would have saved, wrapped to WIDTH."""
    if z is None:
        return []
    out = [""] + _wrapped(f"Next submission (from {z.based_on} "
                          f"{_clean(z.basis) or 'past jobs'})", "")
    out += [f"  {line}" for line in sizing_lines(z)]
    if z.saved:
        out += _wrapped("Would have saved: " + "; ".join(z.saved))
    return out


def _nodes(nodes: tuple[str, ...], room: int = WIDTH - 40) -> str:
    """As many node names as fit on the line, then how many more: ``a01, a02 +6 more``."""
    if not nodes:
        return "n/a"
    shown = []
    for i, name in enumerate(nodes):
        rest = len(nodes) - i - 1
        candidate = ", ".join([*shown, _clean(name)]) + (f" +{rest} more" if rest else "")
        if shown and len(candidate) > room:
            return ", ".join(shown) + f" +{len(nodes) - len(shown)} more"
        shown.append(_clean(name))
    return ", ".join(shown)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _queue(report: JobReport) -> list[str]:
    """The "Queue" block: one wrapped line per row, within WIDTH."""
    rows = queue_rows(report)
    if not rows:
        return []
    out = ["", "Queue"]
    for label, value in rows:
        out += textwrap.wrap(_clean(value), WIDTH, initial_indent=f"  {label:<18}",
                             subsequent_indent=" " * 20)
    return out
