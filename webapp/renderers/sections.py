"""The report's sections in their one order, and the steps, waste, coverage and audit
sections as rows and sentences: every renderer reads these.

Pure functions of the report's ``step_lines``, ``waste``, ``coverage`` and ``audit``
(computed once in webapp.report); values are plain text, not escaped (renderers do). A
value that is not known is left out, never shown as "n/a".
"""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.formatting import (
    format_amount,
    format_bytes,
    format_duration,
    format_energy,
    format_number,
    format_percent,
    visible,
)
from webapp.model import JobReport
from webapp.renderers.node_bands import MAX_LINES
from webapp.unused import Held, memory_unused_bytes

# The one order of a report's sections in every format (text, HTML, PDF, email, JSON):
# what a person needs first, the details after, the audit last.
SECTIONS = ("headline", "figures", "findings", "sizing",
            "plots", "memory", "steps", "tasks", "queue", "waste", "coverage", "audit")
DETAILS = ("plots", "memory", "steps", "tasks", "queue", "waste", "coverage")

MEMORY_HEADER = ("node", "held", "anonymous", "shm, tmpfs", "page cache", "sacct MaxRSS")
MEMORY_SENTENCE = (
    "Peaks per node, each at its own time. Held is anonymous plus shared memory (files in "
    "/dev/shm or another tmpfs): what the kernel cannot reclaim, and what the memory "
    "findings judge. The page cache it drops before it kills anything. sacct's MaxRSS is "
    "the largest single task's: its anonymous memory on cgroup v1, all its memory (page "
    "cache too) on cgroup v2.")
STEP_HEADER = ("step", "name", "state", "exit", "elapsed", "CPUs", "CPU eff.", "peak memory")
WASTE_HEADER = ("resource", "allocated", "unused", "billing units", "core-hours")
COVERAGE_HEADER = ("series", "samples", "interval", "covered", "gaps")
ALL_UNUSED = 0.995  # "all 4 GiB": what a person calls all of it


def _clean(text: str | None) -> str:
    return visible(text or "")


def _known(text: str, value: object) -> str:
    return "" if value is None else text


def step_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per step or het component (STEP_HEADER's columns); unknown cells blank."""
    return [
        (_clean(x.step_id), _clean(x.name)[:24], _clean(x.state), _clean(x.exit_code),
         _known(format_duration(x.elapsed_seconds), x.elapsed_seconds),
         str(x.cpus) if x.cpus else "",
         _known(format_percent(x.cpu_efficiency), x.cpu_efficiency),
         _known(format_bytes(x.memory_peak_bytes), x.memory_peak_bytes))
        for x in report.step_lines
    ]


def memory_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per node (MEMORY_HEADER's columns), the busiest first; past ``MAX_LINES``
    nodes the rest are counted. A figure not measured is blank."""
    measured = [n for n in report.memory_nodes if any(v is not None for v in (
        n.held_bytes, n.anon_bytes, n.shmem_bytes, n.page_cache_bytes, n.max_rss_bytes))]
    nodes = sorted(measured, key=lambda n: (-(n.held_bytes or 0), n.node))
    rows = [(_clean(n.node), *(_known(format_bytes(v), v) for v in (
                n.held_bytes, n.anon_bytes, n.shmem_bytes, n.page_cache_bytes,
                n.max_rss_bytes)))
            for n in nodes[:MAX_LINES]]
    if len(nodes) > MAX_LINES:
        rows.append((f"{len(nodes) - MAX_LINES} more nodes", "", "", "", "", ""))
    return rows


def waste_header(report: JobReport) -> tuple[str, ...]:
    """WASTE_HEADER without the core-hours column where the site gives no rate for it."""
    w = report.waste
    if w is None or any(i.core_hours is not None for i in w.items):
        return WASTE_HEADER
    return WASTE_HEADER[:-1]


def waste_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per resource (``waste_header``'s columns); a price not known is blank."""
    w = report.waste
    if w is None:
        return []
    width = len(waste_header(report))
    return [
        (i.resource, format_amount(i.requested, i.unit), format_amount(i.unused, i.unit),
         _known(format_amount(i.billing_units), i.billing_units),
         _known(format_amount(i.core_hours), i.core_hours))[:width]
        for i in w.items
    ]


def _unused(amount: float, of: float, unit: str) -> str:
    if format_amount(of) == format_amount(amount):  # "< 0.01 of < 0.01" says nothing
        return format_amount(amount, unit)
    if amount >= ALL_UNUSED * of:
        return f"all {format_amount(of, unit)}"
    return f"{format_amount(amount)} of {format_amount(of, unit)}"


def waste_sentence(report: JobReport) -> str | None:
    """The waste in one sentence, in the site's billing unit: 'Unused: 0.9 of 1.0
    core-hours and all 4.0 GiB of memory, about 0.9 billing units'."""
    w = report.waste
    if w is None:
        return None
    parts = []
    for i in w.items:
        if i.resource != "memory":
            parts.append(_unused(i.unused, i.requested, i.unit))
            continue
        if report.memory_requests_uneven:  # the nodes' own, summed (webapp.unused)
            left = memory_unused_bytes(Held(
                report.elapsed_seconds, report.cpus,
                memory_requested_bytes=report.memory_requested_bytes,
                memory_peak_bytes=report.memory_peak_bytes, nodes=len(report.nodes),
                memory_by_node=report.memory_by_node))
            requested = report.memory_requested_bytes
            if left is not None and requested:
                parts.append((f"all {format_bytes(requested)}" if left >= ALL_UNUSED * requested
                              else f"{format_bytes(left)} of {format_bytes(requested)}")
                             + " of memory")
            continue
        asked, peak = report.memory_requested_per_node, report.memory_peak_bytes
        if asked and peak is not None:
            per_node = " per node" if len(report.nodes) > 1 else ""
            unused = max(0, asked - peak)
            parts.append((f"all {format_bytes(asked)}" if unused >= ALL_UNUSED * asked
                          else f"{format_bytes(unused)} of {format_bytes(asked)}")
                         + f" of memory{per_node}")
    if not parts:
        return None
    text = "Unused: " + (parts[0] if len(parts) == 1
                         else ", ".join(parts[:-1]) + " and " + parts[-1])
    total = w.total_billing_units()
    if total is not None:
        price = format_amount(total, "billing units")
        text += f", {'about ' if total >= 0.01 else ''}{price}"
        if w.core_hours_per_billing_unit:
            text += (f" ({format_amount(total * w.core_hours_per_billing_unit, 'core-hours')}"
                     " of the account's allocation)")
    return text + "." + _unused_energy(report)


def _unused_energy(report: JobReport) -> str:
    """' The unused allocation drew 0.97 kWh (idle cores 0.39 kWh, idle GPUs 0.58 kWh).'"""
    e = report.energy
    if e is None or e.unused_joules is None:
        return ""
    parts = [f"{label} {format_energy(j)}" for label, j in
             (("idle cores", e.unused_cores_joules), ("idle GPUs", e.unused_gpus_joules))
             if j is not None]
    return f" The unused allocation drew {format_energy(e.unused_joules)} ({', '.join(parts)})."


def waste_note(report: JobReport) -> str | None:
    """How the waste was priced: the job's billing rate and where the weights come from."""
    w = report.waste
    if w is None or w.billing_per_hour is None:
        return None
    rate = format_amount(w.billing_per_hour, "billing units")
    how = ("the partition sets no billing weights, so Slurm bills the allocated CPUs"
           if w.weights_source.startswith("no TRESBillingWeights")
           else f"weights from {w.weights_source}")
    return f"Priced at the job's rate of {rate} per hour ({how})."


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def coverage_rows(report: JobReport) -> list[tuple[str, ...]]:
    """One row per node and per GPU (COVERAGE_HEADER's columns)."""
    c = report.coverage
    if c is None:
        return []
    rows: list[tuple[str, ...]] = []
    for kind, every in (("node", c.nodes), ("GPU", c.gpus)):
        parts = sorted(every, key=lambda p: (p.fraction, p.label))[:MAX_LINES] \
            if len(every) > MAX_LINES else every  # many nodes: the least covered
        for p in parts:
            gaps = ", ".join(f"{_when(a)}-{_when(b)}" for a, b in p.gaps[:3])
            if len(p.gaps) > 3:
                gaps += f" +{len(p.gaps) - 3} more"
            rows.append((f"{kind} {_clean(p.label)}", str(p.samples),
                         format_duration(p.interval_seconds) if p.interval_seconds else "",
                         format_percent(p.fraction), gaps or "none"))
        if len(parts) < len(every):
            rest = min(p.fraction for p in every if p not in parts)
            rows.append((f"{len(every) - len(parts)} more {kind}s", "", "",
                         f"at least {format_percent(rest)}", ""))
    return rows


def coverage_line(report: JobReport) -> str | None:
    """Complete coverage in one line ('Samples cover the whole run: node vm every 5s');
    None when a node or GPU has gaps (the table shows them) or nothing was sampled."""
    c = report.coverage
    if c is None or not (c.nodes or c.gpus):
        return None
    parts = c.nodes + c.gpus
    if any(p.gaps for p in parts):
        return None
    every = sorted({format_duration(p.interval_seconds) for p in parts if p.interval_seconds})
    return ("Samples cover the whole run: " + _plural(len(c.nodes), "node")
            + (f" and {_plural(len(c.gpus), 'GPU')}" if c.gpus else "")
            + (f", every {' or '.join(every)}" if every else "") + ".")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def audit_rows(report: JobReport) -> list[tuple[str, str]]:
    """Label/value pairs of what a person may want checked: the checks given, the code's
    and the site policy's versions, the thresholds the site overrode and the verdicts
    withheld, with why. The sources, every threshold and the PromQL are in the JSON."""
    a = report.audit
    # readings a recording gave, not the hardware (a test or demo stack's exporters)
    replayed = [("Readings replayed", "not measured: " + ", ".join(
        _clean(r.described) for r in report.usage.replayed))] if report.usage.replayed else []
    if a is None:
        return replayed
    withheld = [v for v in a.verdicts if v.withheld]
    # the two versions side by side: equal both, same judgement (rules_version.py)
    rows = [("Checks", f"{len(a.verdicts) - len(withheld)} of {len(a.verdicts)} given"),
            ("Rules' versions", f"code {a.rules_version}, site policy "
                                f"{a.policy_version or 'none (the defaults)'}")]
    overridden = [f"{n}={format_number(v)}" for n, v, o in a.thresholds if o]
    if overridden:
        rows.append(("Site thresholds", ", ".join(overridden)))
    rows += [(f"Withheld: {v.detector}", _clean(v.why)) for v in withheld]
    failed = [f"{s}: {_clean(r)}" for s, r in a.sources if r != "used"]
    if failed:
        rows.append(("Sources missing", "; ".join(failed)))
    return rows + replayed


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
    return [(n, format_number(v) + (" (overridden)" if o else "")) for n, v, o in a.thresholds]


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
                "were withheld for too little data.")
    return NO_FINDINGS
