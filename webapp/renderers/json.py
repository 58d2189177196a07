"""JSON renderer: the documented, stable schema of ``webapp.json_codec`` (``SCHEMA_VERSION``;
see the README), which the archive stores too. Series are at the resolution the report
was built with (``plot`` by default, ``full`` on request).

Keys follow the sections' one order (``sections.SECTIONS``): the job, its headline and
verdict (what every other format opens with; derived, so the archive needs neither), the
gaps, the key figures, the findings, the ``#SBATCH`` block, then the details (series,
steps, array, queue, waste) and ``coverage``, which holds the audit, last.
"""

from __future__ import annotations

import json
from typing import Any

from webapp.json_codec import SCHEMA_VERSION, encode
from webapp.model import JobReport
from webapp.renderers.wording import headline, verdict

__all__ = ["SCHEMA_VERSION", "render", "to_dict"]

# After the job's identity and times: the headline, then these, then the key figures.
_AFTER_JOB = "time_limit_kind"
_NOTES = ("gaps", "notes")
# After the key figures: what a person needs next, then the details, the audit last.
_AFTER_FIGURES = ("findings", "sizing", "series", "memory_nodes", "steps", "step_lines",
                  "array", "queue", "billing", "waste", "coverage")


def to_dict(report: JobReport, include_series: bool = True) -> dict[str, Any]:
    """The report as plain data (what ``render`` serialises): ``webapp.json_codec``'s shape,
    the one the archive stores, in the sections' order, with the headline."""
    data = encode(report, include_series)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _NOTES or key in _AFTER_FIGURES:
            continue
        out[key] = value
        if key == _AFTER_JOB:
            out["headline"] = headline(report)
            out["verdict"] = verdict(report)
            out |= {k: data[k] for k in _NOTES if k in data}
    return out | {k: data[k] for k in _AFTER_FIGURES if k in data}


def render(report: JobReport, pretty: bool = False) -> str:
    """Compact JSON by default (json's C encoder; indent=2 would keep it out, ~3x slower
    and ~2x larger); ``pretty`` indents it for people."""
    if pretty:
        return json.dumps(to_dict(report), indent=2) + "\n"
    return json.dumps(to_dict(report), separators=(",", ":")) + "\n"
