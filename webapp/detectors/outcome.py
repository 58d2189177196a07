"""Why a job ended badly: failure with an exit code, time limit, node failure, cancellation."""

from __future__ import annotations

import signal

from webapp.detectors.advice import round_up_time
from webapp.detectors.hardware_fault import node_sentence
from webapp.formatting import format_duration, slurm_time
from webapp.model import Finding, JobReport, Severity, Step
from webapp.states import CANCELLED, COMPLETED, FAILED, NODE_FAIL, PREEMPTED, RUNNING, TIMEOUT
from webapp.thresholds import Thresholds

# What a shell's exit status usually means; 128+N is "killed by signal N".
_EXIT_HINTS = {
    1: "a general error reported by the program itself; its last lines of output say which",
    2: "a usage error (wrong option or a shell builtin misused)",
    126: "a command was found but is not executable (permissions, or a script without #!)",
    127: "a command was not found (a typo, or a missing `module load` / PATH entry)",
}
_SIGNAL_HINTS: dict[int, str] = {  # keyed by signal.Signals, an int
    signal.SIGKILL: "often the out-of-memory killer or a limit",
    signal.SIGSEGV: "a segmentation fault, the program read memory it does not own",
    signal.SIGTERM: "usually Slurm stopping it at a limit or a cancellation",
    signal.SIGABRT: "often a failed assertion or a library error",
    signal.SIGBUS: "e.g. a memory-mapped file that vanished or a full /dev/shm",
}
OOM_SIGNAL = 125  # what Slurm records as the "signal" of an OOM-killed step


def node_failure_message(report: JobReport) -> str:
    """What failed, with when and why where slurmdbd recorded the node's event."""
    events = "; ".join(node_sentence(report, e) for e in report.node_events
                       if e.state != "IDLE")
    if not events:
        return "A node of the job failed; the job did not cause this."
    return f"A node of the job failed: {events}. The job did not cause this."


def parse_exit_code(text: str | None) -> tuple[int, int] | None:
    """(exit status, signal) from sacct's ExitCode.

    1:0
    0:125
    """
    status, sep, sig = (text or "").partition(":")
    try:
        return int(status), int(sig) if sep else 0
    except ValueError:
        return None


def _signal(n: int) -> str:
    try:
        name = f" ({signal.Signals(n).name})"
    except ValueError:
        name = ""
    hint = _SIGNAL_HINTS.get(n)
    return f"signal {n}{name}" + (f": {hint}" if hint else "")


def _explain(status: int, sig: int) -> str:
    """What follows "the batch script ..." for an exit code."""
    if sig == OOM_SIGNAL:
        return "was killed for exceeding its memory limit"
    if sig:
        return f"was killed by {_signal(sig)}"
    if status > 128:
        return f"ended with exit code {status}, i.e. killed by {_signal(status - 128)}"
    hint = _EXIT_HINTS.get(status)
    return f"ended with exit code {status}" + (f": {hint}" if hint else "")


def _where(step: Step | None) -> str:
    if step is None:
        return "the job"
    if step.step_id == "batch":
        return "the batch script"
    if step.name and step.name != step.step_id:
        return f"step {step.step_id} ({step.name})"
    return f"step {step.step_id}"


def _failed_step(steps: tuple[Step, ...]) -> Step | None:
    bad = [s for s in steps if s.step_id != "extern" and s.state not in (COMPLETED, RUNNING)]
    # An srun step that failed is the cause; the batch script usually just passes it on.
    bad.sort(key=lambda s: s.step_id == "batch")
    return bad[0] if bad else None


def _exit_sentence(report: JobReport, step: Step | None) -> str:
    """'Job exit code 1:0; the batch script ended with 1:0.'"""
    text = f"Job exit code {report.exit_code or 'not recorded'}"
    if step is not None:
        text += f"; {_where(step)} ended with {step.exit_code or 'no exit code'}"
    return text + "."


def _cancel_sentence(report: JobReport, by: int | None) -> str:
    ran = format_duration(report.elapsed_seconds) if report.elapsed_seconds else None
    who = f"by uid {by}" if by is not None else "(Slurm did not record by whom)"
    owner = f"; the job's owner is uid {report.uid}" if by is not None and report.uid is not None \
        and by != report.uid else ""
    return f"Cancelled {who}" + (f" after {ran}" if ran else "") + owner + "."


class OutcomeDetector:
    name = "outcome"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if not report.state:
            return ()
        state, by = report.state, report.cancelled_by  # sources split "CANCELLED by N"
        if state == FAILED:
            return (self._failed(report),)
        if state == TIMEOUT:
            return (self._timeout(report, thresholds),)
        if state == NODE_FAIL:
            return (
                Finding(
                    name="node_failure",
                    severity=Severity.WARNING,
                    message=node_failure_message(report),
                    advice=(
                        "Resubmit the job. With `--requeue` (and checkpoints) Slurm restarts "
                        "such jobs by itself."
                    ),
                    evidence_text=f"Nodes of the job: {', '.join(report.nodes) or 'unknown'}.",
                    evidence={"nodes": ",".join(report.nodes) or "n/a"},
                ),
            )
        if state == CANCELLED:
            return (self._cancelled(report, by),)
        if state == PREEMPTED:
            return (
                Finding(
                    name="preempted",
                    severity=Severity.INFO,
                    message="A higher-priority job preempted this one.",
                    advice="Write checkpoints and submit with `--requeue` so it resumes.",
                    evidence_text=f"Preempted after {format_duration(report.elapsed_seconds)}.",
                ),
            )
        return ()

    def _failed(self, report: JobReport) -> Finding:
        step = _failed_step(report.steps)
        code = parse_exit_code(step.exit_code if step else None) or parse_exit_code(
            report.exit_code
        )
        what = _explain(*code) if code else "failed (no exit code recorded)"
        evidence: dict[str, float | int | str] = {"exit_code": report.exit_code or "n/a"}
        if step:
            evidence.update(step=step.step_id, step_exit_code=step.exit_code or "n/a")
        advice = "Read the last lines of the job's output and error files (slurm-<jobid>.out)."
        status, sig = code or (0, 0)
        if status == 127:
            advice += " Check the command's spelling and the module load lines in the script."
        elif signal.SIGKILL in (sig, status - 128) or sig == OOM_SIGNAL:
            advice += " If the memory limit was hit, ask for more with --mem."
        elif signal.SIGSEGV in (sig, status - 128):
            advice += " Rerun a small case under a debugger (gdb) or with bounds checking."
        return Finding(
            name="job_failed",
            severity=Severity.CRITICAL,
            message=f"The job failed: {_where(step)} {what}.",
            advice=advice,
            evidence_text=_exit_sentence(report, step),
            evidence=evidence,
        )

    def _timeout(self, report: JobReport, thresholds: Thresholds) -> Finding:
        limit = report.time_limit_seconds
        if limit:
            longer = slurm_time(round_up_time(limit * thresholds.timeout_growth))
            advice = (
                f"If it was making progress, ask for `--time={longer}` next time; better, write "
                "checkpoints so a job can continue where the previous one stopped."
            )
        else:
            advice = "Ask for a longer --time, or write checkpoints and resubmit."
        return Finding(
            name="job_timeout",
            severity=Severity.CRITICAL,
            message=(
                f"The job reached its time limit ({format_duration(limit)}) and was stopped; "
                "work not saved by then is lost."
            ),
            advice=advice,
            evidence_text=(
                f"Ran {format_duration(report.elapsed_seconds)} of a "
                f"{format_duration(limit)} limit."
            ),
            evidence={
                "elapsed_seconds": report.elapsed_seconds or "n/a",
                "time_limit_seconds": limit or "n/a",
            },
        )

    def _cancelled(self, report: JobReport, by: int | None) -> Finding:
        if by is not None and report.uid is not None and by != report.uid:
            who = f"by uid {by}, not by the job's owner (an administrator?)"
            severity = Severity.WARNING
        elif by is not None and report.uid is not None:
            who, severity = "by its owner", Severity.INFO
        elif by is not None:
            who, severity = f"by uid {by}", Severity.INFO
        else:
            who, severity = "", Severity.INFO
        started = report.start_time is not None or bool(report.elapsed_seconds)
        return Finding(
            name="job_cancelled",
            severity=severity,
            message=f"The job was cancelled {who}".rstrip()
            + ("." if started else " before it started."),
            advice=(
                "Nothing to change if that was intended; otherwise ask the support team who "
                "cancelled it and why."
            ),
            evidence_text=_cancel_sentence(report, by),
            evidence={"cancelled_by": by if by is not None else "n/a"},
        )
