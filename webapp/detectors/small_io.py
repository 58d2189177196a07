"""I/O done in many tiny requests."""

from __future__ import annotations

from webapp.formatting import format_bytes
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds


def _small(bytes_: float | None, calls: float | None, thresholds: Thresholds) -> float | None:
    """Mean request size when there were many calls and they were small."""
    if not calls or bytes_ is None or calls < thresholds.io_many_syscalls:
        return None
    mean = bytes_ / calls
    return mean if mean < thresholds.io_small_request_bytes else None


class SmallIoDetector:
    name = "small_io"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        u = report.usage
        small = {
            kind: mean
            for kind, mean in (
                ("read", _small(u.read_bytes, u.read_syscalls, thresholds)),
                ("write", _small(u.write_bytes, u.write_syscalls, thresholds)),
            )
            if mean is not None
        }
        if not small:
            return ()
        per_kind = {"read": u.read_syscalls or 0, "write": u.write_syscalls or 0}
        calls = sum(per_kind[k] for k in small)
        sizes = ", ".join(f"{k}s of {format_bytes(m)}" for k, m in small.items())
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=f"The job made {calls:,.0f} small I/O calls (on average {sizes}).",
                advice=(
                    "Buffer I/O: read and write in blocks of 1 MiB or more (e.g. Python "
                    "open(..., buffering=1 << 20), fewer flush() calls), and keep many small "
                    "files in one archive."
                ),
                evidence_text=" and ".join(
                    f"{per_kind[k]:,.0f} {k}s of {format_bytes(m)}" for k, m in small.items()
                ) + " on average.",
                evidence={f"{k}_bytes_per_call": round(m, 1) for k, m in small.items()},
            ),
        )
