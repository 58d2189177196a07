"""`jobreport outbox --status`: the outbox's state as staff read it (text) or a monitor
does (``--format json``); also written as metrics when JOBREPORT_METRICS_TEXTFILE_DIR is
set. The figures: ``webapp.mail.outbox_state``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from webapp.formatting import format_duration
from webapp.mail.outbox_state import STATUSES, OutboxState, Problem

ERROR_SHOWN = 200  # characters of an error on one line; the JSON has it whole


def _when(ts: float | None) -> str:
    if ts is None:
        return "time unknown"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _error(text: str) -> str:
    return " ".join(text.split())[:ERROR_SHOWN]


def _problem(p: Problem) -> str:
    return (f"#{p.id} {p.kind} to {p.to_addr} ({p.status}, {p.attempts} attempt(s)), "
            f"{_when(p.at)}: {_error(p.error)}")


def status_text(state: OutboxState, path: str) -> str:
    counts = ", ".join(f"{state.counts.get(s, 0)} {s}" for s in STATUSES)
    age = state.oldest_unsent_age
    oldest = ("none" if age is None
              else f"{format_duration(age)} old (queued {_when(state.oldest_unsent)})")
    retry = " (`jobreport outbox --retry` tries them again)" if state.given_up else ""
    lines = [f"outbox {path}: {counts}",
             f"oldest unsent: {oldest}",
             "last error: " + (_problem(state.last_error) if state.last_error else "none"),
             f"given up: {len(state.given_up)}{retry}"]
    lines += [f"  {_problem(p)}" for p in state.given_up]
    return "\n".join(lines) + "\n"


def status_json(state: OutboxState, path: str) -> str:
    return json.dumps({"outbox": path, **state.as_dict()}, indent=2, ensure_ascii=False) + "\n"
