"""Golden tests: the exporter on captured cgroup + /proc trees vs fixtures/exporter/golden."""

from __future__ import annotations

import logging
import shutil

import pytest

from jobs_exporter import cgroupfs
from jobs_exporter.collectors.io import IoCollector
from jobs_exporter.collectors.processes import ProcessesCollector
from jobs_exporter.collectors.scratch import ScratchCollector
from tests.helpers.exporter_scrape import (
    FIXTURES,
    GOLDEN,
    assert_golden,
    make_settings,
    scrape,
    series_of,
    value,
)
from tests.helpers.fake_nvml import FakeNvml
from tests.helpers.promtool import check_metrics

V1 = FIXTURES / "v1-samples"
V1_LOCAL = FIXTURES / "v1-local"
V2 = FIXTURES / "v2-samples"
SCRATCH = ("/tmp/jobreport-scratch",)


def copy_tree(src, dst):
    # symlinks=True keeps fd/* and cwd as links (their targets need not exist).
    shutil.copytree(src, dst, symlinks=True)
    return dst


def test_v1_public_samples():
    text = scrape(make_settings(V1, scratch=SCRATCH))
    assert_golden("v1-samples", text)
    assert value(text, "jobs_info", jobid="11", user="20821", uid="20821") == 1
    # job_11 has only `tasks` (thread ids) without /proc files: no live process, so no
    # I/O series (a sum of nothing is not 0 bytes).
    assert value(text, "jobs_processes", jobid="11") == 0
    assert value(text, "jobs_read_bytes_total", jobid="11") is None
    assert value(text, "jobs_read_bytes_total", jobid="10") == 1024
    assert value(text, "jobs_processes", jobid="10") == 1
    assert value(text, "jobs_memory_rss_bytes", jobid="11") == 6051483648  # total_rss
    assert value(text, "jobs_cpus", jobid="11") == 40


def test_v1_local_real_job():
    text = scrape(make_settings(V1_LOCAL, scratch=SCRATCH))
    assert_golden("v1-local", text)
    assert value(text, "jobs_info", jobid="2", user="alice", uid="1001") == 1
    assert value(text, "jobs_processes", jobid="2") == 3
    assert value(text, "jobs_scratch_in_use", jobid="2") == 1
    assert value(text, "jobs_memory_limit_bytes", jobid="2") == 500 * 2**20  # --mem=500M


def test_v1_local_gpu_job_environment_is_not_an_allocation():
    # The captured job's environ says SLURM_JOB_GPUS=0, but with no prolog file and no
    # scontrol answer nothing Slurm wrote says so: no GPU series.
    environ = (V1_LOCAL / "proc/8272/environ").read_bytes()
    assert b"SLURM_JOB_GPUS=0\0" in environ
    text = scrape(make_settings(V1_LOCAL, gpus="auto", scontrol=""), nvml=FakeNvml())
    assert series_of(text, "2") and not [s for s in series_of(text, "2") if "gpu" in s]
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1


def test_gpu_job_by_prolog_file_reports_idle_allocated_gpu(tmp_path):
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    (alloc / "2").write_text("0-1\n")
    text = scrape(make_settings(V1_LOCAL, gpus="auto", gpu_alloc_dir=str(alloc)), nvml=FakeNvml())
    # GPU 1 (the T4 capture) runs nothing: still reported, at 0 %.
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="1") == 0.0
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="2", gpu="1") == 15360 * 2**20
    assert value(text, "jobs_gpu_utilization_ratio", jobid="2", gpu="0") == 1.0


def test_cpu_only_node_has_no_gpu_series(caplog):
    settings = make_settings(V1_LOCAL, gpus="auto")
    nvml = FakeNvml(driver=False)
    from prometheus_client import CollectorRegistry, generate_latest

    from jobs_exporter.registry import JobsCollector

    registry = CollectorRegistry()
    registry.register(JobsCollector(settings, nvml=nvml, user_name=lambda uid: "alice"))
    with caplog.at_level(logging.INFO):
        texts = [generate_latest(registry).decode() for _ in range(3)]
    assert all("jobs_gpu_" not in t for t in texts)
    assert all('jobs_scrape_collector_success{collector="gpu"} 1.0' in t for t in texts)
    disabled = [r for r in caplog.records if "GPU collector disabled" in r.getMessage()]
    assert len(disabled) == 1  # one line, not one per scrape
    assert nvml.calls.count("nvmlInit") == 1


@pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN.glob("*.prom")))
def test_goldens_pass_promtool(golden: str):
    # Each golden is the exposition of a captured tree (the tests here assert it byte for
    # byte); together they hold every family the exporter has, GPU ones included.
    assert check_metrics((GOLDEN / golden).read_text()) == (0, "")


def test_v2_public_samples():
    text = scrape(make_settings(V2, scratch=SCRATCH))
    assert_golden("v2-samples", text)
    # uid from the owner of the job's process (49276's status), not the path.
    assert value(text, "jobs_info", jobid="4", user="20821", uid="20821") == 1
    assert value(text, "jobs_memory_max_usage_bytes", jobid="4") == 7229440  # memory.peak
    assert "jobs_cpu_core_seconds_total{" not in text  # never faked on v2


def test_v2_with_psi_and_without_memory_peak(tmp_path):
    tree = copy_tree(V2, tmp_path / "v2")
    job = tree / "cgroup/system.slice/slurmstepd.scope/job_4"
    (job / "memory.peak").unlink()  # kernels < 6.8
    for resource in ("cpu", "memory", "io"):
        shutil.copy(FIXTURES / "psi" / f"{resource}.pressure", job / f"{resource}.pressure")
    text = scrape(make_settings(tree))
    assert_golden("v2-psi-no-peak", text)
    assert value(text, "jobs_memory_max_usage_bytes", jobid="4") is None
    assert value(text, "jobs_memory_usage_bytes", jobid="4") == 5660672
    assert value(text, "jobs_pressure_waiting_seconds_total", jobid="4", resource="cpu") == (
        pytest.approx(10.65703)
    )
    assert 'jobs_scrape_collector_success{collector="memory"} 1.0' in text


def test_v2_node_named_scope(tmp_path):
    tree = copy_tree(V2, tmp_path / "v2")
    sl = tree / "cgroup/system.slice"
    (sl / "slurmstepd.scope").rename(sl / "vm_slurmstepd.scope")
    text = scrape(make_settings(tree))
    assert value(text, "jobs_info", jobid="4", user="20821", uid="20821") == 1


def test_job_vanishing_mid_scrape(tmp_path):
    tree = copy_tree(V1, tmp_path / "v1")

    def discover_then_job_ends(cgroup_root, proc_root, node_name):
        jobs = cgroupfs.discover_jobs(cgroup_root, proc_root, node_name)
        for controller in ("cpuacct", "memory", "cpuset"):
            shutil.rmtree(tree / "cgroup" / controller / "slurm/uid_20821/job_10")
        shutil.rmtree(tree / "proc" / "26231")
        return jobs

    text = scrape(make_settings(tree, scratch=SCRATCH), discover=discover_then_job_ends)
    assert_golden("v1-samples-job10-vanished", text)
    # Skipped entirely: no jobs_info, no zeros from the /proc collectors (no fake reset).
    assert series_of(text, "10") == []
    assert value(text, "jobs_info", jobid="11", user="20821", uid="20821") == 1
    assert value(text, "jobs_memory_rss_bytes", jobid="11") == 6051483648
    assert "} 0.0" not in "".join(
        line for line in text.splitlines() if line.startswith("jobs_scrape_collector_success")
    )


def test_job_vanishing_is_found_by_the_proc_collectors_alone(tmp_path):
    # Without the cgroup collectors, processes/io/scratch must notice the job ended; the
    # cpuacct directory alone going is enough (Slurm removes them one by one).
    def discover_then_job_ends(cgroup_root, proc_root, node_name):
        jobs = cgroupfs.discover_jobs(cgroup_root, proc_root, node_name)
        shutil.rmtree(f"{cgroup_root}/cpuacct/slurm/uid_20821/job_10")
        shutil.rmtree(f"{proc_root}/26231")
        return jobs

    for collector in (ProcessesCollector, IoCollector, ScratchCollector):
        tree = copy_tree(V1, tmp_path / collector.name)
        text = scrape(
            make_settings(tree, scratch=SCRATCH),
            collectors=(collector,),
            discover=discover_then_job_ends,
        )
        assert series_of(text, "10") == [], collector.name
        assert value(text, "jobs_info", jobid="11", user="20821", uid="20821") == 1


class EndsJob10:
    """Removes job 10's cgroup and process between two collectors."""

    name = "ends_job_10"
    tree = None

    def __init__(self, context):
        pass

    def collect(self, jobs):
        for controller in ("cpuacct", "memory", "cpuset"):
            shutil.rmtree(self.tree / "cgroup" / controller / "slurm/uid_20821/job_10")
        shutil.rmtree(self.tree / "proc" / "26231")
        yield from ()


def test_job_ending_between_collectors_is_dropped_entirely(tmp_path, monkeypatch):
    from jobs_exporter.registry import COLLECTORS

    tree = copy_tree(V1, tmp_path / "v1")
    monkeypatch.setattr(EndsJob10, "tree", tree)
    # cpu and memory read job 10 before it ends; their series must not survive alone.
    collectors = (*COLLECTORS[:2], EndsJob10, *COLLECTORS[2:])
    text = scrape(make_settings(tree, scratch=SCRATCH), collectors=collectors)
    assert series_of(text, "10") == []
    assert value(text, "jobs_cpu_seconds_total", jobid="11", mode="user") == 33135.61


def test_job_whose_processes_all_exited_is_still_reported(tmp_path):
    # The cgroup is still there: the job runs (processes 0 is true), but an I/O sum of 0
    # would be a false counter reset, so there is no I/O series.
    tree = copy_tree(V1_LOCAL, tmp_path / "node")
    for pid in ("8272", "8274", "8276"):
        shutil.rmtree(tree / "proc" / pid)
    text = scrape(make_settings(tree, scratch=SCRATCH))
    assert value(text, "jobs_info", jobid="2", user="alice", uid="1001") == 1
    assert value(text, "jobs_processes", jobid="2") == 0
    assert value(text, "jobs_threads", jobid="2") == 0
    assert value(text, "jobs_scratch_in_use", jobid="2") == 0
    assert value(text, "jobs_read_bytes_total", jobid="2") is None
    assert value(text, "jobs_write_syscalls_total", jobid="2") is None
    assert value(text, "jobs_memory_limit_bytes", jobid="2") == 500 * 2**20


def test_file_missing_in_a_live_cgroup_skips_only_that_reading(tmp_path):
    # v2 without the memory controller enabled for the job: no memory.* files.
    tree = copy_tree(V2, tmp_path / "v2")
    job = tree / "cgroup/system.slice/slurmstepd.scope/job_4"
    for path in job.glob("memory.*"):
        path.unlink()
    text = scrape(make_settings(tree))
    assert value(text, "jobs_memory_usage_bytes", jobid="4") is None
    assert value(text, "jobs_info", jobid="4", user="20821", uid="20821") == 1
    assert value(text, "jobs_cpu_seconds_total", jobid="4", mode="user") is not None
    assert value(text, "jobs_processes", jobid="4") is not None


def test_other_slurmds_jobs_are_ignored(tmp_path):
    tree = copy_tree(V1_LOCAL, tmp_path / "node")
    for controller in ("cpuacct", "memory", "cpuset"):
        shutil.copytree(
            V1 / "cgroup" / controller / "slurm",
            tree / "cgroup" / controller / "slurm_othernode",
        )
    text = scrape(make_settings(tree))
    assert value(text, "jobs_info", jobid="2", user="alice", uid="1001") == 1
    assert 'jobid="10"' not in text and 'jobid="11"' not in text


def test_plain_slurm_root_is_the_fallback_only(tmp_path):
    tree = copy_tree(V1_LOCAL, tmp_path / "node")
    for controller in ("cpuacct", "memory", "cpuset"):
        shutil.copytree(
            V1 / "cgroup" / controller / "slurm", tree / "cgroup" / controller / "slurm"
        )
    assert 'jobid="10"' not in scrape(make_settings(tree))  # slurm_vm exists: used alone
    assert 'jobid="10"' in scrape(make_settings(tree, node_name="n1"))  # no slurm_n1


def test_no_slurm_tree_gives_no_jobs(tmp_path):
    text = scrape(make_settings(tmp_path))
    assert "jobs_info{" not in text
    assert 'jobs_scrape_collector_success{collector="discovery"} 1.0' in text


class BrokenCollector:
    name = "broken"

    def __init__(self, context):
        pass

    def collect(self, jobs):
        yield from ()
        raise RuntimeError("boom")


def test_failing_collector_is_reported_not_fatal(caplog):
    from jobs_exporter.registry import COLLECTORS

    with caplog.at_level(logging.ERROR):
        text = scrape(make_settings(V1_LOCAL), collectors=(BrokenCollector, *COLLECTORS))
    assert 'jobs_scrape_collector_success{collector="broken"} 0.0' in text
    assert 'jobs_scrape_collector_success{collector="cpu"} 1.0' in text
    assert value(text, "jobs_processes", jobid="2") == 3
    assert any("collector broken failed" in r.getMessage() for r in caplog.records)


def test_v1_without_cpuset_job_dirs_still_reports_cpu(tmp_path):
    tree = copy_tree(V1_LOCAL, tmp_path / "node")
    shutil.rmtree(tree / "cgroup/cpuset/slurm_vm/uid_1001")
    text = scrape(make_settings(tree))
    assert value(text, "jobs_cpu_seconds_total", jobid="2", mode="user") > 0
    assert value(text, "jobs_cpus", jobid="2") is None
