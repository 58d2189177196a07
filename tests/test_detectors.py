"""Detectors on reports built from real sacct captures (fixtures/sacct, see SOURCES.md).

Usage (Prometheus) numbers are added by hand where a case needs them; everything
sacct-side is the captured job as it was.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC
from functools import cache
from pathlib import Path

import pytest

from webapp.detectors import DETECTORS, Thresholds, detect_all
from webapp.detectors.advice import next_cpus, next_mem, next_time, round_up_time
from webapp.detectors.outcome import parse_exit_code
from webapp.detectors.serial_on_many_cores import looks_serial
from webapp.model import (
    Finding,
    JobReport,
    MemoryPeak,
    PeakSource,
    SacctJob,
    Series,
    Severity,
    Usage,
)
from webapp.report.peak import sacct_peak
from webapp.settings import SettingsError
from webapp.sources.sacct import parse_sacct
from webapp.sources.sacct_values import parse_nodelist
from webapp.thresholds import RENAMED, TABLE, parse_thresholds

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
GIB = 1024**3

# Column lists of the header-less captures (from each project's own sacct call).
FIELDS = {
    "slurm-jobinfo_sacct_snowmandelim_noheader_Gn_Mc_trimmed.txt": (
        "JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,Submit,start,end,"
        "timelimit,elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,"
        "TRESUsageOutTot,MaxDiskWrite,MaxDiskRead,MaxRSSNode,MaxDiskWriteNode,MaxDiskReadNode,"
        "Comment"
    ).split(","),
    "slurmdog_sacct_P_n_alpine_trimmed_14col.psv": (
        "JobID,User,Group,State,Cluster,AllocCPUS,REQMEM,TotalCPU,Elapsed,MaxRSS,ExitCode,"
        "NNodes,NTasks,JobName"
    ).split(","),
}
DELIMITER = {"slurm-jobinfo_sacct_snowmandelim_noheader_Gn_Mc_trimmed.txt": "☃"}
HB = "DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv"
JOBINFO = "slurm-jobinfo_sacct_snowmandelim_noheader_Gn_Mc_trimmed.txt"
DOG = "slurmdog_sacct_P_n_alpine_trimmed_14col.psv"
LOCAL = "local-jobs-11-16.psv"


@cache
def sacct_job(fixture: str, job_id: str) -> SacctJob:
    text = (FIX / fixture).read_text()
    jobs = parse_sacct(text, FIELDS.get(fixture), delimiter=DELIMITER.get(fixture, "|"), tz=UTC)
    return next(j for j in jobs if j.job_id == job_id)


def build(job: SacctJob, usage: Usage | None = None, **extra) -> JobReport:
    """The report build.py would make from sacct alone, plus the usage given."""
    elapsed = job.elapsed_seconds
    if elapsed is None and job.start_time and job.end_time:
        elapsed = (job.end_time - job.start_time).total_seconds()
    fields = dict(
        job_id=job.job_id, cluster="test", user=job.user, account=job.account,
        job_name=job.job_name, partition=job.partition, nodes=parse_nodelist(job.node_list),
        work_dir=job.work_dir, cpus=job.cpus, memory_requested_bytes=job.memory_requested_bytes,
        gpus=job.gpus, time_limit_seconds=job.time_limit_seconds, state=job.state,
        exit_code=job.exit_code, start_time=job.start_time, end_time=job.end_time,
        elapsed_seconds=elapsed, cpu_seconds=job.total_cpu_seconds,
        memory_peak=sacct_peak(job), usage=usage or Usage(), steps=job.steps,
        cancelled_by=job.cancelled_by,
    )  # fmt: skip
    fields.update(extra)
    return JobReport(**fields)


def flat(label: str, value: float, n: int = 60) -> Series:
    return Series(label, tuple((1.7e9 + 30 * i, value) for i in range(n)))


def report_for(fixture: str, job_id: str, usage: Usage | None = None, **extra) -> JobReport:
    return build(sacct_job(fixture, job_id), usage, **extra)


CASES = [
    # (case id, fixture, job, usage, extra report fields, expected finding names)
    ("hb-a100-one-gpu-idle-cancelled", HB, "8150389",
     Usage(gpu_utilization=(flat("vm/0", 0.93), flat("vm/1", 0.0))), {},
     {"job_cancelled", "cpu_efficiency_low", "gpu_idle"}),
    ("hb-4-gpus-short-and-long-limit", HB, "7971484", None, {},
     {"short_job", "time_over_requested"}),
    ("hb-256-cores-timeout-mem-per-task", HB, "6708912", None, {},
     {"job_timeout", "memory_over_requested"}),
    ("hb-node-fail", HB, "7336818", None, {}, {"node_failure"}),
    ("hb-array-task-failed", HB, "7216823_40", None, {},
     {"job_failed", "cpu_efficiency_low", "memory_over_requested"}),
    ("hb-array-task-timeout", HB, "7216821_144", None, {},
     {"job_timeout", "cpu_efficiency_low", "memory_over_requested"}),
    ("hb-running-no-verdicts", HB, "8298012", None, {}, set()),
    ("hb-2-nodes-files-and-io", HB, "8168940",
     Usage(write_bytes=50 * GIB, write_syscalls=20e6, read_bytes=GIB, read_syscalls=1e4,
           scratch_in_use=False, open_files_max=5000, open_files_limit_ratio_max=0.9), {},
     {"cpu_efficiency_low", "memory_over_requested", "io_not_on_scratch", "many_open_files",
      "open_files_near_limit", "small_io"}),
    ("jobinfo-per-cpu-reqmem-12-tasks", JOBINFO, "20957017", None, {},
     {"memory_over_requested"}),
    ("jobinfo-oversubscribed-threads", JOBINFO, "20957017", Usage(threads_max=48), {},
     {"memory_over_requested", "oversubscribed"}),
    ("jobinfo-healthy-serial", JOBINFO, "20980772", None, {}, set()),
    ("jobinfo-failed-one-core", JOBINFO, "20940996", None, {}, {"job_failed"}),
    ("slurmdog-oom-serial-on-4-cores", DOG, "6144229", None, {},
     {"out_of_memory", "serial_on_many_cores"}),
    ("slurmdog-cancelled-after-batch-oom", DOG, "12051616", None, {"uid": 2000886},
     {"job_cancelled", "out_of_memory", "cpu_efficiency_low"}),
    ("slurmdog-failed-step-oom", DOG, "6114624", None, {},
     {"job_failed", "out_of_memory", "cpu_efficiency_low"}),
    ("slurmdog-short-array-task", DOG, "9742843_10", None, {}, {"short_job"}),
    ("reportseff-80-cores-short", "reportseff_fixture_rows_11col.psv", "8205048", None, {},
     {"short_job"}),
    ("jobstats-gpu-underused", "jobstats_sacct_P_X_60155093_simple_gpu_job.psv", "60155093",
     Usage(gpu_utilization=(flat("della-l01g1/0", 0.08),)), {}, {"gpu_util_low"}),
    ("jobstats-gpu-never-used", "jobstats_sacct_P_X_845136_gpu_utilization_missing.psv",
     "845136", Usage(gpu_utilization=(flat("della-l01g2/0", 0.0),)), {}, {"gpu_idle"}),
    ("local-exit-3", LOCAL, "12", None, {}, {"job_failed"}),
    ("local-oom-50M", LOCAL, "13", None, {}, {"out_of_memory"}),
    ("local-sleep-2", LOCAL, "11", None, {}, {"short_job"}),
    ("local-gpu-too-short-to-judge", LOCAL, "16",
     Usage(gpu_utilization=(flat("vm/0", 0.0, 2),)), {}, {"short_job"}),
    ("local-cancelled-by-owner", "local-cancelled-17.psv", "17", None, {"uid": 0},
     {"job_cancelled"}),
    ("local-failed-second-srun-step", "local-jobs-29-31.psv", "30", None, {}, {"job_failed"}),
    ("local-oom-before-first-sample", "local-jobs-29-31.psv", "31", None, {},
     {"out_of_memory"}),
    ("local-serial-too-short-to-judge", "local-jobs-29-31.psv", "29", None, {}, {"short_job"}),
]


@pytest.mark.parametrize(
    "fixture, job_id, usage, extra, expected",
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_findings_on_real_jobs(fixture, job_id, usage, extra, expected):
    report = report_for(fixture, job_id, usage, **extra)
    findings = detect_all(report, Thresholds())
    assert {f.name for f in findings} == expected
    for f in findings:
        assert f.message and f.advice and isinstance(f.severity, Severity)
    ranks = [("critical", "warning", "info").index(f.severity.value) for f in findings]
    assert ranks == sorted(ranks)


# --- one true negative per detector: a healthy job of the kind it judges -----------------


def healthy_cpu_job() -> JobReport:
    # 1 core, 99.9 % busy, 620 MB of 2000 MB, 25 h of a 70 h limit (jobinfo 20980772)
    return report_for(JOBINFO, "20980772", Usage(
        threads_max=1, open_files_max=40, open_files_limit_ratio_max=0.04,
        write_bytes=20 * GIB, write_syscalls=2e5, read_bytes=GIB, read_syscalls=1e4,
        scratch_in_use=True, cpu_per_core=(flat("c0", 0.99),)))  # fmt: skip


def healthy_gpu_job() -> JobReport:
    return report_for(
        "jobstats_sacct_P_X_60155093_simple_gpu_job.psv", "60155093",
        Usage(gpu_utilization=(flat("g/0", 0.85),)),
    )


@pytest.mark.parametrize("detector", DETECTORS, ids=[d.name for d in DETECTORS])
def test_true_negative_per_detector(detector):
    for report in (healthy_cpu_job(), healthy_gpu_job()):
        assert detector.detect(report, Thresholds()) == ()


EMPTY_REPORTS = {
    "bare": JobReport(job_id="1", cluster="c"),
    "state-only": JobReport(job_id="1", cluster="c", state="COMPLETED"),
    "zeros": JobReport(job_id="1", cluster="c", state="COMPLETED", cpus=0, elapsed_seconds=0,
                       cpu_seconds=0, memory_peak=MemoryPeak(0, PeakSource.SACCT),
                       memory_requested_bytes=0, gpus=2,
                       time_limit_seconds=0, usage=Usage(gpu_utilization=(Series("0", ()),))),
    "failed-no-code": JobReport(job_id="1", cluster="c", state="FAILED", exit_code=None),
}


@pytest.mark.parametrize("detector", DETECTORS, ids=[d.name for d in DETECTORS])
@pytest.mark.parametrize("name", list(EMPTY_REPORTS))
def test_missing_inputs_never_crash(detector, name):
    findings = detector.detect(EMPTY_REPORTS[name], Thresholds())
    assert isinstance(findings, tuple)
    if name == "zeros" and detector.name == "short_job":
        assert [f.name for f in findings] == ["short_job"]  # 0 s is a real (tiny) runtime
    elif name != "failed-no-code":
        assert findings == ()


# --- the numbers behind the findings ------------------------------------------------------


def test_efficiency_formulas_are_seffs():
    # seff: CPU efficiency = TotalCPU / (elapsed x CPUs); memory = its "estimated maximum"
    # (MaxRSS x tasks, here per node) / the memory requested per node
    for fixture, job_id in [(HB, "7216823_40"), (JOBINFO, "20957017"), (DOG, "6240722"),
                            (LOCAL, "15"), ("local-cancelled-17.psv", "17")]:
        job = sacct_job(fixture, job_id)
        report = build(job)
        expected_cpu = job.total_cpu_seconds / (job.elapsed_seconds * job.cpus)
        assert report.cpu_efficiency == pytest.approx(expected_cpu)
        peak = sacct_peak(job)
        if peak is None:  # MaxRSS 0 or empty: never sampled, not "no memory"
            assert report.memory_efficiency is None
        else:
            nodes = max(1, len(parse_nodelist(job.node_list)))
            expected_mem = peak.bytes / (job.memory_requested_bytes // nodes)
            assert report.memory_efficiency == pytest.approx(expected_mem)
    # hand-checked: 1-09:18:06 of CPU over 07:03:00 on 12 cores
    report = report_for(HB, "7216823_40")
    assert report.cpu_efficiency == pytest.approx(119886 / (25380 * 12))
    assert report.memory_efficiency == pytest.approx(992092 * 1024 / (16000 * 1024**2))


def finding(report: JobReport, name: str, thresholds: Thresholds | None = None) -> Finding:
    return next(f for f in detect_all(report, thresholds) if f.name == name)


def test_memory_advice_from_per_task_peak_times_tasks():
    # 6708912.0: 256 tasks on 2 nodes, MaxRSS 79116K per task -> ~9.7 GiB per node of 100G
    f = finding(report_for(HB, "6708912"), "memory_over_requested")
    assert f.evidence["memory_peak_bytes"] == 128 * 79116 * 1024
    assert f.evidence["suggested_mem"] == "12G"  # 9.66 GiB x 1.2 = 11.6 -> 12G
    assert "`--mem=12G` per node" in f.advice
    assert f.severity is Severity.WARNING


def test_memory_advice_single_node():
    f = finding(report_for(HB, "7216823_40"), "memory_over_requested")
    assert f.evidence["suggested_mem"] == "2G"  # 969 MiB x 1.2 = 1.14 GiB -> 2G
    assert "`--mem=2G`" in f.advice


def test_oom_advice_grows_the_limit():
    f = finding(report_for(DOG, "6144229"), "out_of_memory")
    # 15G limit hit: 1.5 x 15 GiB (the peak 14.6 GiB is below the limit)
    assert "`--mem=23G`" in f.advice and f.severity is Severity.CRITICAL
    local = finding(report_for(LOCAL, "13"), "out_of_memory")
    assert "`--mem=100M`" in local.advice  # 50M x 1.5 = 75M -> 100M steps


def test_memory_near_limit():
    report = replace(report_for(HB, "7216823_40"), memory_requested_bytes=1024**3)
    f = finding(report, "memory_near_limit")
    assert f.evidence["suggested_mem"] == "2G" and f.severity is Severity.WARNING


def test_time_advice_in_slurm_syntax():
    f = finding(report_for(HB, "7971484"), "time_over_requested")
    assert f.evidence["suggested_time"] == "00:10:00"  # 233 s x 1.3 -> 5-minute steps
    assert "`--time=00:10:00`" in f.advice
    timeout = finding(report_for(HB, "6708912"), "job_timeout")
    assert "`--time=4-12:00:00`" in timeout.advice  # 3 days x 1.5


def test_cpu_advice_counts_busy_cores():
    f = finding(report_for(HB, "7216823_40"), "cpu_efficiency_low")
    assert f.evidence["busy_cores"] == pytest.approx(119886 / 25380, abs=1e-3)
    assert "`--cpus-per-task=6`" in f.advice  # 4.72 busy x 1.1 -> 6
    gpu_job = finding(report_for(HB, "8150389"), "cpu_efficiency_low")
    assert gpu_job.severity is Severity.INFO  # cores that feed GPUs


def test_gpu_findings_name_the_idle_gpu_and_count():
    f = finding(report_for(HB, "8150389", Usage(
        gpu_utilization=(flat("a100gpu3/0", 0.93), flat("a100gpu3/1", 0.0)))), "gpu_idle")
    assert f.evidence["idle_gpus"] == "a100gpu3/1" and "`--gres=gpu:1`" in f.advice
    none_used = finding(report_for(
        "jobstats_sacct_P_X_845136_gpu_utilization_missing.psv", "845136",
        Usage(gpu_utilization=(flat("g/0", 0.0),))), "gpu_idle")
    assert "without" in none_used.advice and none_used.evidence["gpus_idle"] == 1
    low = finding(report_for(HB, "7971484", Usage(gpu_utilization=tuple(
        flat(f"a100gpu2/{i}", 0.05) for i in range(4))), elapsed_seconds=3600.0), "gpu_util_low")
    assert low.evidence["gpus_needed"] == 1 and "`--gres=gpu:1`" in low.advice


def test_serial_from_per_core_series_without_cpu_time():
    report = replace(report_for(DOG, "6144229"), cpu_seconds=None, usage=Usage(
        cpu_per_core=(flat("c0", 0.97), flat("c1", 0.01), flat("c2", 0.0), flat("c3", 0.02))))
    assert looks_serial(report, Thresholds())
    two_busy = replace(report, usage=Usage(cpu_per_core=(
        flat("c0", 0.97), flat("c1", 0.9), flat("c2", 0.0), flat("c3", 0.0))))
    assert not looks_serial(two_busy, Thresholds())


def test_failed_step_and_exit_code_explained():
    local = finding(report_for(LOCAL, "15", state="FAILED"), "job_failed")
    assert "step 2 (sh)" in local.message and "exit status 2" not in local.message
    assert "usage error" in local.message  # 2:0
    dog = finding(report_for(DOG, "6114624"), "job_failed")
    assert "memory limit" in dog.message  # step .0 ended 0:125
    assert parse_exit_code("0:9") == (0, 9) and parse_exit_code("") is None


def test_real_serial_job_once_short_jobs_count():
    # jr-serial: a Python busy loop on --cpus-per-task=2 for 12 s (10.9 s of CPU)
    thresholds = Thresholds(min_runtime_seconds=0, short_job_seconds=0)
    findings = detect_all(report_for("local-jobs-29-31.psv", "29"), thresholds)
    assert [f.name for f in findings] == ["serial_on_many_cores"]
    assert findings[0].evidence["busy_cores"] == pytest.approx(10.875 / 12, abs=1e-3)
    assert "`--cpus-per-task=1`" in findings[0].advice


def test_local_failed_step_and_oom_without_peak():
    failed = finding(report_for("local-jobs-29-31.psv", "30"), "job_failed")
    assert "step 1 (sh) ended with exit code 4" in failed.message
    assert failed.evidence["step_exit_code"] == "4:0"
    oom = finding(report_for("local-jobs-29-31.psv", "31"), "out_of_memory")
    assert oom.evidence["memory_peak_bytes"] == "n/a"  # killed before the first 5 s sample
    assert "`--mem=100M`" in oom.advice  # the 60M limit x 1.5


def test_cancelled_by_someone_else_is_a_warning():
    report = report_for(HB, "7965768", uid=1234)
    f = finding(report, "job_cancelled")
    assert f.severity is Severity.WARNING and "10314909" in f.message


def test_a_renamed_threshold_is_refused_with_its_new_name():
    """A site's override of an old name must not silently stop applying."""
    var = "JOBREPORT_THRESHOLDS"
    for old, new in RENAMED.items():
        with pytest.raises(SettingsError, match=f"^{var}: '{old}' was renamed '{new}'$"):
            parse_thresholds(var, f"cpu_efficiency_low=0.5,{old}=0.5")
        assert getattr(parse_thresholds(var, f"{new}=0.5"), new) == 0.5
    assert not set(RENAMED) & {row.name for row in TABLE}
    docs = (Path(__file__).resolve().parent.parent / "docs" / "settings.md").read_text()
    assert all(f"| `{old}` | `{new}` |" in docs for old, new in RENAMED.items())


def test_no_two_thresholds_are_the_same_words():
    """Near-twins (memory_growth_min and memory_min_growth were two rules' cuts) must be
    told apart by their names, not by the order of the same words."""
    words = [tuple(sorted(row.name.split("_"))) for row in TABLE]
    assert len(set(words)) == len(words)


def test_thresholds_override_and_reject_unknown():
    var = "JOBREPORT_THRESHOLDS"
    thresholds = parse_thresholds(var, "cpu_efficiency_low=0.5, gpu_idle=0.05")
    assert thresholds.cpu_efficiency_low == 0.5 and thresholds.gpu_idle == 0.05
    assert thresholds.overridden == {"cpu_efficiency_low", "gpu_idle"}
    assert thresholds.memory_margin == Thresholds().memory_margin
    with pytest.raises(SettingsError, match=f"{var}: unknown name 'cpu_effciency_low'"):
        parse_thresholds(var, "cpu_effciency_low=0.5")
    with pytest.raises(SettingsError, match=f"{var}: gpu_idle='-1' is not a number >= 0"):
        parse_thresholds(var, "gpu_idle=-1")
    with pytest.raises(SettingsError, match=f"{var}: 'gpu_idle' is not name=value"):
        parse_thresholds(var, "gpu_idle")
    # a threshold changes the verdict: 39 % is fine when the bar is 30 %
    report = report_for(HB, "7216823_40")
    relaxed = Thresholds(cpu_efficiency_low=0.3)
    assert "cpu_efficiency_low" not in {f.name for f in detect_all(report, relaxed)}


def test_advice_rounding():
    assert next_mem(5.2 * GIB, 1.0) == "6G" and next_mem(300 * 1024**2, 1.2) == "400M"
    assert round_up_time(1) == 300 and round_up_time(3601) == 5400
    assert round_up_time(90000) == 90000 and next_time(3 * 3600, 1.3) == "04:00:00"
    assert next_time(30 * 3600, 1.3) == "1-15:00:00"
    assert next_cpus(4.72, 1.1) == 6 and next_cpus(0.01) == 1


def test_a_broken_detector_is_logged_not_fatal(caplog):
    class Broken:
        name = "broken"

        def detect(self, report, t):
            raise ZeroDivisionError("boom")

    report = report_for(LOCAL, "12")
    with caplog.at_level(logging.ERROR):
        findings = detect_all(report, None, (Broken(), *DETECTORS))
    assert [f.name for f in findings] == ["job_failed"]
    assert "broken" in caplog.text


def test_registry_is_explicit_and_names_unique():
    names = [d.name for d in DETECTORS]
    assert len(names) == len(set(names)) == 27


def test_each_detector_lives_in_a_file_named_after_its_finding():
    # `outcome` is the one family: failed, timeout, cancelled, node failure, preempted.
    for detector in DETECTORS:
        module = type(detector).__module__.rsplit(".", 1)[1]
        assert module == detector.name, (module, detector.name)


def test_gpus_without_data_are_not_called_idle():
    # 4 GPUs allocated, metrics for 2 (one busy, one idle): ask for 3, not 1.
    report = report_for(HB, "8150389", Usage(
        gpu_utilization=(flat("a/0", 0.9), flat("a/1", 0.0))), gpus=4)
    f = finding(report, "gpu_idle")
    assert "2 had no data" in f.message and "`--gres=gpu:3`" in f.advice
