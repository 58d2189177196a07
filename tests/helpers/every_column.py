"""The real sacct source as the report used it before ``job_figures``: ``job`` with
AllocTRES, for comparing figures and timing the two ways."""

from __future__ import annotations

from webapp.model import JobId, SacctJob
from webapp.sources.sacct import SacctSource


class EveryColumn:
    """``source`` without ``job_figures``: the report reads ``job`` (AllocTRES included)."""

    def __init__(self, source: SacctSource) -> None:
        self.source = source

    def job(self, job_id: JobId) -> SacctJob:
        return self.source.job(job_id)

    def array(self, job_id: JobId) -> tuple[SacctJob, ...]:
        return self.source.array(job_id)
