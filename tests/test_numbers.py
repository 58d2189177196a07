"""Numbers that agree (one memory peak, arrays named as arrays, limits and states read
right), on real sacct captures fed to the report service with the accounting database and
Prometheus unreachable (real connections to closed ports), as `jobreport show` sees them
on a cluster whose services are down. Provenance of every capture: fixtures/SOURCES.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers.mail import free_port
from tests.helpers.reports import FakeService, sample_report
from tests.helpers.sacct_fields import CAPTURED_FIELDS
from webapp.model import CpuSource, JobNotFound, PeakSource, SourceUnavailable, TimeLimitKind
from webapp.renderers import html, pdf, text
from webapp.renderers import json as json_renderer
from webapp.report.peak import sacct_peak
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.partitions import PartitionSource, parse_max_time
from webapp.sources.sacct import FIELDS, SacctSource, parse_sacct

FIX = Path(__file__).resolve().parent.parent / "fixtures"
K = 1024
REPORTSEFF_11 = "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem," \
    "State,TotalCPU".split(",")
SLYME_2014 = "JobID,User,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU," \
    "SystemCPU,ReqMem,MaxRSS,Start,End,NodeList,Extra".split(",")
ACCOUNTING_DOWN = "accounting database unreachable; owner and limits from sacct"
ALIASES = {"ncpus": "alloccpus"}


def sacct_answer(name: str, fields: list[str] | None = None, delimiter: str = "|",
                 job: str | None = None, out: Sequence[str] = FIELDS) -> str:
    """A capture re-emitted in FIELDS order (``out``), as SacctSource's own sacct call
    prints it, a column the capture lacks empty; ``job`` keeps only that job's lines (what
    ``sacct --jobs`` would answer)."""
    lines = (FIX / "sacct" / name).read_text().splitlines()
    if fields is None:
        fields = lines.pop(0).split(delimiter)
    lines_out = []
    for line in lines:
        parts = line.split(delimiter)
        if len(parts) == len(fields) + 1 and parts[-1] == "":
            parts.pop()  # -p's trailing delimiter
        # Column names are case-insensitive; NCPUS is AllocCPUS under another name.
        row = {ALIASES.get(f.lower(), f.lower()): v for f, v in zip(fields, parts, strict=True)}
        if job and not row["jobid"].startswith((f"{job}.", f"{job}_")) and row["jobid"] != job:
            continue
        lines_out.append("|".join(row.get(f.lower(), "") for f in out))
    return "\n".join(lines_out) + "\n"


def scontrol_missing(argv: list[str]) -> str:
    raise SourceUnavailable("partitions", "partition limits unavailable", "scontrol not found")


def service(answer: str, scontrol=scontrol_missing, **more) -> ReportService:
    """The real service: the DB and Prometheus on closed ports, sacct answering ``answer``,
    no archive (the default var/archive.sqlite is the local stack's, whose job ids overlap
    the captures'); ``more``: other settings (sacct asks what they make it ask)."""
    down = free_port()
    settings = Settings(db_url=f"mysql://jobreport:x@127.0.0.1:{down}/jobreport",
                        prometheus_url=f"http://127.0.0.1:{down}", prometheus_timeout=2,
                        archive_url="", **more)
    sacct = SacctSource(delimiter="|", runner=lambda argv: answer,
                        gpu_tres=settings.gpu_metrics == "tres")
    return ReportService(settings, sacct=sacct, partitions=PartitionSource(runner=scontrol))


def show(answer: str, job_id: str, **kw):
    return service(answer, **kw).build(job_id, strict_accounting=False)


def one_line(s: str) -> str:
    return " ".join(s.split())


# --- 1. one memory peak --------------------------------------------------------------------

ISSUE41 = "reportseff_fixture_rows_issue41_12col.psv"


@pytest.mark.needs("pdflatex")
def test_multi_task_peak_is_one_figure_everywhere(tmp_path):
    # 131042.0 ran 8 tasks; MaxRSS 1947276K is the largest one; 16000M requested.
    report = show(sacct_answer(ISSUE41), "131042")
    peak = report.memory_peak
    assert peak.source == PeakSource.SACCT and peak.estimate
    assert (peak.per_task_bytes, peak.tasks, peak.step_id) == (1947276 * K, 8, "0")
    assert report.memory_peak_bytes == 8 * 1947276 * K  # 14.9 GiB, not 1.9 GiB
    assert report.memory_efficiency == pytest.approx(8 * 1947276 * K / (16000 * K * K))
    near = next(f for f in report.findings if f.name == "memory_near_limit")
    assert near.evidence["memory_peak_bytes"] == report.memory_peak_bytes
    assert "Peak memory 15 GiB reached 95%" in near.message

    out = one_line(text.render(report, details=True))
    assert "95% 15 GiB of 16 GiB" in out and "1.9 GiB of" not in out
    assert "MaxRSS 1.9 GiB per task x 8 tasks" in out  # says it is an estimate, and how
    data = json.loads(json_renderer.render(report))
    assert data["memory_peak_bytes"] == data["memory_peak"]["bytes"] == 8 * 1947276 * K
    assert data["memory_peak"]["estimate"] is True
    assert data["memory_efficiency"] == report.memory_efficiency  # 0.9508
    page = one_line(html.render(report))
    assert "15 GiB of 16 GiB (95%) peak; estimate from sacct" in page
    path = tmp_path / "r.pdf"
    path.write_bytes(pdf.render(report))
    pdf_text = one_line(subprocess.run(["pdftotext", str(path), "-"], check=True,
                                       capture_output=True, text=True).stdout)
    assert "15 GiB of 16 GiB (95%) peak" in pdf_text and "1.9 GiB of" not in pdf_text


def test_local_two_task_step_estimate_and_array_mem_use_the_same_peak():
    # Job 132 on the stack: `srun -n2`, each task 200 MiB; sacct's MaxRSS is one task.
    job = parse_sacct((FIX / "sacct" / "local-multitask-132-sacctsource-argv.psv").read_text(),
                      CAPTURED_FIELDS)[0]
    assert job.max_rss_bytes == 207584 * K
    peak = sacct_peak(job)
    assert (peak.bytes, peak.node, peak.tasks) == (2 * 207584 * K, "vm", 2)


def test_array_suggestion_fits_multi_task_tasks():
    from webapp.report.arrays import summarize_array

    # Array 133 on the stack: `srun -n2`, each task of 133_2 held 200 MiB (405 MiB in all).
    text_ = (FIX / "sacct" / "local-multitask-array-133-sacctsource-argv.psv").read_text()
    tasks = parse_sacct(text_, CAPTURED_FIELDS)
    summary = summarize_array(tasks)
    assert [t.memory_peak_bytes for t in summary.tasks] == [2 * 105188 * K, 2 * 207588 * K]
    assert summary.suggested_mem == "500M"  # 405 MiB x 1.2; one task's 203 MiB would say 300M
    assert summary.memory_peak_p95 > 380 * K * K


# --- 2 and 3. arrays shown as arrays, found by their id --------------------------------------

def test_show_array_id_leads_with_the_array_and_names_the_task():
    answer = sacct_answer("local-array-28.psv")
    report = show(answer, "28")
    assert report.array is not None and report.figures_from == "28_4"
    out = text.render(report, details=True)
    assert out.startswith("Array job 28 (4 tasks): jr-array2")
    assert out.index("Array of 4 tasks") < out.index("task 28_4") < out.index("Findings")
    for task in ("28_1", "28_2", "28_3", "28_4"):
        assert f"\n  {task} " in out  # one line per task: the spread, among the details
    data = json.loads(json_renderer.render(report))
    assert data["figures_from"] == "28_4"
    assert [t["job_id"] for t in data["array"]["task_list"]] == ["28_1", "28_2", "28_3", "28_4"]
    page = html.render(report)
    assert (page.index('id="figures"') < page.index("Array summary")
            < page.index('class="note figures-from"') < page.index('id="job"'))

    task = show(answer, "28_2")
    assert task.array is None and task.figures_from is None
    assert text.render(task).startswith("Array task 28_2: jr-array2")


def test_array_found_by_its_id_when_no_task_has_that_raw_id():
    # 24220929_421 and _431 have raw ids 24221219 and 24221220: none is 24220929.
    answer = sacct_answer("reportseff_console_caretdelim_noheader_11col.txt", REPORTSEFF_11,
                          "^|^", job="24220929")
    replay = SacctSource(delimiter="|", runner=lambda argv: answer)
    assert replay.job("24220929").job_id == "24220929_421"
    report = show(answer, "24220929")
    assert report.figures_from == "24220929_421"
    assert [t.job_id for t in report.array.tasks] == ["24220929_421", "24220929_431"]
    assert text.render(report).startswith("Array job 24220929 (2 tasks)")
    with pytest.raises(JobNotFound):
        show(answer, "24220930")


# --- 4. time limits --------------------------------------------------------------------------

PENDING = "local-pending-array-14.psv"


def test_partition_limit_is_never_read_as_unlimited():
    report = show(sacct_answer(PENDING, job="17"), "17")
    assert report.time_limit_kind == TimeLimitKind.PARTITION
    assert report.time_limit_seconds is None
    out = text.render(report)
    assert "Time limit: the partition's limit" in out and "unlimited" not in out
    assert json.loads(json_renderer.render(report))["time_limit_kind"] == "partition"


def test_partition_limit_resolved_from_scontrol_and_cached():
    captured = (FIX / "slurm" / "local-scontrol-show-partition-debug-oneliner.txt").read_text()
    assert parse_max_time(captured) == (TimeLimitKind.UNLIMITED, None)  # MaxTime=UNLIMITED
    calls = []

    def scontrol(argv):
        calls.append(argv)
        return captured

    svc = service(sacct_answer(PENDING, job="17"), scontrol=scontrol)
    for _ in range(2):
        report = svc.build("17", strict_accounting=False)
        assert report.time_limit_kind == TimeLimitKind.UNLIMITED
    assert calls == [["scontrol", "show", "partition", "debug", "--oneliner"]]


def test_unlimited_only_when_slurm_says_so():
    answer = sacct_answer("reportseff_fixture_rows_11col.psv", job="6196869")
    report = show(answer, "6196869")  # Timelimit UNLIMITED
    assert report.time_limit_kind == TimeLimitKind.UNLIMITED
    assert "of unlimited" in text.render(report)


# --- 5. not started: from the state ----------------------------------------------------------

def test_completed_job_without_start_time_is_not_called_not_started():
    # 6196869: COMPLETED after 12 days on 20 nodes; the capture has no Start column.
    report = show(sacct_answer("reportseff_fixture_rows_11col.psv", job="6196869"), "6196869")
    assert report.state == "COMPLETED" and report.elapsed_seconds > 12 * 86400
    reasons = " ".join(g.reason for g in report.gaps)
    assert "not started" not in reasons and "start time is unknown" in reasons
    assert "not started" not in text.render(report)


def test_pending_job_is_not_started():
    report = show(sacct_answer(PENDING, job="17"), "17")
    assert any(g.reason == "the job has not started yet (PENDING): no metrics"
               for g in report.gaps)
    assert report.cpu_seconds is None  # not the allocation line's 00:00:00


# --- 6. CPU time from the allocation line ------------------------------------------------------

def test_cpu_time_from_allocation_line_when_there_are_no_steps():
    # Slurm 14 (2014): job 10048462 has no step lines; its allocation line has TotalCPU.
    answer = sacct_answer("slyme_JobReportTest_sacct_rows_2014.psv", SLYME_2014,
                          job="10048462")
    report = show(answer, "10048462")
    assert report.cpu_seconds == pytest.approx(8 * 60 + 1.433)
    assert report.cpu_source == CpuSource.ALLOCATION
    # 1 CPU from 11:43:26 to 13:51:59 (the capture has no Elapsed column)
    assert report.cpu_efficiency == pytest.approx(481.433 / (2 * 3600 + 8 * 60 + 33))
    assert "allocation line's TotalCPU" in one_line(text.render(report, details=True))
    assert json.loads(json_renderer.render(report))["cpu_seconds_source"] == "sacct_allocation"
    assert report.memory_peak_bytes == 2409232 * K  # MaxRSS, also on the allocation line


# --- 7. a plain sentence for users, the detail for staff and logs ------------------------------

def test_database_outage_reads_plainly_and_logs_the_detail(caplog):
    answer = sacct_answer("slyme_JobReportTest_sacct_rows_2014.psv", SLYME_2014,
                          job="10048462")
    with caplog.at_level(logging.WARNING, logger="webapp.report.build"):
        report = show(answer, "10048462")
    gap = next(g for g in report.gaps if g.source == "accounting")
    assert gap.reason == ACCOUNTING_DOWN
    assert "Can't connect" in gap.detail  # pymysql's own words
    assert gap.detail in caplog.text
    assert "Can't connect" not in text.render(report)
    assert "Can't connect" not in json_renderer.render(report)
    assert ACCOUNTING_DOWN in one_line(text.render(report))


def test_web_page_shows_the_detail_to_staff_only(web_settings):
    from tests.helpers.web import make_app, signed_in

    answer = sacct_answer("slyme_JobReportTest_sacct_rows_2014.psv", SLYME_2014,
                          job="10048462")
    gaps = show(answer, "10048462").gaps
    report = dataclasses.replace(sample_report("7000", "alice"), gaps=gaps)
    app = make_app(web_settings, FakeService({"7000": report}))
    pages = {user: one_line(signed_in(app, user).get("/jobs/7000").get_data(as_text=True))
             for user in ("alice", "staffer")}
    for page in pages.values():
        assert ACCOUNTING_DOWN in page
    assert "Connection refused" not in pages["alice"]
    assert "Detail (staff only)" in pages["staffer"] and "Connection refused" in pages["staffer"]


# --- the JSON schema, pinned -------------------------------------------------------------------

def test_json_schema_is_pinned():
    report = show(sacct_answer("local-array-28.psv"), "28")
    data = json.loads(json_renderer.render(report))
    assert set(data) == {
        "schema_version", "job_id", "cluster", "user", "uid", "account", "job_name",
        "partition", "qos", "nodes", "work_dir", "state", "exit_code", "submit_time",
        "start_time", "end_time", "elapsed_seconds", "time_limit_seconds", "time_limit_kind",
        "headline", "verdict", "figures_from", "cpus", "cpu_seconds", "cpu_seconds_source",
        "cpu_efficiency",
        "memory_peak_bytes", "memory_peak", "memory_nodes", "memory_requested_bytes",
        "memory_requested_per_node_bytes", "memory_efficiency", "gpus", "gpu_memory_peak_bytes",
        "usage", "steps",
        "findings", "gaps", "notes", "queue", "array", "series", "sizing",
        "step_lines", "billing", "waste", "energy", "coverage", "node_events",
    }  # fmt: skip
    assert set(data["coverage"]) == {"nodes", "gpus", "sources", "rules_version", "policy_version",
                                     "min_coverage", "thresholds", "verdicts", "queries",
                                     "replay_note"}
    assert set(data["memory_peak"]) == {"bytes", "source", "estimate", "node", "step_id",
                                        "per_task_bytes", "tasks"}
    assert set(data["steps"][0]) == {"step_id", "name", "state", "exit_code",
                                     "elapsed_seconds", "cpu_seconds", "max_rss_bytes",
                                     "max_rss_node", "tasks", "cpus", "nodes"}
    assert set(data["array"]) == {
        "tasks", "elapsed_seconds_p50", "elapsed_seconds_p95", "memory_peak_bytes_p50",
        "memory_peak_bytes_p95", "cpu_efficiency_p50", "cpu_efficiency_p95", "outliers",
        "suggested_mem", "suggested_time", "states", "task_list",
    }  # fmt: skip
    assert set(data["gaps"][0]) == {"source", "reason"}
    assert set(data["usage"]) == {
        "memory_limit_bytes", "memory_limit_by_node", "memory_max_usage_bytes",
        "gpu_memory_total_bytes", "read_bytes", "write_bytes", "read_syscalls",
        "write_syscalls", "processes_max", "threads_max", "open_files_max",
        "open_files_limit_ratio_max", "scratch_in_use",
        "cpu_pressure_seconds", "io_pressure_seconds", "memory_pressure_seconds",
        "memory_high_events", "cpu_wait_seconds", "io_wait_seconds", "busy_tasks_max",
        "energy_joules", "energy_gpu_joules", "energy_other_joules", "energy_by_node",
        "gpu_energy", "gpu_faults", "gpu_devices", "gpu_figures_from", "counter_resets",
        "replayed",
    }  # fmt: skip
