"""The steps table, waste and coverage/audit of an archived summary, read back.

The archive stores the JSON renderer's fields; a report rebuilt from it shows the same
sections as the live one did (summaries written before these fields existed have none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.model import (
    Audit,
    Coverage,
    SeriesCoverage,
    StepLine,
    Verdict,
    Waste,
    WasteItem,
)


def step_lines(summary: Mapping[str, Any]) -> tuple[StepLine, ...]:
    return tuple(StepLine(**x) for x in summary.get("step_lines") or ())


def waste(summary: Mapping[str, Any]) -> Waste | None:
    w = summary.get("waste")
    if not w:
        return None
    items = tuple(WasteItem(**i) for i in w["items"])
    return Waste(items, w["billing_per_hour"], w["weights_source"],
                 w.get("core_hours_per_billing_unit"))


def _parts(parts: list[Mapping[str, Any]]) -> tuple[SeriesCoverage, ...]:
    return tuple(SeriesCoverage(p["label"], p["samples"], p["interval_seconds"],
                                p["covered_seconds"], p["fraction"],
                                tuple(tuple(g) for g in p["gaps"])) for p in parts)


def coverage(summary: Mapping[str, Any]) -> tuple[Coverage | None, Audit | None]:
    c = summary.get("coverage")
    if not c:
        return None, None
    cov = Coverage(_parts(c["nodes"]), _parts(c["gpus"]),
                   tuple((q["name"], q["promql"]) for q in c["queries"]))
    audit = None
    if c.get("rules_version"):
        audit = Audit(
            sources=tuple((s["source"], s["status"]) for s in c["sources"]),
            thresholds=tuple((t["name"], t["value"], t["overridden"]) for t in c["thresholds"]),
            rules_version=c["rules_version"],
            min_coverage=c["min_coverage"],
            verdicts=tuple(Verdict(v["detector"], v["rests_on"], v["withheld"], v["why"])
                           for v in c["verdicts"]),
        )
    return (cov if cov.nodes or cov.gpus else None), audit
