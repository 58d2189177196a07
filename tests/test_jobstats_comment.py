"""jobstats' AdminComment summary: our reader on comments jobstats wrote, our writer's
summary of a report, and the writer's rule never to overwrite a comment."""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.reports import busy_cpu_report, gpu_report
from webapp.model import Series, SourceUnavailable
from webapp.report.jobstats_summary import build_jobstats_summary
from webapp.settings import Settings, SettingsError
from webapp.sources.jobstats_comment import encode_comment, figures, parse_comment
from webapp.sync.admin_comment import (
    KEPT,
    MANGLED,
    NOT_FOUND,
    WRITTEN,
    SacctmgrCommentWriter,
)

FIXTURE = Path(__file__).parent.parent / "fixtures" / "sacct" / "reportseff_fixture_rows_11col.psv"


def fixture_comments() -> dict[str, str]:
    """JobID -> AdminComment of the reportseff capture's allocation lines."""
    lines = FIXTURE.read_text().splitlines()
    cols = lines[0].split("|")
    rows = [dict(zip(cols, line.split("|"), strict=True)) for line in lines[1:]]
    return {r["JobID"]: r["AdminComment"] for r in rows if r["AdminComment"]}


def jobstats_encode(summary: dict) -> str:
    """The published encoder's rules (jobstats' report_job_json plus its epilog's prefix):
    compact JSON, gzip with its default header, base64, ``JS1:``."""
    data = json.dumps(summary, separators=(",", ":")).encode("ascii")
    return "JS1:" + base64.b64encode(gzip.compress(data)).decode("ascii")


DELLA = {  # jobstats' own README example (job 39798795): two nodes, four GPUs
    "gpus": 4,
    "nodes": {
        "della-i14g2": {"cpus": 24, "gpu_total_memory": {"0": 42949672960, "1": 42949672960},
                        "gpu_used_memory": {"0": 28453568512, "1": 28453568512},
                        "gpu_utilization": {"0": 65.7, "1": 64.5},
                        "total_memory": 137438953472, "total_time": 164480.1,
                        "used_memory": 8444272640},
        "della-i14g3": {"cpus": 24, "gpu_total_memory": {"0": 42949672960, "1": 42949672960},
                        "gpu_used_memory": {"0": 28453634048, "1": 28453634048},
                        "gpu_utilization": {"0": 72.9, "1": 67.5},
                        "total_memory": 137438953472, "total_time": 154135.9,
                        "used_memory": 8419606528},
    },
    "total_time": 67316,
}


def test_reads_a_comment_built_by_jobstats_rules():
    parsed = parse_comment(jobstats_encode(DELLA))
    assert parsed == DELLA
    got = figures(parsed)
    # jobstats prints for this job: CPU 9.9%, memory 6%, GPU 68%, GPU memory 66%
    assert got.cpu_efficiency == pytest.approx(0.0986, abs=5e-4)
    assert got.memory_efficiency == pytest.approx(0.0613, abs=5e-4)
    assert got.gpu_utilization == pytest.approx(0.6765)
    assert got.gpu_memory_fraction == pytest.approx(0.6625, abs=5e-4)


def test_reads_the_comments_of_the_reportseff_capture():
    comments = fixture_comments()
    decoded = {jid: parse_comment(c) for jid, c in comments.items()}
    gpu_job = decoded["8197399"]
    assert gpu_job is not None and gpu_job["gpus"] is True
    got = figures(gpu_job)
    assert got.gpu_utilization == pytest.approx(0.294)
    assert got.cpu_efficiency == pytest.approx(17368.0 / 18203)
    # four nodes, only one busy: efficiency over all 80 cores
    assert figures(decoded["8205048"]).cpu_efficiency == pytest.approx(542 / (146 * 80))
    # jobstats' markers carry no figures
    assert all(parse_comment(c) is None for c in comments.values() if len(c) <= 10)


@pytest.mark.parametrize("comment", ["JS1:Short", "JS1:None", "", "requeued by staff 2026"])
def test_markers_and_site_comments_hold_no_summary(comment):
    assert parse_comment(comment) is None


@pytest.mark.parametrize("comment", ["JS1:H4sIAAAA", "JS1:not base64!",
                                     "JS1:" + base64.b64encode(b"plain").decode(),
                                     "JS1:" + jobstats_encode(DELLA)[4:].lower()])
def test_a_broken_jobstats_comment_is_an_error(comment):
    with pytest.raises(ValueError):
        parse_comment(comment)


def test_a_lowercased_comment_is_not_taken_for_jobstats():
    # what Slurm 22.05's sacctmgr stores of a JS1 comment: neither ours nor readable
    assert parse_comment(jobstats_encode(DELLA).lower()) is None


def test_our_comment_is_stable_and_round_trips():
    summary = build_jobstats_summary(gpu_report(), short_below=10)
    first, again = encode_comment(summary), encode_comment(summary)
    assert first == again and first.startswith("JS1:H4sI")
    assert parse_comment(first) == summary


def test_summary_shows_the_reports_figures():
    for report in (busy_cpu_report(), gpu_report()):
        summary = build_jobstats_summary(report, short_below=10)
        got = figures(summary)
        assert got.cpu_efficiency == pytest.approx(report.cpu_efficiency, abs=1e-3)
        assert set(summary["nodes"]) == set(report.nodes)
        assert summary["total_time"] == report.elapsed_seconds
    one = busy_cpu_report()
    assert figures(build_jobstats_summary(one, 10)).memory_efficiency == pytest.approx(
        one.memory_efficiency)
    two = gpu_report()
    got = figures(build_jobstats_summary(two, 10))
    assert got.gpu_utilization == pytest.approx(two.gpu_utilization, abs=1e-3)
    # the busiest node holds the report's peak
    assert build_jobstats_summary(two, 10)["nodes"]["node01"]["used_memory"] == \
        two.memory_peak_bytes


def test_each_nodes_memory_is_what_it_held_shared_memory_included():
    # A second node holding 1 GiB in /dev/shm beside 100 MiB anonymous: 1.1 GiB held, as
    # the report's peak counts it (webapp.report.peak), not the 100 MiB of RSS.
    two = gpu_report()
    other = next(n for n in two.nodes if n != "node01")
    at = two.usage.memory_rss[0].points[0][0]
    usage = replace(two.usage,
                    memory_rss=(*two.usage.memory_rss, Series(other, ((at, 100 * 2**20),))),
                    memory_shmem=(Series(other, ((at, 2**30),)),))
    summary = build_jobstats_summary(replace(two, usage=usage), 10)
    assert summary["nodes"][other]["used_memory"] == 2**30 + 100 * 2**20


def test_short_and_empty_jobs_get_jobstats_markers():
    assert build_jobstats_summary(busy_cpu_report(elapsed_seconds=4.0), 10) == "Short"
    empty = replace(busy_cpu_report(), cpu_seconds=None, memory_peak=None,
                    usage=replace(busy_cpu_report().usage, cpu_cores=(), memory_rss=()))
    assert build_jobstats_summary(empty, 10) == "None"
    assert encode_comment("None") == "JS1:None"


class Accounting:
    """sacct and sacctmgr over one job's AdminComment, as argv lists; ``lower`` stores the
    value the way Slurm 22.05's sacctmgr does (lowercased)."""

    def __init__(self, comment: str, lower: bool = False) -> None:
        self.comment, self.lower, self.calls = comment, lower, []

    def __call__(self, argv: list[str]) -> str:
        self.calls.append(argv)
        if argv[0] == "sacct":
            return f"77|{self.comment}\n"
        value = argv[-1].partition("=")[2]
        self.comment = value.lower() if self.lower else value
        return " Modified jobs...\n"


def test_writer_never_overwrites_a_comment():
    slurm = Accounting("kept for the site")
    writer = SacctmgrCommentWriter("demo", runner=slurm)
    assert writer.write("77", "77", 0, "JS1:H4sIabc") == KEPT
    assert slurm.comment == "kept for the site"
    assert all(argv[0] == "sacct" for argv in slurm.calls)
    assert SacctmgrCommentWriter("demo", runner=Accounting("")).write(
        "78", "78", 0, "JS1:x") == NOT_FOUND


def test_writer_writes_and_checks():
    slurm = Accounting("")
    assert SacctmgrCommentWriter("demo", runner=slurm).write("77", "77", 0, "JS1:H4sIAb") \
        == WRITTEN
    assert slurm.comment == "JS1:H4sIAb"
    assert ["sacctmgr", "-i", "modify", "job", "where", "jobid=77", "cluster=demo", "set",
            "AdminComment=JS1:H4sIAb"] in slurm.calls


def test_writer_undoes_a_lowercased_comment_and_stops():
    slurm = Accounting("", lower=True)
    writer = SacctmgrCommentWriter("demo", runner=slurm)
    assert writer.write("77", "77", 0, "JS1:H4sIAb") == MANGLED
    assert slurm.comment == ""  # cleared: no tool is left to choke on it
    with pytest.raises(SourceUnavailable):
        writer.write("78", "78", 0, "JS1:H4sIAb")


def test_admin_comment_settings():
    assert Settings.from_env({}).admin_comment == ""
    with pytest.raises(SettingsError, match="JOBREPORT_ADMIN_COMMENT"):
        Settings.from_env({"JOBREPORT_ADMIN_COMMENT": "yes"})
    with pytest.raises(SettingsError, match="JOBREPORT_ADMIN_COMMENT_DB_URL"):
        Settings.from_env({"JOBREPORT_ADMIN_COMMENT": "database"})


class Refusing:
    """A writer whose accounting database is down."""

    def write(self, job_id, raw_id, submit_time, comment):
        raise SourceUnavailable("database", "cannot connect: refused")


def test_sync_step_logs_a_failure_and_goes_on(caplog):
    from webapp.sources.ended import EndedJob
    from webapp.sync.admin_comment import write_summary

    job = EndedJob(1, "4300", 0, "demo")
    outcome = write_summary(Refusing(), job, busy_cpu_report(), scrape_interval=5)
    assert outcome.startswith("failed") and "refused" in caplog.text
    slurm = Accounting("")
    writer = SacctmgrCommentWriter("demo", runner=slurm)
    job = EndedJob(1, "77", 0, "demo")
    assert write_summary(writer, job, busy_cpu_report(job_id="77"), 5) == WRITTEN
    assert parse_comment(slurm.comment) == build_jobstats_summary(busy_cpu_report(), 10)
    assert write_summary(writer, job, busy_cpu_report(job_id="77", state="RUNNING"), 5) \
        == "not ended"


def test_a_job_prometheus_lost_gets_its_figures_from_the_comment():
    from webapp.model import Usage
    from webapp.report.jobstats_history import NOTE, with_jobstats_summary

    lost = replace(gpu_report(), usage=Usage(), memory_peak=None)
    comment = jobstats_encode(DELLA)
    filled = with_jobstats_summary(lost, lambda job_id: comment)
    assert NOTE in filled.notes
    assert filled.gpu_utilization == pytest.approx(0.6765)
    assert filled.memory_peak_bytes == 8444272640  # della-i14g2, the busier node
    assert filled.usage.gpu_memory_total_bytes == 42949672960
    # nothing to add: Prometheus had the job, or no summary, or a site's own note
    assert with_jobstats_summary(gpu_report(), lambda job_id: comment) == gpu_report()
    for other in ("", "JS1:Short", "requeued by staff", None):
        assert with_jobstats_summary(lost, lambda job_id, c=other: c) is lost


def test_sacct_reads_a_jobs_admin_comment():
    from webapp.sources.sacct import SacctSource

    comments = fixture_comments()
    lines = "".join(f"{jid}|{c}\n" for jid, c in comments.items())
    src = SacctSource(runner=lambda argv: lines, delimiter="|")
    assert src.admin_comment("8197399") == comments["8197399"]
    assert src.admin_comment("1") is None
