"""A job the sync fails on (any error) is counted and retried; the jobs after it, other
users' included, are archived in the same run; the watermark waits for the failed job until
the retries are over. A real SQLite archive; the sources are a stand-in that raises for one
job (the stack test runs the real sources)."""

from __future__ import annotations

import io

import pytest

from tests.helpers.reports import sample_report
from webapp.archive.store import Archive
from webapp.cli.sync import exit_status, print_result
from webapp.renderers.pdf import PdfError
from webapp.settings import Settings
from webapp.sources.ended import EndedJob
from webapp.sync import run as sync_run
from webapp.sync.options import SyncOptions
from webapp.sync.run import RETRY_ATTEMPTS, RETRY_SECONDS, Syncer

T0 = 1_790_000_000
BAD = EndedJob(T0 + 100, "700", T0 - 50, "demo")  # alice's job that cannot be processed
NEXT = EndedJob(T0 + 200, "701", T0 - 40, "demo")  # bob's, ended after it
LATER = EndedJob(T0 + 300, "702", T0 - 30, "demo")  # ends between two runs
ARCHIVE_ONLY = SyncOptions(direction="archive")


class Ended:
    """The accounting view's answer to the sync: the jobs ended so far."""

    def __init__(self, jobs: list[EndedJob]) -> None:
        self.jobs = jobs

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        return sorted(j for j in self.jobs if since <= j.end_time <= until)[:limit]


class Service:
    """Builds each job's report; the jobs in ``failing`` raise what a renderer raised."""

    def __init__(self, jobs: list[EndedJob], failing: set[str]) -> None:
        self.accounting = Ended(jobs)
        self.failing = failing
        self.built: list[str] = []

    def build(self, job_id: str, archive_fallback: bool = True):  # noqa: ANN201
        self.built.append(job_id)
        if job_id in self.failing:
            raise PdfError("pdflatex failed: ! Unable to read an entire line")
        return sample_report(job_id, user="bob" if job_id != BAD.job_id else "alice")


@pytest.fixture
def syncer(tmp_path, monkeypatch):
    # The bulk prefetch reads live sources; this service answers each job itself.
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    settings = Settings.from_env({"JOBREPORT_CLUSTER": "demo",
                                  "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
                                  "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})
    now = [float(T0 + 400)]
    archive = Archive(settings.archive_url, clock=lambda: now[0])
    service = Service([BAD, NEXT], failing={BAD.job_id})
    s = Syncer(settings, service=service, archive=archive)  # type: ignore[arg-type]
    s.now = now  # type: ignore[attr-defined]
    yield s
    s.close()


def run(syncer: Syncer, opts: SyncOptions = ARCHIVE_ONLY):  # noqa: ANN201
    return syncer.run(opts, clock=lambda: syncer.now[0])  # type: ignore[attr-defined]


def test_a_failing_job_does_not_stop_the_next_one(syncer):
    result = run(syncer)
    assert syncer.archive.get("demo", NEXT.job_id) is not None  # bob's job, same run
    assert syncer.archive.get("demo", BAD.job_id) is None
    assert result.outcomes["archive"] == {"failed": 1, "archived": 1}
    assert result.error is None
    [failure] = result.failed
    assert (failure.job_id, failure.streams, failure.attempts, failure.given_up) == (
        BAD.job_id, ("archive",), 1, False)
    assert "PdfError: pdflatex failed" in failure.error
    # The watermark waits before the failed job, so the next run sees it again.
    assert syncer.archive.watermark("demo", "archive") is None
    assert syncer.archive.failures("demo", "archive") == [
        (BAD.job_id, BAD.submit_time, 1, failure.error)]


def test_the_failed_job_is_retried_and_the_jobs_after_it_are_not_done_twice(syncer):
    run(syncer)
    syncer.service.accounting.jobs.append(LATER)
    syncer.now[0] += 60
    result = run(syncer)
    assert syncer.service.built == ["700", "701", "700", "702"]
    assert result.outcomes["archive"] == {"failed": 1, "archived": 1}
    assert result.failed[0].attempts == 2
    syncer.service.failing.clear()  # fixed (say, a renderer upgraded)
    syncer.now[0] += 60
    result = run(syncer)
    assert result.outcomes["archive"] == {"archived": 1} and not result.failed
    assert syncer.archive.get("demo", BAD.job_id) is not None
    assert syncer.archive.failures("demo", "archive") == []
    assert syncer.archive.watermark("demo", "archive") == BAD.end_time
    syncer.now[0] += 60
    assert run(syncer).selected == []  # 701 and 702 stay done


def test_after_the_retries_the_job_is_logged_as_failed_and_the_watermark_moves_on(syncer):
    for _ in range(RETRY_ATTEMPTS):
        result = run(syncer)
        assert not result.failed[0].given_up  # not yet: RETRY_SECONDS have not passed
        syncer.now[0] += 60
    assert syncer.archive.watermark("demo", "archive") is None
    syncer.now[0] += RETRY_SECONDS
    result = run(syncer)
    assert result.failed[0].given_up and result.failed[0].attempts == RETRY_ATTEMPTS + 1
    assert (BAD.job_id, BAD.submit_time, "failed") in syncer.archive.outcomes("demo", "archive")
    assert syncer.archive.failures("demo", "archive") == []
    # Past the failed job (701, already done, is not selected again to move it further).
    assert syncer.archive.watermark("demo", "archive") == BAD.end_time
    syncer.now[0] += 60
    assert run(syncer).selected == []  # given up: no run tries it again by itself
    # By hand it is tried again (and fails again here), the watermark left alone.
    by_hand = syncer._process  # noqa: SLF001
    with pytest.raises(PdfError):
        by_hand(BAD, ["archive"], SyncOptions(job_id=BAD.job_id), None, frozenset(), result)


def test_each_stream_holds_only_its_own_watermark(syncer, monkeypatch, fast_pdf):
    """The archive stream succeeded before the email stream failed: only email retries."""
    import webapp.sync.run

    real = webapp.sync.run.queue_owner_email

    def email(report, job_id, *args):  # noqa: ANN001, ANN202
        if job_id == NEXT.job_id:
            raise UnicodeEncodeError("ascii", "é", 0, 1, "a header")
        return real(report, job_id, *args)

    monkeypatch.setattr(webapp.sync.run, "queue_owner_email", email)
    syncer.service.failing.clear()
    result = run(syncer, SyncOptions(direction="both", no_deliver=True))
    assert result.outcomes["archive"] == {"archived": 2}
    assert result.outcomes["email"]["failed"] == 1
    assert result.failed[0].streams == ("email",)
    assert syncer.archive.watermark("demo", "archive") == NEXT.end_time
    assert syncer.archive.watermark("demo", "email") == BAD.end_time


def test_the_summary_counts_the_failures_and_the_run_exits_non_zero(syncer):
    result = run(syncer)
    out = io.StringIO()
    print_result(result, dry_run=False, out=out)
    text = out.getvalue()
    assert "archive: 1 archived, 1 failed; watermark none" in text
    assert ("failed: job 700 (archive): PdfError: pdflatex failed: ! Unable to read an entire"
            " line; failed run 1; the next run tries it again") in text
    assert text.rstrip().endswith("2 ended jobs selected (from accounting), 1 failed")
    assert exit_status(result) == 1
    syncer.service.failing.clear()
    syncer.now[0] += 60
    assert exit_status(run(syncer)) == 0
