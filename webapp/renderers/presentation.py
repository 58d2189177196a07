"""What every renderer shows, computed once: summary rows, gap notes, findings in order.

The web page, the standalone HTML, the PDF and the email all read these, so a figure or
a note reads the same everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webapp.formatting import (
    UNKNOWN,
    format_amount,
    format_bytes,
    format_co2e,
    format_duration,
    format_energy,
    format_percent,
    visible,
)
from webapp.model import GPU_REPLAYS, Finding, JobReport, SizingSuggestion
from webapp.renderers.charts import Chart, ChartCache
from webapp.renderers.queue import queue_rows, wait_line
from webapp.renderers.sections import (
    COVERAGE_HEADER,
    MEMORY_HEADER,
    MEMORY_SENTENCE,
    SECTIONS,
    STEP_HEADER,
    audit_rows,
    coverage_line,
    coverage_rows,
    memory_rows,
    no_findings_text,
    query_rows,
    step_rows,
    threshold_rows,
    verdict_rows,
    waste_header,
    waste_note,
    waste_rows,
    waste_sentence,
)
from webapp.renderers.wording import (
    cpu_source_text,
    figures_from,
    gap_text,
    headline,
    memory_where,
    peak_text,
    time_limit_text,
    title,
    verdict,
    what,
)

ARRAY_ROWS_SHOWN = 50  # tasks listed one by one; the rest are counted

CHARTS = ChartCache()


def format_time(when: datetime | None) -> str:
    """A UTC-aware datetime as '2026-11-22 13:00:00 UTC'."""
    return UNKNOWN if when is None else when.strftime("%Y-%m-%d %H:%M:%S %Z")


def summary_rows(report: JobReport) -> list[tuple[str, str]]:
    """Label/value pairs of the summary table, one line each, not escaped (renderers do)."""
    return [(label, visible(value)) for label, value in _summary_rows(report)]


def _summary_rows(report: JobReport) -> list[tuple[str, str]]:
    """The job's facts; a fact not known is left out rather than called unknown."""
    def of(used: str, asked: str, ratio: float | None) -> str:
        return f"{used} of {asked} ({format_percent(ratio)})" if ratio is not None else used

    cpus = []
    if report.cpus:
        cpus.append(f"{report.cpus} allocated")
    if report.cpu_seconds is not None:
        source = f" ({cpu_source_text(report)})" if report.cpu_source else ""
        cpus.append(f"CPU time {format_duration(report.cpu_seconds)}{source}")
    if report.cpu_efficiency is not None:
        cpus.append(f"efficiency {format_percent(report.cpu_efficiency)}")
    peak = report.memory_peak
    memory = None
    if peak is not None:  # report.memory_peak_bytes is its bytes
        asked, judged = report.memory_requested_per_node, report.memory_judged_peak_bytes
        memory = (of(format_bytes(judged), format_bytes(asked) + memory_where(report),
                     report.memory_efficiency) if asked and judged is not None
                  else format_bytes(peak.bytes)) + f" peak; {peak_text(peak)}"
    job = f"{report.job_id} on {report.cluster}"
    if report.figures_from:
        job += f" (figures from {report.figures_from})"
    user = report.user and report.user + (f" (account {report.account})"
                                          if report.account else "")
    state = report.state and report.state + (f" (exit code {report.exit_code})"
                                             if report.exit_code else "")
    elapsed = report.elapsed_seconds is not None and (
        f"{format_duration(report.elapsed_seconds)} of {time_limit_text(report)} time limit")
    rows = [
        ("Job", job),
        ("Name", report.job_name),
        ("User", user),
        ("Partition", partition_text(report)),
        ("Nodes", ", ".join(report.nodes)),
        ("State", state),
        ("Submitted", report.submit_time and format_time(report.submit_time)),
        ("Started", report.start_time and format_time(report.start_time)),
        ("Ended", report.end_time and format_time(report.end_time)),
        ("Elapsed", elapsed),
        ("CPUs", "; ".join(cpus)),
        ("Memory", memory),
        ("GPUs", str(report.gpus) if report.gpus else None),
        ("Energy", energy_text(report) if report.energy else None),
        ("Work directory", report.work_dir),
    ]
    return [(label, value) for label, value in rows if value]


def partition_text(report: JobReport) -> str | None:
    """``gpu (QoS long)``; the QoS only when known, alone when the partition is not."""
    qos = report.qos and f"QoS {report.qos}"
    if report.partition and qos:
        return f"{report.partition} ({qos})"
    return report.partition or qos


def energy_replayed(report: JobReport) -> bool:
    """The job's energy rests on readings its nodes replayed (``Usage.replayed``): their
    RAPL zones', or, for a job holding GPUs, their GPUs'."""
    return any(r.source not in GPU_REPLAYS or report.gpus for r in report.usage.replayed)


def energy_text(report: JobReport) -> str:
    """``0.42 kWh (n1 0.3 kWh, n2 0.12 kWh); 155 g CO2e at 370 g/kWh (constant)``."""
    e = report.energy
    assert e is not None
    text = format_energy(e.joules)
    if len(e.by_node) > 1:
        text += " (" + ", ".join(f"{n} {format_energy(j)}" for n, j in e.by_node) + ")"
    if energy_replayed(report):
        text += " from replayed readings, not measured (see the audit)"
    if e.intensity_source and e.intensity_g_per_kwh is not None:
        text += (f"; {format_co2e(e.co2e_grams)} at {e.intensity_g_per_kwh:.3g} g/kWh "
                 f"({e.intensity_source})")
    return text


def array_rows(report: JobReport) -> list[tuple[str, str]]:
    """The array's summary (label/value pairs), shown before any single task's figures."""
    a = report.array
    if a is None:
        return []
    states = ", ".join(f"{n} {state}" for state, n in a.state_counts().items())
    rows = [
        ("Tasks", f"{len(a.tasks)} ({states})"),
        ("Elapsed p50 / p95", f"{format_duration(a.elapsed_p50)} / "
                              f"{format_duration(a.elapsed_p95)}"),
        ("Peak memory p50 / p95", f"{format_bytes(a.memory_peak_p50)} / "
                                  f"{format_bytes(a.memory_peak_p95)}"),
        ("CPU efficiency p50 / p95", f"{format_percent(a.cpu_efficiency_p50)} / "
                                     f"{format_percent(a.cpu_efficiency_p95)}"),
        ("Outlier tasks", ", ".join(a.outliers) or "none"),
    ]
    advice = " ".join(x for x in (a.suggested_mem and f"--mem={a.suggested_mem}",
                                  a.suggested_time and f"--time={a.suggested_time}") if x)
    rows.append(("Next submission", advice or "no suggestion (no task ended yet)"))
    return [(label, visible(value)) for label, value in rows]


def array_task_rows(report: JobReport) -> list[tuple[str, str, str, str, str]]:
    """One row per task (id, state, elapsed, CPU efficiency, peak memory): the spread."""
    if report.array is None:
        return []
    return [
        (visible(t.job_id), visible(t.state), format_duration(t.elapsed_seconds),
         format_percent(t.cpu_efficiency), format_bytes(t.memory_peak_bytes))
        for t in report.array.tasks[:ARRAY_ROWS_SHOWN]
    ]


def array_more(report: JobReport) -> int:
    """Tasks not listed one by one."""
    return max(0, len(report.array.tasks) - ARRAY_ROWS_SHOWN) if report.array else 0


# Evidence keys whose value is a ratio (0..1) when no sentence says it better.
_RATIO_KEYS = re.compile(r"(efficiency|ratio|utilization|time_used)")
_WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "cpus": "CPUs", "io": "I/O"}


def _evidence_value(key: str, value: float | int | str) -> tuple[str, str]:
    """A readable label and value for one evidence number: units from the key's suffix."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if key.endswith("_bytes"):
            return key.removesuffix("_bytes"), format_bytes(value)
        if key.endswith("_seconds"):
            return key.removesuffix("_seconds"), format_duration(value)
        if _RATIO_KEYS.search(key):
            return key, format_percent(value)
        return key, f"{value:,}" if isinstance(value, int) else format_amount(value)
    return key, str(value)


def evidence_line(finding: Finding) -> str:
    """The finding's evidence sentence; for a finding without one, a readable
    "Label: value; label: value." list of its numbers (never ``key = value``)."""
    if finding.evidence_text:
        return visible(finding.evidence_text)
    parts = []
    for key, value in finding.evidence.items():
        label, shown = _evidence_value(key, value)
        words = " ".join(_WORDS.get(w, w) for w in label.split("_"))
        parts.append(f"{words}: {visible(shown)}")
    if not parts:
        return ""
    line = "; ".join(parts) + "."
    return line[0].upper() + line[1:]


@dataclass(frozen=True)
class Gauge:
    """One key figure drawn as a small bar: ``ratio`` 0..1 (more is drawn as full, and
    marked), ``value`` the percentage as printed, ``detail`` what it is a ratio of."""

    label: str
    ratio: float | None
    value: str
    detail: str

    @property
    def fill(self) -> float:
        return min(max(self.ratio or 0.0, 0.0), 1.0)

    @property
    def over(self) -> bool:
        return self.ratio is not None and self.ratio > 1.0


def _gpus_seen(seen: int, allocated: int) -> str:
    if not seen:
        return "no GPU data"
    if seen == allocated:
        return "mean of the GPU" if seen == 1 else f"mean of the {seen} GPUs"
    return f"mean of the {seen} of {allocated} GPUs with data"


def gauges(report: JobReport) -> list[Gauge]:
    """CPU efficiency, memory peak of the request, GPU utilisation (GPU jobs) and time
    used of the limit: the figures every format draws as bars, computed once; those
    not known are left out."""
    cpu = report.cpu_efficiency
    out = [
        Gauge("CPU efficiency", cpu, format_percent(cpu),
              f"{format_duration(report.cpu_seconds)} CPU time on "
              + (f"{report.cpus} core{'s' if report.cpus != 1 else ''}" if report.cpus
                 else "an unknown number of cores")),
        Gauge("Memory peak of requested", report.memory_efficiency,
              format_percent(report.memory_efficiency),
              f"{format_bytes(report.memory_judged_peak_bytes)} of "
              f"{format_bytes(report.memory_requested_per_node)}{memory_where(report)}"),
    ]
    if report.gpus or report.usage.gpu_utilization:
        gpu = report.gpu_utilization
        seen = sum(1 for s in report.usage.gpu_utilization if s.points)
        out.append(Gauge("GPU utilisation", gpu, format_percent(gpu),
                         _gpus_seen(seen, max(report.gpus, seen))))
    out.append(Gauge("Time used of requested", report.time_used,
                     format_percent(report.time_used),
                     f"{format_duration(report.elapsed_seconds)} of {time_limit_text(report)}"))
    return [g for g in out if g.ratio is not None]  # a figure not known is left out


def sizing_lines(sizing: SizingSuggestion | None) -> list[str]:
    """The suggested ``#SBATCH`` block, one line each (empty without a history): what the
    page, the PDF, the email, the text report and ``jobreport history`` print."""
    return [visible(line) for line in sizing.lines()] if sizing else []


def sizing_note(report: JobReport) -> str:
    """What the block is based on and what it would have saved, in one line."""
    s = report.sizing
    if s is None:
        return ""
    text = f"Based on {s.based_on} earlier job{'s' if s.based_on != 1 else ''}"
    text += f" ({s.basis})." if s.basis else "."
    if s.saved:
        text += " It would have saved " + "; ".join(s.saved) + "."
    return visible(text)


def sorted_findings(report: JobReport) -> list[Finding]:
    """Most severe first, stable otherwise."""
    return sorted(report.findings, key=lambda f: f.severity.rank)


def context(report: JobReport, charts: list[Chart] | None = None,
            staff: bool = False) -> dict[str, Any]:
    """Everything report.html, email/report.*, the PDF and the text need, computed once.

    ``staff`` adds each gap's technical detail (driver errors) to its note."""
    return {
        "report": report,
        "sections": SECTIONS,
        "title": visible(title(report)),
        "what": what(report),
        "headline": visible(headline(report)),
        "verdict": verdict(report),
        "wait": wait_line(report),
        "energy": visible("Energy: " + energy_text(report)) if report.energy else None,
        "figures_from": figures_from(report),
        "array_summary": array_rows(report),
        "array_tasks": array_task_rows(report),
        "array_more": array_more(report),
        "summary": summary_rows(report),
        "findings": sorted_findings(report),
        "gaps": [gap_text(g, staff) for g in report.gaps] + list(report.notes),
        "charts": CHARTS.get(report) if charts is None else charts,
        "queue": [(label, visible(value)) for label, value in queue_rows(report)],
        "memory_header": MEMORY_HEADER,
        "memory": memory_rows(report),
        "memory_sentence": MEMORY_SENTENCE,
        "step_header": STEP_HEADER,
        "steps": step_rows(report),
        "waste_header": waste_header(report),
        "waste": waste_rows(report),
        "waste_sentence": waste_sentence(report),
        "waste_note": waste_note(report),
        "coverage_header": COVERAGE_HEADER,
        "coverage_line": coverage_line(report),
        "coverage": [] if coverage_line(report) else coverage_rows(report),
        "audit": audit_rows(report),
        "verdicts": verdict_rows(report),
        "thresholds": threshold_rows(report),
        "queries": query_rows(report),
        "no_findings": no_findings_text(report),
        "gauges": gauges(report),
        "sizing": sizing_lines(report.sizing),
        "sizing_note": sizing_note(report),
    }
