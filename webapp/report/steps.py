"""The steps table: one line per srun step and per het component, seff's figures each.

A line's CPU efficiency is seff's formula on that line alone (TotalCPU / (Elapsed x
AllocCPUS)); its memory peak is ``peak.step_peak`` (MaxRSS x tasks per node), the same
estimate the job's sacct peak uses. The ``extern`` step (Slurm's own, holding no user
work) is left out. A job with only its batch step gets no table: the summary says it all.
"""

from __future__ import annotations

from webapp.model import JobReport, Step, StepLine, cpu_efficiency
from webapp.report.peak import step_peak

HIDDEN_STEPS = frozenset({"extern"})


def _line(step: Step, kind: str) -> StepLine:
    return StepLine(
        step_id=step.step_id,
        kind=kind,
        name=step.name,
        state=step.state,
        exit_code=step.exit_code,
        elapsed_seconds=step.elapsed_seconds,
        cpus=step.cpus,
        cpu_seconds=step.total_cpu_seconds,
        cpu_efficiency=cpu_efficiency(step.total_cpu_seconds, step.elapsed_seconds, step.cpus),
        memory_peak_bytes=step_peak(step),
        tasks=step.tasks,
    )


def step_lines(report: JobReport) -> tuple[StepLine, ...]:
    """The lines in sacct's order, het components first; () when there is one line or none."""
    lines = [_line(c, "component") for c in report.components]
    lines += [_line(s, "step") for s in report.steps if s.step_id not in HIDDEN_STEPS]
    return tuple(lines) if len(lines) > 1 else ()

