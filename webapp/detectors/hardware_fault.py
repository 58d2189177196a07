"""Trouble that is not the user's: a GPU's hardware or driver errors (NVIDIA XIDs, memory
errors counted by ECC or AMD's RAS) and a node of the job set down, drained or failing
while it ran (slurmdbd's node events, with the reason given).

XIDs the program itself usually causes (NVIDIA's catalog: 13 graphics engine exception,
31 memory page fault, 43 GPU stopped processing; its "restart the application" bucket) are
left out: they are the program's to fix, and the outcome finding speaks of its failure.
Corrected memory errors count only in numbers a card should not reach (``gpu_ecc_corrected``):
ECC corrects a few as a matter of course.
"""

from __future__ import annotations

from datetime import UTC, datetime

from webapp.formatting import format_duration
from webapp.model import Finding, GpuFault, JobReport, NodeEvent, Severity
from webapp.states import NODE_FAIL, failed
from webapp.thresholds import Thresholds

# NVIDIA's XID catalog: codes the application causes, not the card.
PROGRAM_XIDS = frozenset({"13", "31", "43"})
# A few codes' meanings, from the same catalog, for the message; others show as numbers.
XID_MEANINGS = {
    "48": "double-bit ECC error",
    "61": "internal micro-controller breakpoint",
    "62": "internal micro-controller halt",
    "63": "ECC page retirement or row remapping",
    "64": "ECC page retirement or row remapping failure",
    "74": "NVLink error",
    "79": "GPU has fallen off the bus",
    "92": "high single-bit ECC error rate",
    "94": "contained ECC error",
    "95": "uncontained ECC error",
    "119": "GSP RPC timeout",
    "120": "GSP error",
}


def counted(report: JobReport, thresholds: Thresholds) -> list[GpuFault]:
    """The GPU faults worth a finding: hardware XIDs, uncorrected memory errors, and
    corrected ones at ``gpu_ecc_corrected`` or more."""
    out = []
    for f in report.usage.gpu_faults:
        if f.kind == "xid" and f.code in PROGRAM_XIDS:
            continue
        if f.kind == "ecc_corrected" and f.count < thresholds.gpu_ecc_corrected:
            continue
        out.append(f)
    return out


def _at(report: JobReport, when: float | datetime | None) -> str:
    """``at 14:02 UTC (12 min into the job)``; "" when the time is unknown."""
    if when is None:
        return ""
    at = when if isinstance(when, datetime) else datetime.fromtimestamp(when, UTC)
    text = f" at {at.astimezone(UTC).strftime('%H:%M UTC')}"
    if report.start_time and at >= report.start_time:
        text += f" ({format_duration((at - report.start_time).total_seconds())} into the job)"
    return text


def gpu_sentence(report: JobReport, f: GpuFault) -> str:
    if f.kind == "xid":
        meaning = XID_MEANINGS.get(f.code or "")
        what = f"XID {f.code}" + (f" ({meaning})" if meaning else "")
    else:
        kind = "uncorrected" if f.kind == "ecc_uncorrected" else "corrected"
        what = f"{f.count:g} {kind} memory error{'s' if f.count != 1 else ''}"
    return f"GPU {f.gpu} reported {what}{_at(report, f.first_at)}"


def node_sentence(report: JobReport, e: NodeEvent) -> str:
    reason = f' (reason: "{e.reason}")' if e.reason else ""
    return f"node {e.node} was set {e.state}{_at(report, e.start)}{reason}"


class HardwareFaultDetector:
    name = "hardware_fault"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        gpus = counted(report, thresholds)
        # a job ended NODE_FAIL has its node's event in the outcome finding already
        events = [e for e in report.node_events if e.state != "IDLE"
                  and report.state != NODE_FAIL]
        if not gpus and not events:
            return ()
        sentences = [gpu_sentence(report, f) for f in gpus]
        sentences += [node_sentence(report, e) for e in events]
        text = "; ".join(sentences)
        text = text[0].upper() + text[1:]
        nodes = sorted({*(f.gpu.split("/")[0] for f in gpus), *(e.node for e in events)})
        broke = failed(report.state)
        outcome = ("The job's failure may not be yours." if broke else
                   "The job ended well, but check its results: a fault can corrupt them "
                   "silently.")
        return (
            Finding(
                name=self.name,
                severity=Severity.CRITICAL if broke else Severity.WARNING,
                message=f"{text} while the job ran. {outcome}",
                advice=(
                    "Resubmit the job; if it fails again on the same node, tell the support "
                    f"team and quote this job's id. Meanwhile `--exclude={','.join(nodes)}` "
                    f"keeps the next run off {'that node' if len(nodes) == 1 else 'them'}."
                ),
                evidence_text=text + ".",
                evidence={
                    "gpu_faults": ", ".join(
                        f"{f.gpu} {f.kind}{' ' + f.code if f.code else ''} x{f.count:g}"
                        for f in gpus) or "none",
                    "node_events": ", ".join(
                        f"{e.node} {e.state} {e.start.isoformat()}" for e in events) or "none",
                },
            ),
        )
