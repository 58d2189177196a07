"""What the sync keeps beside its log for a site to watch and for its own waits: the last
run of each cluster and stream, the jobs being retried and those given up on, and when a
run first met slurmdbd's stand-in record of a job (revision 0009)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from webapp.archive.db import Database

GIVEN_UP = "failed"  # the sync log's outcome of a job given up on


@dataclass(frozen=True)
class LastRun:
    started_at: float
    finished_at: float
    source: str  # accounting, or sacct standing in for it
    selected: int
    outcomes: dict[str, int]
    error: str | None  # what stopped it; None: it went through


@dataclass(frozen=True)
class Failing:
    """A job failed on and still retried (``sync_failures``)."""

    job_id: str
    submit_time: int
    end_time: int
    attempts: int
    first_at: float
    last_at: float
    error: str


@dataclass(frozen=True)
class GivenUp:
    job_id: str
    submit_time: int
    end_time: int
    at: float


class SyncState:
    """The sync's state for ``--status`` and its metrics, in the archive's database."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    # -- runs -------------------------------------------------------------------
    def record_run(self, cluster: str, stream: str, run: LastRun) -> None:
        """Keep ``run`` as the stream's last (one row per cluster and stream)."""
        values = (run.started_at, run.finished_at, run.source, run.selected,
                  json.dumps(dict(sorted(run.outcomes.items()))), run.error)
        with self.db.transaction():
            self.db.execute("DELETE FROM sync_runs WHERE cluster = ? AND stream = ?",
                            (cluster, stream))
            self.db.execute("INSERT INTO sync_runs (cluster, stream, started_at, finished_at,"
                            " source, selected, outcomes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (cluster, stream, *values))

    def last_run(self, cluster: str, stream: str) -> LastRun | None:
        rows = self.db.query("SELECT started_at, finished_at, source, selected, outcomes, error"
                             " FROM sync_runs WHERE cluster = ? AND stream = ?",
                             (cluster, stream))
        if not rows:
            return None
        started, finished, source, selected, outcomes, error = rows[0]
        return LastRun(float(started), float(finished), source, int(selected),
                       {k: int(v) for k, v in json.loads(outcomes).items()}, error)

    def watermark(self, cluster: str, stream: str) -> tuple[int, float] | None:
        """(the watermark, when it last moved)."""
        rows = self.db.query("SELECT end_time, updated_at FROM sync_watermarks WHERE"
                             " cluster = ? AND stream = ?", (cluster, stream))
        return (int(rows[0][0]), float(rows[0][1])) if rows else None

    # -- jobs failing, jobs given up ----------------------------------------------
    def failing(self, cluster: str, stream: str) -> list[Failing]:
        rows = self.db.query("SELECT job_id, submit_time, end_time, attempts, first_at,"
                             " last_at, error FROM sync_failures WHERE cluster = ? AND"
                             " stream = ? ORDER BY end_time, job_id", (cluster, stream))
        return [Failing(j, int(s), int(e), int(n), float(f), float(la), err)
                for j, s, e, n, f, la, err in rows]

    def given_up_count(self, cluster: str, stream: str) -> int:
        """Jobs given up on still in the sync log (it is kept as long as the archive)."""
        return int(self.db.query("SELECT COUNT(*) FROM sync_log WHERE cluster = ? AND"
                                 " stream = ? AND outcome = ?",
                                 (cluster, stream, GIVEN_UP))[0][0])

    def given_up(self, cluster: str, stream: str, limit: int = 20) -> list[GivenUp]:
        """The latest ``limit`` jobs given up on, newest end first (sync_log_outcome)."""
        rows = self.db.query("SELECT job_id, submit_time, end_time, at FROM sync_log WHERE"  # noqa: S608
                             " cluster = ? AND stream = ? AND outcome = ?"
                             f" ORDER BY end_time DESC, job_id LIMIT {int(limit)}",
                             (cluster, stream, GIVEN_UP))
        return [GivenUp(j, int(s), int(e), float(at)) for j, s, e, at in rows]

    def clusters(self) -> list[str]:
        """Every cluster the sync has a watermark or a run of, sorted."""
        rows = self.db.query("SELECT cluster FROM sync_watermarks UNION"
                             " SELECT cluster FROM sync_runs")
        return sorted({r[0] for r in rows})

    # -- slurmdbd's stand-in records --------------------------------------------
    def stand_in_seen(self, cluster: str, job_id: str, submit_time: int,
                      end_time: int) -> float:
        """When a run first met the job as a stand-in record (now, the first time)."""
        self.db.execute(f"{self.db.dialect.insert_ignore} INTO sync_stand_ins (cluster, job_id,"
                        " submit_time, end_time, first_seen) VALUES (?, ?, ?, ?, ?)",
                        (cluster, job_id, submit_time, end_time, self.clock()))
        rows = self.db.query("SELECT first_seen FROM sync_stand_ins WHERE cluster = ? AND"
                             " job_id = ? AND submit_time = ?", (cluster, job_id, submit_time))
        return float(rows[0][0])

    def forget_stand_in(self, cluster: str, job_id: str, submit_time: int) -> None:
        self.db.execute("DELETE FROM sync_stand_ins WHERE cluster = ? AND job_id = ? AND"
                        " submit_time = ?", (cluster, job_id, submit_time))

