"""The steps, waste and coverage/audit sections as rows: every renderer reads these.

Pure functions of the report's ``step_lines``, ``waste``, ``coverage`` and ``audit``
(computed once in webapp.report); values are plain text, not escaped (renderers do).
"""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.formatting import UNKNOWN, format_bytes, format_duration, format_percent, visible
from webapp.model import JobReport
from webapp.renderers.node_bands import MAX_LINES

STEP_HEADER = ("step", "name", "state", "exit", "elapsed", "CPUs", "CPU eff.", "peak memory")
WASTE_HEADER = ("resource", "allocated", "unused", "billing units", "core-hours")
COVERAGE_HEADER = ("series", "samples", "interval", "covered", "gaps")


def _clean(text: str | None) -> str:
    return visible(text or "")


def step_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per step or het component (STEP_HEADER's columns)."""
    return [
        (_clean(x.step_id), _clean(x.name)[:24], _clean(x.state), _clean(x.exit_code),
         format_duration(x.elapsed_seconds), str(x.cpus) if x.cpus else UNKNOWN,
         format_percent(x.cpu_efficiency), format_bytes(x.memory_peak_bytes))
        for x in report.step_lines
    ]


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return UNKNOWN
    # Three significant figures: a short test job's waste is thousandths of a unit.
    return f"{value:.3g}{unit}" if abs(value) < 1000 else f"{value:.0f}{unit}"


def waste_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per resource (WASTE_HEADER's columns)."""
    w = report.waste
    if w is None:
        return []
    return [
        (i.resource, f"{_num(i.requested)} {i.unit}", f"{_num(i.unused)} {i.unit}",
         _num(i.billing_units), _num(i.core_hours))
        for i in w.items
    ]


def waste_note(report: JobReport) -> str | None:
    """How the waste was priced: billing TRES, weights, core-hours per unit."""
    w = report.waste
    if w is None:
        return None
    total = w.total_billing_units()
    text = (f"Billing rate: {_num(w.billing_per_hour)} per hour of this allocation "
            f"(the job's billing TRES); weights from {w.weights_source}.")
    if total is not None:
        text += f" Unused resources cost {_num(total)} billing units"
        if w.core_hours_per_billing_unit:
            text += (f", {_num(total * w.core_hours_per_billing_unit)} core-hours of the "
                     f"account's allocation ({_num(w.core_hours_per_billing_unit)} core-hours "
                     "per billing unit)")
        text += "."
    return text


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def coverage_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per node and per GPU (COVERAGE_HEADER's columns)."""
    c = report.coverage
    if c is None:
        return []
    rows = []
    for kind, every in (("node", c.nodes), ("GPU", c.gpus)):
        parts = sorted(every, key=lambda p: (p.fraction, p.label))[:MAX_LINES] \
            if len(every) > MAX_LINES else every  # many nodes: the least covered
        for p in parts:
            gaps = ", ".join(f"{_when(a)}-{_when(b)}" for a, b in p.gaps[:3])
            if len(p.gaps) > 3:
                gaps += f" +{len(p.gaps) - 3} more"
            rows.append((f"{kind} {_clean(p.label)}", str(p.samples),
                         f"{p.interval_seconds:g}s" if p.interval_seconds else UNKNOWN,
                         format_percent(p.fraction), gaps or "none"))
        if len(parts) < len(every):
            rest = min(p.fraction for p in every if p not in parts)
            rows.append((f"{len(every) - len(parts)} more {kind}s", "", "",
                         f"at least {format_percent(rest)}", ""))
    return rows


def audit_rows(report: JobReport) -> list[tuple[str, str]]:
    """Label/value pairs: sources, rules' version, coverage floor, overridden thresholds."""
    a = report.audit
    if a is None:
        return []
    overridden = [f"{n}={v:.10g}" for n, v, o in a.thresholds if o]
    return [
        ("Sources", "; ".join(f"{s}: {_clean(r)}" for s, r in a.sources)),
        ("Rules version", a.rules_version),
        ("Coverage needed", f"{format_percent(a.min_coverage)} of the run per node and GPU"),
        ("Thresholds overridden", ", ".join(overridden) or "none (all defaults)"),
    ]


def verdict_rows(report: JobReport) -> list[tuple[str, str, str]]:
    """(detector, what it rests on, "given" or "withheld: why")."""
    a = report.audit
    if a is None:
        return []
    return [(v.detector, v.rests_on, f"withheld: {v.why}" if v.withheld else "given")
            for v in a.verdicts]


def threshold_rows(report: JobReport) -> list[tuple[str, str]]:
    """Every threshold applied, "(overridden)" marking the settings' ones."""
    a = report.audit
    if a is None:
        return []
    return [(n, f"{v:.10g}" + (" (overridden)" if o else "")) for n, v, o in a.thresholds]


def query_rows(report: JobReport) -> list[tuple[str, str]]:
    """(name, PromQL) of every query the report sent."""
    queries = list(report.usage.queries)
    if report.coverage is not None:
        queries += list(report.coverage.queries)
    return queries


NO_FINDINGS = "No problems found: the job used what it asked for."


def no_findings_text(report: JobReport) -> str:
    """What stands in for an empty findings list: not a clean bill when verdicts were
    withheld for too little coverage."""
    withheld = [v.detector for v in report.audit.verdicts if v.withheld] if report.audit else []
    if withheld:
        return (f"No problems found among the verdicts given; {len(withheld)} verdict(s) "
                "were withheld for too little data (see the note above).")
    return NO_FINDINGS
