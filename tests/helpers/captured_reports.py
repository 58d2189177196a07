"""Reports of real stack jobs, as the JSON renderer wrote them (fixtures/reports/, see
fixtures/SOURCES.md), read back into a ``JobReport``: what the golden text reports and
the section-order test render. Not a test module."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from webapp.json_codec import decode
from webapp.model import JobReport

REPORTS = Path(__file__).resolve().parents[2] / "fixtures" / "reports"
# The labelled jobs captured (tests/helpers/labelled_jobs.py): name -> file.
CAPTURED = {p.stem.split("-", 1)[1].rsplit("-", 1)[0]: p
            for p in sorted(REPORTS.glob("stack-*.json"))}


def captured(name: str, note_after: float = 600.0) -> JobReport:
    """The labelled stack job ``name`` (``busy``, ``gpu-untouched``, ...) as captured; its
    wait is long past ``note_after`` seconds (the captures predate ``long_wait``)."""
    report = decode(json.loads(CAPTURED[name].read_text()))
    q = report.queue
    if q is not None:
        q = dataclasses.replace(q, long_wait=(q.pending_seconds or 0) > note_after)
    return dataclasses.replace(report, queue=q)
