"""GPU ownership comes only from what Slurm wrote, bounded; a job's environment is ignored.

The trees are real captures from the local stack (fixtures/SOURCES.md): job 3 ran with
``--gres=gpu:1`` (GPU 1), job 11 is a CPU-only job whose script exported
``SLURM_JOB_GPUS=1``, claiming job 3's GPU. ``scontrol`` is replayed from the output
captured for each job.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from jobs_exporter import gpu_alloc
from tests.helpers.exporter_scrape import (
    FIXTURES,
    assert_golden,
    make_settings,
    scrape,
    series_of,
    value,
)
from tests.helpers.fake_nvml import FakeNvml
from tests.helpers.memory import peak_allocated

GPU_JOB = FIXTURES / "v1-gpu"  # job 3, GRES=gpu:1(IDX:1)
HOSTILE_JOB = FIXTURES / "v1-cpu-hostile"  # job 11, CPU only, SLURM_JOB_GPUS=1 in environ
WHITELIST = FIXTURES / "devices" / "whitelist-195-1.list"
DEVICES_3 = "cgroup/devices/slurm_vm/uid_1001/job_3/devices.list"
HOSTILE_PIDS = ("8279", "8280")
# CPU-only job 1 whose name is "x\n     Nodes=vm CPU_IDs=0 Mem=100 GRES=gpu:1(IDX:0)".
NAME_WITH_NODES_LINE = FIXTURES / "scontrol" / "job-name-nodes-line.txt"


class ReplayScontrol:
    """Answers ``scontrol -d show job N`` with the output captured for job N."""

    def __init__(self, tree: Path, fail: bool = False):
        self.tree = tree
        self.fail = fail
        self.calls: list[str] = []

    def __call__(self, argv: Sequence[str]) -> str:
        assert list(argv[:4]) == ["scontrol", "-d", "show", "job"]
        self.calls.append(argv[4])
        if self.fail:
            raise subprocess.CalledProcessError(1, list(argv))
        return (self.tree / "scontrol" / f"{argv[4]}.txt").read_text()


def merged_tree(tmp_path: Path, hostile_value: str | None = None) -> Path:
    """Both captured jobs on one node, optionally with another SLURM_JOB_GPUS for job 11."""
    tree = tmp_path / "node"
    for src in (GPU_JOB, HOSTILE_JOB):
        shutil.copytree(src, tree, symlinks=True, dirs_exist_ok=True)
    if hostile_value is not None:
        for pid in HOSTILE_PIDS:
            environ = tree / "proc" / pid / "environ"
            claim = f"SLURM_JOB_GPUS={hostile_value}\0".encode()
            environ.write_bytes(environ.read_bytes().replace(b"SLURM_JOB_GPUS=1\0", claim))
            assert f"SLURM_JOB_GPUS={hostile_value}".encode() in environ.read_bytes()
    return tree


def scrape_node(tree: Path, scontrol: ReplayScontrol | None = None, **changes) -> str:
    settings = make_settings(tree, gpus="auto", **changes)
    return scrape(settings, nvml=FakeNvml(), scontrol=scontrol or ReplayScontrol(tree))


def gpu_series(text: str, jobid: str) -> list[str]:
    return [name for name in series_of(text, jobid) if name.startswith("jobs_gpu_")]


# ---------------------------------------------------------------- the reported attacks


def test_captured_hostile_job_does_not_get_another_jobs_gpu(tmp_path):
    text = scrape_node(merged_tree(tmp_path))
    assert_golden("v1-gpu-hostile", text)
    assert value(text, "jobs_gpu_utilization_ratio", jobid="3", gpu="1") == 0.0
    assert gpu_series(text, "11") == []
    assert value(text, "jobs_processes", jobid="11") == 2  # the job itself is reported


def test_garbage_gpu_variable_does_not_fail_the_collector(tmp_path):
    text = scrape_node(merged_tree(tmp_path, "x"))
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="3", gpu="1") == 15360 * 2**20
    assert gpu_series(text, "11") == []


def test_gpu_variable_naming_gpu_0_attributes_nothing(tmp_path):
    text = scrape_node(merged_tree(tmp_path, "0"))
    assert gpu_series(text, "11") == []
    assert value(text, "jobs_gpu_utilization_ratio", jobid="11", gpu="0") is None


def test_huge_gpu_range_in_environment_costs_nothing(tmp_path):
    tree = merged_tree(tmp_path, "0-20000000")
    with peak_allocated() as peak:
        text = scrape_node(tree)
    assert peak() < 64 * 2**20  # expanding the range took ~4 s and +1.3 GB of RSS
    assert value(text, "jobs_scrape_collector_duration_seconds", collector="gpu") is not None
    assert gpu_series(text, "11") == []


# ---------------------------------------------------------------- sources and bounds


def test_bad_prolog_file_drops_only_that_jobs_gpus(tmp_path, caplog):
    tree = merged_tree(tmp_path)
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    (alloc / "3").write_text("0-20000000\n")
    (alloc / "11").write_text("1\n")  # the prolog (root) says job 11 has GPU 1: trusted
    with peak_allocated() as peak:
        texts = [scrape_node(tree, gpu_alloc_dir=str(alloc)) for _ in range(2)]
    assert peak() < 64 * 2**20  # the range is refused, never expanded
    for text in texts:
        assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
        assert gpu_series(text, "3") == []
        assert value(text, "jobs_gpu_utilization_ratio", jobid="11", gpu="1") == 0.0
        assert value(text, "jobs_memory_rss_bytes", jobid="3") is not None  # rest of job 3 kept


def test_prolog_file_wins_and_scontrol_is_not_asked(tmp_path):
    tree = merged_tree(tmp_path)
    alloc = tmp_path / "gpus"
    alloc.mkdir()
    (alloc / "3").write_text("0-1\n")
    (alloc / "11").write_text("")  # CPU-only job: no GPUs
    scontrol = ReplayScontrol(tree)
    text = scrape_node(tree, scontrol, gpu_alloc_dir=str(alloc))
    assert value(text, "jobs_gpu_utilization_ratio", jobid="3", gpu="0") == 1.0
    assert value(text, "jobs_gpu_utilization_ratio", jobid="3", gpu="1") == 0.0
    assert scontrol.calls == []


def test_scontrol_is_asked_once_per_job(tmp_path):
    tree = merged_tree(tmp_path)
    scontrol = ReplayScontrol(tree)
    from prometheus_client import CollectorRegistry, generate_latest

    from jobs_exporter.registry import JobsCollector

    registry = CollectorRegistry()
    settings = make_settings(tree, gpus="auto")
    registry.register(JobsCollector(settings, nvml=FakeNvml(), scontrol=scontrol))
    texts = [generate_latest(registry).decode() for _ in range(3)]
    assert sorted(scontrol.calls) == ["11", "3"]
    assert all('jobs_gpu_utilization_ratio{gpu="1",jobid="3"} 0.0' in t for t in texts)


def test_failing_scontrol_reports_no_gpus_and_keeps_the_collector(tmp_path):
    tree = merged_tree(tmp_path)
    scontrol = ReplayScontrol(tree, fail=True)
    text = scrape_node(tree, scontrol)
    assert value(text, "jobs_scrape_collector_success", collector="gpu") == 1
    assert gpu_series(text, "3") == [] and gpu_series(text, "11") == []
    assert len(scontrol.calls) == 1  # then a pause before asking slurmctld again


def test_devices_whitelist_gives_the_allocation_without_scontrol(tmp_path):
    """The whitelist allows /dev/nvidia1: the card whose NVML minor number is 1 (the
    H100 here, given minor 1; the T4 is /dev/nvidia0)."""
    tree = merged_tree(tmp_path)
    shutil.copy(WHITELIST, tree / DEVICES_3)
    scontrol = ReplayScontrol(tree)
    h100, t4 = FakeNvml().devices
    settings = make_settings(tree, gpus="auto")
    text = scrape(settings, nvml=FakeNvml([{**h100, "minor_number": 1}, t4]), scontrol=scontrol)
    assert value(text, "jobs_gpu_utilization_ratio", jobid="3", gpu="1") == 1.0
    assert value(text, "jobs_gpu_memory_total_bytes", jobid="3", gpu="1") == h100[
        "memory_total_bytes"]
    assert scontrol.calls == ["11"]  # job 11's devices.list (`a *:* rwm`) tells nothing


@pytest.mark.parametrize(
    ("text", "gpus"),
    [("0", (0,)), ("0,1\n", (0, 1)), ("0-1,3", (0, 1, 3)), ("", ()), ("1023", (1023,))],
)
def test_parse_gpu_list(text, gpus):
    assert gpu_alloc.parse_gpu_list(text) == gpus


@pytest.mark.parametrize(
    "text", ["x", "0-20000000", "1024", "3-1", "-1", "0-", "１", "0" * 5000, "1e3", " 0 - 1"]
)
def test_parse_gpu_list_rejects(text):
    with peak_allocated() as peak, pytest.raises(ValueError):
        gpu_alloc.parse_gpu_list(text)
    assert peak() < 2**20  # refused before any range is expanded


def test_parse_devices_list_on_captures():
    job = (GPU_JOB / DEVICES_3).read_text()
    assert job == "a *:* rwm\n"  # what Slurm 22.05 leaves: denied devices are hidden
    assert gpu_alloc.parse_devices_list(job) is None
    # 195:255 (nvidiactl) is allowed too but is not a GPU.
    assert gpu_alloc.parse_devices_list(WHITELIST.read_text()) == ((195, 1),)
    assert gpu_alloc.parse_devices_list("c 195:* rwm\n") is None
    assert gpu_alloc.parse_devices_list("c 1:3 rwm\n") == ()


def test_parse_devices_list_amd_render_nodes():
    """AMD: gres.conf names /dev/dri/renderD<N> (226:N, N >= 128); card nodes (226:0-127)
    and /dev/kfd (a major of its own) are not GPUs of a job."""
    text = "c 226:129 rw\nc 226:1 rw\nc 238:0 rwm\nc 226:136 rwm\n"
    assert gpu_alloc.parse_devices_list(text) == ((226, 129), (226, 136))
    assert gpu_alloc.parse_devices_list("c 226:* rwm\n") is None
    assert gpu_alloc.parse_devices_list("c 226:99999999 rw\nc 195:x rw\n") == ()


def test_parse_scontrol_on_captures():
    gpu_text = (GPU_JOB / "scontrol" / "3.txt").read_text()
    assert gpu_alloc.parse_scontrol_gpus(gpu_text, "3", "vm") == (1,)
    assert gpu_alloc.parse_scontrol_gpus(gpu_text, "3", "vm2") == ()  # not on this node
    cpu_text = (HOSTILE_JOB / "scontrol" / "11.txt").read_text()
    assert gpu_alloc.parse_scontrol_gpus(cpu_text, "11", "vm") == ()
    with pytest.raises(ValueError):
        gpu_alloc.parse_scontrol_gpus(gpu_text, "31", "vm")  # an answer about another job
    with pytest.raises(ValueError):
        gpu_alloc.parse_scontrol_gpus("slurm_load_jobs error: Invalid job id\n", "3", "vm")


def test_job_name_holding_a_detail_line_gets_no_gpu():
    text = NAME_WITH_NODES_LINE.read_text()
    assert text.splitlines()[1] == "     Nodes=vm CPU_IDs=0 Mem=100 GRES=gpu:1(IDX:0)"
    assert "     Nodes=vm CPU_IDs=0 Mem=100 GRES=" in text.splitlines()  # Slurm's own line
    # The first Nodes= line after the name used to give this CPU-only job GPU 0.
    assert gpu_alloc.parse_scontrol_gpus(text, "1", "vm") == ()


def test_job_name_faking_the_detail_anchor_too_gets_no_gpu():
    """A name that also fakes ``JOB_GRES=`` gives two answers: neither is trusted."""
    text = NAME_WITH_NODES_LINE.read_text()
    fake = "JobName=x\n   JOB_GRES=gpu:1\n     Nodes=vm CPU_IDs=0 Mem=100 GRES=gpu:1(IDX:0)"
    text = text.replace("JobName=x\n     Nodes=vm CPU_IDs=0 Mem=100 GRES=gpu:1(IDX:0)", fake, 1)
    assert text.count("GRES=gpu:1(IDX:0)") == 1 and "JOB_GRES=gpu:1" in text
    with pytest.raises(ValueError, match="different GPU lines"):
        gpu_alloc.parse_scontrol_gpus(text, "1", "vm")
    # The same fake aimed at another node changes nothing on this one.
    other = text.replace(
        "     Nodes=vm CPU_IDs=0 Mem=100 GRES=gpu:1", "     Nodes=vm9 CPU_IDs=0 Mem=100 GRES=gpu:1"
    )
    assert gpu_alloc.parse_scontrol_gpus(other, "1", "vm") == ()


def test_work_dir_holding_a_detail_line_is_not_read():
    """Free text after the fixed fields (WorkDir, Command, ...) is not a detail line either."""
    text = (GPU_JOB / "scontrol" / "3.txt").read_text()
    text = text.replace(
        "WorkDir=/tmp", "WorkDir=/tmp/a\n     Nodes=vm CPU_IDs=0 Mem=1 GRES=gpu:1(IDX:0)"
    )
    assert gpu_alloc.parse_scontrol_gpus(text, "3", "vm") == (1,)


@pytest.mark.parametrize(
    ("line", "node", "gpus"),
    [
        ("Nodes=b02r1n[07-08] CPU_IDs=0-5 Mem=24576 GRES=gpu(IDX:0)", "b02r1n08", (0,)),
        ("Nodes=b02r1n[07-08] CPU_IDs=0-5 Mem=24576 GRES=gpu(IDX:0)", "b02r1n8", ()),
        ("Nodes=n1 CPU_IDs=0-1 Mem=1024 GRES=gpu:a100:2(IDX:0-1)", "n1", (0, 1)),
        ("Nodes=n1 CPU_IDs=0-1 Mem=1024 GRES=gpu:2(IDX:0,2)", "n1", (0, 2)),
        ("Nodes=n1 CPU_IDs=0-1 Mem=1024 GRES=gpu:1(IDX:0-20000000)", "n1", None),
        ("Nodes=gv[21,139] CPU_IDs=0-1 Mem=0 GRES=", "gv139", ()),
    ],
)
def test_parse_scontrol_lines(line, node, gpus):
    text = f"JobId=5 JobName=x\n   JOB_GRES=gpu:1\n     {line}\n"
    if gpus is None:
        with pytest.raises(ValueError):
            gpu_alloc.parse_scontrol_gpus(text, "5", node)
    else:
        assert gpu_alloc.parse_scontrol_gpus(text, "5", node) == gpus


@pytest.mark.parametrize(
    ("expression", "node", "found"),
    [
        ("vm", "vm", True),
        ("vm", "vm2", False),
        ("n[01-04]", "n03", True),
        ("n[01-04]", "n05", False),
        ("a1,n[1-3,7]", "n7", True),
        ("n[1-3]-ib", "n2-ib", True),
        ("n[1-3]", "nx", False),
    ],
)
def test_hostlist_contains(expression, node, found):
    assert gpu_alloc.hostlist_contains(expression, node) is found


def test_allocation_file_reads_bounded(tmp_path):
    (tmp_path / "7").write_text("0,2\n")
    assert gpu_alloc.read_allocation_file(str(tmp_path), "7") == (0, 2)
    assert gpu_alloc.read_allocation_file(str(tmp_path), "8") is None
    assert gpu_alloc.read_allocation_file(str(tmp_path), "../7") is None
    (tmp_path / "9").write_text("0," * 100_000)
    with pytest.raises(ValueError):
        gpu_alloc.read_allocation_file(str(tmp_path), "9")
