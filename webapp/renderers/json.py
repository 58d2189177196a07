"""JSON renderer: the documented, stable schema of ``webapp.schema`` (``SCHEMA_VERSION``;
see the README), which the archive stores too. Series are at the resolution the report
was built with (``plot`` by default, ``full`` on request).
"""

from __future__ import annotations

import json
from typing import Any

from webapp.model import JobReport
from webapp.schema import SCHEMA_VERSION, encode

__all__ = ["SCHEMA_VERSION", "render", "to_dict"]


def to_dict(report: JobReport, include_series: bool = True) -> dict[str, Any]:
    """The report as plain data (what ``render`` serialises): ``webapp.schema``'s shape,
    the one the archive stores."""
    return encode(report, include_series)


def render(report: JobReport, pretty: bool = False) -> str:
    """Compact JSON by default (json's C encoder; indent=2 would keep it out, ~3x slower
    and ~2x larger); ``pretty`` indents it for people."""
    if pretty:
        return json.dumps(to_dict(report), indent=2) + "\n"
    return json.dumps(to_dict(report), separators=(",", ":")) + "\n"
