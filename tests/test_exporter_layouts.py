"""Every cgroup layout a site may have (exporter/README.md, "Cgroup layouts"), on real
captured trees, plus Slurm 26.05's SLUID-named job directories built from its published
statement (fixtures/SOURCES.md): read, or reported as unreadable, never silently empty."""

from __future__ import annotations

import logging
import shutil

import pytest

from exporter import cgroupfs
from tests.helpers.exporter_scrape import FIXTURES, make_settings, scrape, value

SCOPE = "cgroup/system.slice/slurmstepd.scope"
# The example path of Slurm's cgroup v2 documentation for 26.05 (see fixtures/SOURCES.md).
SLUID = "s5K1KKYAYG5D00"


def tree(tmp_path, src: str):
    dst = tmp_path / src
    shutil.copytree(FIXTURES / src, dst, symlinks=True)
    return dst


def jobs(root, node: str = "vm") -> list[str]:
    found = cgroupfs.discover_jobs(str(root / "cgroup"), str(root / "proc"), node)
    return [j.job_id for j in found]


def test_v1_plain_slurm_root(tmp_path):
    root = tree(tmp_path, "v1-samples")  # slurm/uid_*/job_*
    assert jobs(root) == ["10", "11"]
    assert cgroupfs.find_unreadable(str(root / "cgroup"), "vm") == []


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
    assert cgroupfs.find_unreadable(str(root / "cgroup"), "vm") == []  # `system` is Slurm's


def test_v2_several_slurmd_per_host(tmp_path):
    root = tree(tmp_path, "v2-samples")
    (root / SCOPE).rename(root / "cgroup/system.slice/vm_slurmstepd.scope")
    assert jobs(root, "vm") == ["4"]


def test_sluid_directories_are_an_error_and_a_metric(tmp_path, caplog):
    root = tree(tmp_path, "v2-samples")
    (root / SCOPE / "job_4").rename(root / SCOPE / SLUID)
    assert jobs(root) == []
    assert cgroupfs.find_unreadable(str(root / "cgroup"), "vm") == [
        cgroupfs.Unreadable(str(root / SCOPE / SLUID), "v2-sluid")
    ]
    with caplog.at_level(logging.ERROR, logger="exporter.registry"):
        text = scrape(make_settings(root))
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="v2-sluid") == 1
    assert any(SLUID in r.getMessage() and "CgroupJobIdPaths=yes" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("name", ["job_x1", "weird", "S5K1KKYAYG5D00"])
def test_an_unknown_directory_beside_v1_jobs_is_counted(tmp_path, name):
    root = tree(tmp_path, "v1-local")
    (root / "cgroup/cpuacct/slurm_vm/uid_1001" / name).mkdir()
    found = cgroupfs.find_unreadable(str(root / "cgroup"), "vm")
    expected = [] if name == "job_x1" else [name]  # job_* is discovery's own
    assert [u.path.rsplit("/", 1)[1] for u in found] == expected
    assert all(u.layout == "unknown" for u in found)
    text = scrape(make_settings(root))
    assert value(text, "jobs_exporter_unreadable_cgroups", layout="unknown") == (
        1 if expected else None)
    assert value(text, "jobs_info", jobid="2", user="alice", uid="1001") == 1
