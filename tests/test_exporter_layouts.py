"""Every cgroup layout a site may have (jobs_exporter/README.md, "Cgroup layouts"), on real
captured trees (fixtures/SOURCES.md), Slurm 26.05's SLUID-named job directories included:
read, or reported as unreadable, never silently empty."""

from __future__ import annotations

import logging
import shutil

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from jobs_exporter import cgroupfs
from jobs_exporter.registry import JobsCollector
from jobs_exporter.settings import Settings
from tests.helpers.exporter_scrape import (
    FIXTURES,
    USERS,
    assert_golden,
    make_settings,
    scrape,
    series_of,
    value,
)

SCOPE = "cgroup/system.slice/slurmstepd.scope"
# fixtures/exporter/v2-sluid-26.05: job 16's directory and its batch step's slurmstepd.
SCOPE_26 = "cgroup/system.slice/v26n1_slurmstepd.scope"
SLUID = "s4A1M8HY8Z7700"
STEPD = "2965"
OTHER_SLUID = "s4A1M8HYDRA600"  # job 19's on the same cluster (slurmctld.log)


def tree(tmp_path, src: str):
    dst = tmp_path / src
    shutil.copytree(FIXTURES / src, dst, symlinks=True)
    return dst


def jobs(root, node: str = "vm", job_ids: cgroupfs.JobIds | None = None) -> list[str]:
    found = cgroupfs.discover_jobs(str(root / "cgroup"), str(root / "proc"), node, job_ids)
    return [j.job_id for j in found]


def unreadable(root, node: str = "vm", job_ids: cgroupfs.JobIds | None = None):
    return cgroupfs.find_unreadable(str(root / "cgroup"), str(root / "proc"), node, job_ids)


def collector_of(settings: Settings) -> tuple[JobsCollector, CollectorRegistry]:
    """One collector scraped again and again (``scrape`` makes a fresh one each time)."""
    collector = JobsCollector(settings, user_name=USERS.__getitem__)
    registry = CollectorRegistry()
    registry.register(collector)
    return collector, registry


def test_v1_plain_slurm_root(tmp_path):
    root = tree(tmp_path, "v1-samples")  # slurm/uid_*/job_*
    assert jobs(root) == ["10", "11"]
    assert unreadable(root, "vm") == []


def test_v1_several_slurmd_per_host_read_only_their_own_root(tmp_path):
    root = tree(tmp_path, "v1-local")  # slurm_vm/uid_1001/job_2
    for controller in ("cpuacct", "memory", "cpuset"):
        base = root / "cgroup" / controller
        shutil.copytree(base / "slurm_vm", base / "slurm_n2", symlinks=True)
        (base / "slurm_n2/uid_1001/job_2").rename(base / "slurm_n2/uid_1001/job_9")
    assert jobs(root, "vm") == ["2"]
    assert jobs(root, "n2") == ["9"]
    assert jobs(root, "n3") == []  # neither its own root nor a plain `slurm` one


def test_v2_through_systemd_and_with_ignore_systemd(tmp_path):
    # IgnoreSystemd=yes makes slurmd create the same system.slice/slurmstepd.scope itself
    root = tree(tmp_path, "v2-samples")
    assert jobs(root) == ["4"]
    # `system` is Slurm's own
    assert unreadable(root, "vm") == []


def test_v2_several_slurmd_per_host(tmp_path):
    root = tree(tmp_path, "v2-samples")
    (root / SCOPE).rename(root / "cgroup/system.slice/vm_slurmstepd.scope")
    assert jobs(root, "vm") == ["4"]


def test_sluid_job_is_exported_under_its_job_id(tmp_path):
    # Slurm 26.05's default: the directory is the job's SLUID, the id is in the title of
    # the slurmstepd in step_batch/slurm ("slurmstepd: [16.batch]").
    root = tree(tmp_path, "v2-sluid-26.05")
    assert jobs(root, "v26n1") == ["16"]
    assert unreadable(root, "v26n1") == []
    text = scrape(make_settings(root, node_name="v26n1"))
    assert value(text, "jobs_info", jobid="16", user="alice", uid="1001") == 1
    user = value(text, "jobs_cpu_seconds_total", jobid="16", mode="user")
    assert user == pytest.approx(70.348647)
    assert value(text, "jobs_cpus", jobid="16") == 2
    assert value(text, "jobs_memory_rss_bytes", jobid="16") == 74444800
    assert value(text, "jobs_memory_limit_bytes", jobid="16") == 300 * 2**20  # --mem=300M
    assert value(text, "jobs_pressure_waiting_seconds_total", jobid="16", resource="cpu") > 30
    assert value(text, "jobs_processes", jobid="16") == 3  # not its slurmstepd
    assert "jobs_exporter_unreadable_cgroups{" not in text
    assert_golden("v2-sluid-26.05", text)


def test_node_named_scope_of_slurm_24_11(tmp_path):
    root = tree(tmp_path, "v2-scope-24.11")  # v24n1_slurmstepd.scope/job_14
    assert jobs(root, "v24n1") == ["14"]
    assert unreadable(root, "v24n1") == []
    text = scrape(make_settings(root, node_name="v24n1"))
    assert value(text, "jobs_info", jobid="14", user="alice", uid="1001") == 1
    assert value(text, "jobs_memory_limit_bytes", jobid="14") == 300 * 2**20
    assert value(text, "jobs_pressure_waiting_seconds_total", jobid="14", resource="cpu") > 30
    assert value(text, "jobs_processes", jobid="14") == 3
    assert_golden("v2-scope-24.11", text)


def test_the_sluid_mapping_is_kept_while_its_directory_exists(tmp_path):
    root = tree(tmp_path, "v2-sluid-26.05")
    ids = cgroupfs.JobIds()
    assert jobs(root, "v26n1", ids) == ["16"]
    assert ids.known == {SLUID: "16"}
    # Learnt once: the title is not read again (here it could not be).
    (root / "proc" / STEPD / "cmdline").unlink()
    assert jobs(root, "v26n1", ids) == ["16"]
    # The job ended: its directory went, and its mapping with it.
    shutil.rmtree(root / SCOPE_26 / SLUID)
    assert jobs(root, "v26n1", ids) == []
    assert ids.known == {}


def test_the_collector_drops_the_mapping_of_a_vanished_directory(tmp_path):
    root = tree(tmp_path, "v2-sluid-26.05")
    collector, registry = collector_of(make_settings(root, node_name="v26n1"))
    assert value(generate_latest(registry).decode(), "jobs_info", jobid="16", user="alice",
                 uid="1001") == 1
    assert collector.job_ids.known == {SLUID: "16"}
    shutil.rmtree(root / SCOPE_26 / SLUID)
    assert series_of(generate_latest(registry).decode(), "16") == []
    assert collector.job_ids.known == {}


@pytest.mark.parametrize("why", ["no slurmstepd yet", "title unreadable"])
def test_a_sluid_whose_job_id_is_not_found_is_skipped_and_counted(tmp_path, caplog, why):
    root = tree(tmp_path, "v2-sluid-26.05")
    collector, registry = collector_of(make_settings(root, node_name="v26n1"))
    generate_latest(registry)  # job 16's SLUID is mapped
    # Another job's directory beside it (the SLUID of a later job of the same cluster).
    other = root / SCOPE_26 / OTHER_SLUID
    shutil.copytree(root / SCOPE_26 / SLUID, other)
    if why == "no slurmstepd yet":
        (other / "step_batch/slurm/cgroup.procs").write_text("")
    else:  # its slurmstepd (the same pid in this copy) cannot be read any more
        (root / "proc" / STEPD / "cmdline").unlink()
    with caplog.at_level(logging.DEBUG, logger="jobs_exporter"):
        text = generate_latest(registry).decode()
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="v2-sluid") == 1
    assert value(text, "jobs_info", jobid="16", user="alice", uid="1001") == 1
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(OTHER_SLUID in r.getMessage() for r in debug)
    assert jobs(root, "v26n1", collector.job_ids) == ["16"]
    assert unreadable(root, "v26n1", collector.job_ids) == [
        cgroupfs.Unreadable(str(other), "v2-sluid")
    ]
    # Not an error at once (a starting job's stepd may not be there yet) ...
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="jobs_exporter.registry"):
        text = generate_latest(registry).decode()
    # ... but when a second scrape in a row finds no id for it.
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="v2-sluid") == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and OTHER_SLUID in errors[0] and "CgroupJobIdPaths=yes" in errors[0]


@pytest.mark.parametrize("name", ["job_x1", "weird", "S4A1M8HY8Z7700"])
def test_an_unknown_directory_beside_v2_jobs_is_counted(tmp_path, name):
    root = tree(tmp_path, "v2-sluid-26.05")
    shutil.copytree(root / SCOPE_26 / SLUID, root / SCOPE_26 / name)  # with its slurmstepd
    found = unreadable(root, "v26n1")
    expected = [] if name == "job_x1" else [name]  # job_* is discovery's own
    assert [u.path.rsplit("/", 1)[1] for u in found] == expected
    assert all(u.layout == "unknown" for u in found)  # not a SLUID: no title looked up
    text = scrape(make_settings(root, node_name="v26n1"))
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="unknown") == (
        1 if expected else None)
    assert value(text, "jobs_info", jobid="16", user="alice", uid="1001") == 1


@pytest.mark.parametrize("name", ["job_x1", "weird", "S5K1KKYAYG5D00"])
def test_an_unknown_directory_beside_v1_jobs_is_counted(tmp_path, name):
    root = tree(tmp_path, "v1-local")
    (root / "cgroup/cpuacct/slurm_vm/uid_1001" / name).mkdir()
    found = unreadable(root, "vm")
    expected = [] if name == "job_x1" else [name]  # job_* is discovery's own
    assert [u.path.rsplit("/", 1)[1] for u in found] == expected
    assert all(u.layout == "unknown" for u in found)
    text = scrape(make_settings(root))
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="unknown") == (
        1 if expected else None)
    assert value(text, "jobs_info", jobid="2", user="alice", uid="1001") == 1
