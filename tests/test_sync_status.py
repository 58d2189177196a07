"""`jobreport sync --status` and the sync's metrics file: per cluster and stream the
watermark and its age, the last run (when, from which source, what it did, why it
stopped), the jobs failing with their last error and the jobs given up, as text, JSON
and node_exporter textfile metrics."""

from __future__ import annotations

import io
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.test_sync_lookback import T0, Cluster, row
from webapp.archive.sync_state import SyncState
from webapp.cli.sync_status import print_status, status_json, status_text
from webapp.model import SourceUnavailable
from webapp.renderers.pdf import PdfError
from webapp.sync import run as sync_run
from webapp.sync.options import SyncOptions
from webapp.sync.run import RETRY_ATTEMPTS, RETRY_SECONDS
from webapp.sync.status import read_status

ARCHIVE = SyncOptions(direction="archive")


@pytest.fixture
def cluster(tmp_path, monkeypatch, fast_pdf):
    monkeypatch.setattr(sync_run, "prefetch", lambda service, jobs: service)
    c = Cluster(tmp_path, JOBREPORT_METRICS_TEXTFILE_DIR=str(tmp_path / "textfiles"))
    (tmp_path / "textfiles").mkdir()
    failing: set[str] = set()
    build = c.service.build

    def failing_build(job_id: str, archive_fallback: bool = True):  # noqa: ANN202
        if job_id in failing:
            raise PdfError("pdflatex failed: ! Unable to read an entire line")
        return build(job_id, archive_fallback)

    c.service.build = failing_build  # type: ignore[method-assign]
    c.failing = failing  # type: ignore[attr-defined]
    c.textfile = tmp_path / "textfiles" / "jobreport_sync_demo.prom"  # type: ignore[attr-defined]
    yield c
    c.syncer.close()


def samples(path) -> dict[tuple[str, tuple], float]:  # noqa: ANN001
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def status(cluster: Cluster):  # noqa: ANN201
    return {s.stream: s for s in read_status(SyncState(cluster.archive.db), ["demo"],
                                             cluster.now[0])}


def test_the_last_run_the_watermark_and_a_failing_job(cluster):
    cluster.arrive(row(3001, T0 + 100), row(3002, T0 + 200))
    cluster.failing.add("3001")
    cluster.now[0] = T0 + 200
    cluster.run(ARCHIVE)
    s = status(cluster)["archive"]
    assert s.watermark == T0 - 3600  # held before the failing job
    assert s.watermark_age == 200 + 60 + 3600
    assert (s.last_run.selected, s.last_run.outcomes, s.last_run.error, s.last_run.source) == (
        2, {"archived": 1, "failed": 1}, None, "accounting")
    assert s.last_run.finished_at == T0 + 260
    [f] = s.failing
    assert (f.job_id, f.attempts) == ("3001", 1) and "PdfError: pdflatex" in f.error
    assert status(cluster)["email"].last_run is None  # the email stream did not run
    text = status_text(list(status(cluster).values()))
    assert "demo archive: watermark " in text and "64 min behind (moved 4 min ago)" in text
    assert "last run: " in text and "2 selected; 1 archived, 1 failed" in text
    assert "failing: job 3001 (ended " in text and "1 failed runs since" in text
    assert "demo email: watermark " in text and "last run: none recorded" in text


def test_a_job_given_up_is_counted_and_listed(cluster):
    cluster.arrive(row(3001, T0 + 100))
    cluster.failing.add("3001")
    cluster.now[0] = T0 + 100
    for _ in range(RETRY_ATTEMPTS):
        cluster.run(ARCHIVE)
    cluster.run(ARCHIVE, after=RETRY_SECONDS)
    s = status(cluster)["archive"]
    assert s.failing == [] and s.given_up == 1
    assert [g.job_id for g in s.given_up_latest] == ["3001"]
    assert "given up: 1 jobs" in status_text([s])
    metrics = samples(cluster.textfile)
    assert metrics[("jobreport_sync_given_up_jobs",
                    (("cluster", "demo"), ("stream", "archive")))] == 1
    assert metrics[("jobreport_sync_failing_jobs",
                    (("cluster", "demo"), ("stream", "archive")))] == 0


def test_a_run_stopped_by_the_source_says_so(cluster, monkeypatch):
    cluster.arrive(row(3001, T0 + 100))
    cluster.now[0] = T0 + 100

    def down(job_id: str, archive_fallback: bool = True):  # noqa: ANN202
        raise SourceUnavailable("accounting", "accounting database unreachable")

    monkeypatch.setattr(cluster.service, "build", down)
    result = cluster.run(ARCHIVE)
    assert result.error and "unreachable" in result.error
    s = status(cluster)["archive"]
    assert s.last_run.error == result.error and s.last_run.outcomes == {}
    assert "stopped at job 3001: " in status_text([s])
    key = (("cluster", "demo"), ("stream", "archive"))
    assert samples(cluster.textfile)[("jobreport_sync_last_run_stopped", key)] == 1


def test_the_metrics_file_holds_each_stream(cluster):
    cluster.arrive(row(3001, T0 + 100), row(3002, T0 + 200))
    cluster.now[0] = T0 + 200
    cluster.run()
    metrics = samples(cluster.textfile)
    for stream in ("archive", "email"):
        key = (("cluster", "demo"), ("stream", stream))
        assert metrics[("jobreport_sync_watermark_timestamp_seconds", key)] == T0 + 200
        assert metrics[("jobreport_sync_last_run_timestamp_seconds", key)] == T0 + 260
        assert metrics[("jobreport_sync_failing_jobs", key)] == 0
        assert metrics[("jobreport_sync_last_run_stopped", key)] == 0
    assert metrics[("jobreport_sync_last_run_jobs", (
        ("cluster", "demo"), ("outcome", "archived"), ("stream", "archive")))] == 2
    # Nothing left beside it: the file is renamed into place whole.
    assert [p.name for p in cluster.textfile.parent.iterdir()] == [cluster.textfile.name]


def test_a_dry_run_records_nothing(cluster):
    cluster.arrive(row(3001, T0 + 100))
    cluster.now[0] = T0 + 100
    cluster.run(SyncOptions(dry_run=True))
    assert status(cluster)["archive"].last_run is None
    assert not cluster.textfile.exists()


def test_print_status_json(cluster):
    cluster.arrive(row(3001, T0 + 100))
    cluster.now[0] = T0 + 100
    cluster.run(ARCHIVE)
    out = io.StringIO()
    assert print_status(cluster.settings, None, "json", out=out) == 0
    data = {d["stream"]: d for d in json.loads(out.getvalue())}
    assert data["archive"]["watermark"] == T0 + 100
    assert data["archive"]["last_run"]["outcomes"] == {"archived": 1}
    assert data["email"]["last_run"] is None
    assert json.loads(status_json([])) == []
