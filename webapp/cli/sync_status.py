"""`jobreport sync --status`: where the sync stands, per cluster and stream, as staff read
it (text) or a monitor does (JSON). Reads the archive only."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TextIO

from webapp.archive.store import Archive
from webapp.archive.sync_state import SyncState
from webapp.settings import Settings
from webapp.sync.run import ERROR_SHOWN
from webapp.sync.status import StreamStatus, read_status


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(seconds: float) -> str:
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _error(text: str) -> str:
    return " ".join(text.split())[:ERROR_SHOWN]


def status_text(statuses: list[StreamStatus]) -> str:
    lines = []
    for s in statuses:
        head = f"{s.cluster} {s.stream}:"
        if s.watermark is None:
            lines.append(f"{head} no watermark (no job processed yet)")
        else:
            moved = s.watermark_moved_at
            lines.append(f"{head} watermark {_when(s.watermark)}, {_age(s.watermark_age or 0)}"
                         f" behind" + (f" (moved {_age(s.now - moved)} ago)" if moved else ""))
        run = s.last_run
        if run is None:
            lines.append("  last run: none recorded")
        else:
            done = ", ".join(f"{n} {k}" for k, n in sorted(run.outcomes.items())) or "nothing"
            lines.append(f"  last run: {_when(run.finished_at)} ({_age(s.now - run.finished_at)}"
                         f" ago, {run.finished_at - run.started_at:.0f} s, from {run.source}):"
                         f" {run.selected} selected; {done}")
            if run.error:
                lines.append(f"  stopped at {_error(run.error)}")
        for f in s.failing:
            lines.append(f"  failing: job {f.job_id} (ended {_when(f.end_time)}), {f.attempts}"
                         f" failed runs since {_when(f.first_at)}, last {_when(f.last_at)}:"
                         f" {_error(f.error)}")
        if s.given_up:
            latest = ", ".join(f"{g.job_id} (ended {_when(g.end_time)})"
                               for g in s.given_up_latest[:5])
            lines.append(f"  given up: {s.given_up} jobs (`jobreport sync --jobid ID` tries one"
                         f" again); latest: {latest}")
    return "\n".join(lines) + "\n"


def status_json(statuses: list[StreamStatus]) -> str:
    out: list[dict[str, Any]] = []
    for s in statuses:
        item = asdict(s)
        item["watermark_age_seconds"] = s.watermark_age
        out.append(item)
    return json.dumps(out, indent=2, sort_keys=True) + "\n"


def print_status(settings: Settings, cluster: str | None, fmt: str,
                 out: TextIO = sys.stdout) -> int:
    """Every served cluster's streams (``cluster``: that one's)."""
    clusters = [cluster] if cluster else list(settings.cluster_names)
    with Archive(settings.archive_url) as archive:
        statuses = read_status(SyncState(archive.db), clusters, time.time())
    out.write(status_json(statuses) if fmt == "json" else status_text(statuses))
    return 0
