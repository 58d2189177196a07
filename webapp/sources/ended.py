"""Which jobs ended in a time window, oldest end first: what ``jobreport sync`` walks.

Read from the accounting view (``AccountingSource.ended_between``); when that is down,
from ``sacct --state=<final states> --starttime ... --endtime ...`` (``SacctEnded``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from webapp.model import JobId, SourceUnavailable
from webapp.sources.sacct import run_sacct
from webapp.sources.sacct_records import delimiter_argv, new_delimiter, split_records
from webapp.states import sacct_final_states

# The states a job can end in, as sacct --state takes them.
FINAL_STATES = sacct_final_states()


@dataclass(frozen=True, order=True)
class EndedJob:
    """One ended job, ordered by end time: the sync's unit of work and its key."""

    end_time: int  # Unix seconds
    job_id: str  # 123, array task 123_4, het component 123+1
    submit_time: int
    cluster: str

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_id, self.submit_time)


def parse_ended(text: str, cluster: str, since: int, until: int,
                delimiter: str = "|") -> list[EndedJob]:
    """``sacct -X -P -n -o JobID,Submit,End`` lines (times as Unix seconds) -> jobs whose
    end lies in [since, until], oldest end first.

        123|1763816596|1763816616
        124_2|1763816597|Unknown
    """
    out = []
    for parts in split_records(text, 3, delimiter):
        if not parts[1].isdigit() or not parts[2].isdigit():
            continue
        job_id, submit, end = parts[0], int(parts[1]), int(parts[2])
        try:
            JobId.parse(job_id)  # "123_[1-4]" is a pending array, not an ended job
        except ValueError:
            continue
        if since <= end <= until:
            out.append(EndedJob(end, job_id, submit, cluster))
    return sorted(out)


def _local(ts: int) -> str:
    """sacct reads -S/-E in the local zone (it prints Unix seconds, but does not parse them)."""
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%S")  # noqa: DTZ006


class SacctEnded:
    """Ended jobs from sacct: the fallback when the accounting view cannot be read."""

    name = "sacct"

    def __init__(self, sacct_path: str, cluster: str, timeout: float = 30.0,
                 runner: Callable[[list[str]], str] | None = None) -> None:
        self.sacct_path = sacct_path
        self.cluster = cluster
        self._runner = runner or (lambda argv: run_sacct(argv, timeout))

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        # With --state, -S/-E select jobs that were in those states within the window:
        # every job that ended in it, plus some that ended later (filtered by parse_ended).
        d = new_delimiter()
        argv = [self.sacct_path, "--allusers", "-X", *delimiter_argv(d),
                "--clusters", self.cluster, "--state", ",".join(FINAL_STATES),
                "--starttime", _local(since), "--endtime", _local(until + 1),
                "--format", "JobID,Submit,End"]  # fmt: skip
        try:
            text = self._runner(argv)
        except OSError as exc:
            raise SourceUnavailable(self.name, str(exc)) from None
        return parse_ended(text, self.cluster, since, until, d)[:limit]
