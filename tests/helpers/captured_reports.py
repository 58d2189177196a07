"""Reports of real stack jobs, as the JSON renderer wrote them (fixtures/reports/, see
fixtures/SOURCES.md), read back into a ``JobReport``: what the golden text reports and
the section-order test render. Not a test module."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from webapp.archive.codec import report_from_record
from webapp.model import JobReport, PendingReason, QueueContext

REPORTS = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
# The labelled jobs captured (tests/helpers/labelled_jobs.py): name -> file.
CAPTURED = {p.stem.split("-", 1)[1].rsplit("-", 1)[0]: p
            for p in sorted(REPORTS.glob("stack-*.json"))}


def _queue(q: dict[str, Any] | None, note_after: float) -> QueueContext | None:
    """The JSON ``queue`` object back as a QueueContext (the archive keeps none)."""
    if q is None:
        return None
    at = q["at_submit"]
    return QueueContext(
        partition=q["partition"], pending_seconds=q["pending_seconds"],
        reasons=tuple(PendingReason(r["reason"], r["seconds"],
                                    datetime.fromisoformat(r["first_seen"]))
                      for r in q["reasons"]),
        cpus_idle=at["cpus_idle"], cpus_total=at["cpus_total"],
        gpus_available=tuple(at["gpus_available"].items()), queue_length=at["pending_jobs"],
        gpus_available_max=tuple(q["gpus_available_max"].items()),
        requested_gpu_types=tuple(q["requested_gpu_types"]),
        usual_time_limit_seconds=q["usual_time_limit_seconds"],
        usual_time_limit_jobs=q["usual_time_limit_jobs"], seen=q["seen"],
        long_wait=(q["pending_seconds"] or 0) > note_after)


def captured(name: str, note_after: float = 600.0) -> JobReport:
    """The labelled stack job ``name`` (``busy``, ``gpu-untouched``, ...) as captured."""
    data = json.loads(CAPTURED[name].read_text())
    report = report_from_record(data, data.get("series") or {})
    return dataclasses.replace(report, queue=_queue(data.get("queue"), note_after),
                               notes=tuple(data.get("notes") or ()))
