"""One archived job as the archive stores it (``webapp.archive.store``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ArchivedJob:
    """One archived job: the report summary (JSON renderer's dict without series) and
    its series downsampled to ``resolution`` seconds."""

    cluster: str
    job_id: str
    submit_time: int
    end_time: int
    user: str | None
    state: str | None
    resolution: float
    summary: dict[str, Any]
    series: dict[str, Any]
    archived_at: float
