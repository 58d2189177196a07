"""Why a job ended badly: failure with an exit code, time limit, node failure, cancellation."""

from __future__ import annotations

import signal

from webapp.detectors.advice import round_up_time
from webapp.detectors.thresholds import Thresholds
from webapp.formatting import format_duration, slurm_time
from webapp.model import Finding, JobReport, Severity, Step
from webapp.sources.sacct import parse_state

# What a shell's exit status usually means; 128+N is "killed by signal N".
_EXIT_HINTS = {
    1: "a general error reported by the program itself; its last lines of output say which",
    2: "a usage error (wrong option or a shell builtin misused)",
    126: "a command was found but is not executable (permissions, or a script without #!)",
    127: "a command was not found (a typo, or a missing `module load` / PATH entry)",
}
_SIGNAL_HINTS = {
    signal.SIGKILL: "killed (SIGKILL), often by the out-of-memory killer or a limit",
    signal.SIGSEGV: "a segmentation fault: the program read memory it does not own",
    signal.SIGTERM: "terminated (SIGTERM), usually by Slurm at a limit or a cancellation",
    signal.SIGABRT: "aborted (SIGABRT), often a failed assertion or a library error",
    signal.SIGBUS: "a bus error, e.g. a memory-mapped file that vanished or a full /dev/shm",
}


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


def _explain(status: int, sig: int) -> str:
    if sig:
        if sig == 125:  # what Slurm records for an OOM-killed step
            return "killed for exceeding its memory limit"
        return _SIGNAL_HINTS.get(sig, f"killed by signal {sig}")
    if status > 128 and status - 128 in _SIGNAL_HINTS:
        return _SIGNAL_HINTS[status - 128]
    return _EXIT_HINTS.get(status, f"exit status {status}")


def _failed_step(steps: tuple[Step, ...]) -> Step | None:
    bad = [s for s in steps if s.step_id != "extern" and s.state not in ("COMPLETED", "RUNNING")]
    return bad[0] if bad else None


class OutcomeDetector:
    name = "outcome"

    def detect(self, report: JobReport, t: Thresholds) -> tuple[Finding, ...]:
        if not report.state:
            return ()
        state, by = parse_state(report.state)
        by = report.cancelled_by if report.cancelled_by is not None else by
        if state == "FAILED":
            return (self._failed(report),)
        if state == "TIMEOUT":
            return (self._timeout(report, t),)
        if state == "NODE_FAIL":
            return (
                Finding(
                    name="node_failure",
                    severity=Severity.WARNING,
                    message="A node of the job failed; the job did not cause this.",
                    advice=(
                        "Resubmit the job. With `--requeue` (and checkpoints) Slurm restarts "
                        "such jobs by itself."
                    ),
                    evidence={"nodes": ",".join(report.nodes) or "n/a"},
                ),
            )
        if state == "CANCELLED":
            return (self._cancelled(report, by),)
        if state == "PREEMPTED":
            return (
                Finding(
                    name="preempted",
                    severity=Severity.INFO,
                    message="A higher-priority job preempted this one.",
                    advice="Write checkpoints and submit with `--requeue` so it resumes.",
                ),
            )
        return ()

    def _failed(self, report: JobReport) -> Finding:
        step = _failed_step(report.steps)
        code = parse_exit_code(step.exit_code if step else None) or parse_exit_code(
            report.exit_code
        )
        where = f"step {step.step_id} ({step.name})" if step and step.name else "the job"
        if step and not step.name:
            where = f"step {step.step_id}"
        why = _explain(*code) if code else "no exit code recorded"
        evidence: dict[str, float | int | str] = {"exit_code": report.exit_code or "n/a"}
        if step:
            evidence.update(step=step.step_id, step_exit_code=step.exit_code)
        advice = "Read the last lines of the job's output and error files (slurm-<jobid>.out)."
        if code and code[0] == 127:
            advice += " Check the command's spelling and the module load lines in the script."
        elif code and (code[1] == signal.SIGKILL or code[0] == 128 + signal.SIGKILL):
            advice += " If the memory limit was hit, ask for more with --mem."
        elif code and (code[1] == signal.SIGSEGV or code[0] == 128 + signal.SIGSEGV):
            advice += " Rerun a small case under a debugger (gdb) or with bounds checking."
        return Finding(
            name="job_failed",
            severity=Severity.CRITICAL,
            message=f"The job failed: {where} ended with {why}.",
            advice=advice,
            evidence=evidence,
        )

    def _timeout(self, report: JobReport, t: Thresholds) -> Finding:
        limit = report.time_limit_seconds
        if limit:
            longer = slurm_time(round_up_time(limit * t.timeout_growth))
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
            evidence={"cancelled_by": by if by is not None else "n/a"},
        )
