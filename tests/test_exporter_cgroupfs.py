"""Kept-open cgroup files on the real v1 hierarchy: re-reads see new values, removal is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from jobs_exporter import cgroup_files, cgroup_parsers, cgroupfs
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.needs("root")  # it makes cgroups in the real v1 hierarchy


MEMORY = "/sys/fs/cgroup/memory"


@pytest.fixture
def cgroup():
    path = f"{MEMORY}/jobreport-test-{os.getpid()}"
    os.mkdir(path)
    try:
        yield path
    finally:
        if os.path.isdir(path):
            os.rmdir(path)


def test_pread_of_a_kept_file_sees_the_current_value(cgroup):
    files = cgroup_files.OpenFiles()
    limit = f"{cgroup}/memory.limit_in_bytes"
    assert int(files.read(limit)) > 2**40  # unlimited
    with open(limit, "w") as f:
        f.write(str(256 * 2**20))
    assert int(files.read(limit)) == 256 * 2**20  # same fd, new value
    assert len(files) == 1
    stat = files.read(f"{cgroup}/memory.stat")
    assert "total_rss" in cgroup_parsers.parse_flat_keyed(stat)
    files.retain(())
    assert len(files) == 0


def test_removed_cgroup_reads_as_gone_and_its_file_is_closed(cgroup):
    files = cgroup_files.OpenFiles()
    usage = f"{cgroup}/memory.usage_in_bytes"
    files.read(usage)
    os.rmdir(cgroup)
    with pytest.raises(FileNotFoundError):
        files.read(usage)  # ENODEV through the kept fd
    assert len(files) == 0
    with pytest.raises(FileNotFoundError):
        files.read(usage)  # and reopening finds nothing


def test_retain_keeps_only_live_jobs_files(cgroup):
    files = cgroup_files.OpenFiles()
    files.read(f"{cgroup}/memory.usage_in_bytes")
    files.read(f"{MEMORY}/memory.usage_in_bytes")
    files.retain([cgroup])
    assert len(files) == 1
    files.close()
    assert len(files) == 0


def test_files_past_the_cap_are_read_by_path(cgroup):
    files = cgroup_files.OpenFiles(max_open=1)
    files.read(f"{cgroup}/memory.usage_in_bytes")
    assert int(files.read(f"{cgroup}/memory.limit_in_bytes")) > 0
    assert len(files) == 1


def test_discovery_reads_every_pid_of_a_big_leaf():
    # cgroup.procs of 1,000 processes is several seq_file reads (about a page each).
    node = f"jobreport-test-{os.getpid()}"
    dirs = [f"/sys/fs/cgroup/{c}/slurm_{node}/uid_0/job_7/step_0/task_0" for c in ("cpuacct",)]
    for d in dirs:
        os.makedirs(d)
    script = "read go; i=1; while [ $i -lt 1000 ]; do sleep 60 & i=$((i+1)); done; exec sleep 60"
    shell = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)
    try:
        for d in dirs:
            with open(f"{d}/cgroup.procs", "w") as f:
                f.write(str(shell.pid))
        shell.stdin.write(b"go\n")
        shell.stdin.close()
        procs = f"{dirs[0]}/cgroup.procs"
        wait_for(lambda: len(open(procs).read().split()) >= 1000, 60,  # noqa: SIM115
                 "the 1000 processes in the cgroup", every=0.1)
        assert len(open(procs).read()) > 4096  # more than one page
        for files in (None, cgroup_files.OpenFiles()):
            jobs = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node)
            assert [len(j.pids) for j in jobs] == [1000]
            if files is not None:
                assert len(files.read(procs).split()) == 1000
    finally:
        for pid in open(f"{dirs[0]}/cgroup.procs").read().split():
            os.kill(int(pid), signal.SIGKILL)
        shell.wait()
        for d in dirs:  # task_0 up to slurm_<node>, children first
            for depth in range(5):
                path = d.rsplit("/", depth)[0] if depth else d
                for _ in range(50):  # a killed task leaves its cgroup a moment later
                    try:
                        os.rmdir(path)
                        break
                    except OSError:
                        time.sleep(0.05)


def test_a_kept_walk_follows_steps_coming_going_and_nesting():
    """``cgroupfs.Walks`` against a fresh walk on the real v1 hierarchy: a step added, one
    removed while another is added (the job directory's link count unchanged), a leaf that
    gains a cgroup of its own."""
    node = f"jobreport-walk-{os.getpid()}"
    job = f"/sys/fs/cgroup/cpuacct/slurm_{node}/uid_0/job_8"
    sleeps: list[subprocess.Popen] = []
    made: list[str] = []

    def step(path: str) -> int:
        os.makedirs(path)
        made.append(path)
        proc = subprocess.Popen(["sleep", "120"])
        sleeps.append(proc)
        with open(f"{path}/cgroup.procs", "w") as f:
            f.write(str(proc.pid))
        return proc.pid

    walks = cgroupfs.Walks()

    def found() -> tuple[set[int], set[str]]:
        (kept,) = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node, walks=walks)
        (fresh,) = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node)
        assert (kept.pids, kept.steps) == (fresh.pids, fresh.steps)
        assert job in walks  # every directory counts its subdirectories: the walk is kept
        return set(kept.pids), set(kept.steps or ())

    try:
        first = step(f"{job}/step_0/task_0")
        assert found() == ({first}, {"0"})
        assert found() == ({first}, {"0"})  # from the kept walk
        second = step(f"{job}/step_1/task_0")
        assert found() == ({first, second}, {"0", "1"})
        # step_0 ends and step_2 starts between two scrapes: two subdirectories still
        sleeps[0].kill()
        sleeps[0].wait()
        for path in (f"{job}/step_0/task_0", f"{job}/step_0"):
            wait_for(lambda p=path: _rmdir(p), 10, f"{path} removed", every=0.05)
        third = step(f"{job}/step_2/task_0")
        assert os.stat(job).st_nlink == 4
        assert found() == ({second, third}, {"1", "2"})
        # the program makes a cgroup of its own under its task and moves there
        nested = f"{job}/step_2/task_0/worker"
        os.mkdir(nested)
        made.append(nested)
        with open(f"{nested}/cgroup.procs", "w") as f:
            f.write(str(third))
        assert found() == ({second, third}, {"1", "2"})
    finally:
        for proc in sleeps:
            proc.kill()
            proc.wait()
        for path in sorted(set(made) | {f"{job}/step_{s}" for s in range(3)}, reverse=True):
            wait_for(lambda p=path: _rmdir(p), 10, f"{path} removed", every=0.05)
        for depth in range(3):  # job_8, uid_0, slurm_<node>
            wait_for(lambda d=depth: _rmdir(job.rsplit("/", d)[0] if d else job), 10,
                     "the job's cgroups removed", every=0.05)


def test_a_controller_directory_made_after_the_first_scrape_is_found():
    """A v1 job's directories in the other controllers are looked for until all are
    there (slurmd makes them one after another), then kept till the job ends."""
    node = f"jobreport-ctl-{os.getpid()}"
    roots = {c: f"/sys/fs/cgroup/{c}/slurm_{node}" for c in ("cpuacct", "memory")}
    job = "uid_0/job_5"
    os.makedirs(f"{roots['cpuacct']}/{job}/step_0/task_0")
    os.makedirs(f"{roots['memory']}/uid_0")
    walks = cgroupfs.Walks()

    def dirs() -> dict[str, str]:
        (found,) = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node, walks=walks)
        return dict(found.dirs)

    try:
        assert dirs() == {"cpuacct": f"{roots['cpuacct']}/{job}"}
        assert dirs() == {"cpuacct": f"{roots['cpuacct']}/{job}"}
        os.mkdir(f"{roots['memory']}/{job}")
        assert dirs() == {c: f"{root}/{job}" for c, root in roots.items()}
        assert f"{roots['cpuacct']}/{job}" in walks.controllers
        os.rmdir(f"{roots['memory']}/{job}")  # the job ends
        for path in (f"{job}/step_0/task_0", f"{job}/step_0", job):
            os.rmdir(f"{roots['cpuacct']}/{path}")
        assert cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node, walks=walks) == []
        assert walks.controllers == {}
    finally:
        for root in roots.values():
            for path in (f"{job}/step_0/task_0", f"{job}/step_0", job, "uid_0", ""):
                _rmdir(f"{root}/{path}".rstrip("/"))


def test_a_step_ending_under_the_walk_leaves_the_job_found(monkeypatch):
    """A step's cgroup removed while the walk reads another step's leaf (what a kept walk
    that found a leaf gone walks into): the job is still found, with the live step's
    process, and its walk is not kept. It was dropped from the scrape before, and its
    I/O sums of exited steps with it (a counter reset in the middle of the job)."""
    node = f"jobreport-race-{os.getpid()}"
    job = f"/sys/fs/cgroup/cpuacct/slurm_{node}/uid_0/job_9"
    sleeps: dict[str, subprocess.Popen] = {}
    for name in ("step_0", "step_1"):
        os.makedirs(f"{job}/{name}/task_0")
        sleeps[name] = subprocess.Popen(["sleep", "120"])
        with open(f"{job}/{name}/task_0/cgroup.procs", "w") as f:
            f.write(str(sleeps[name].pid))
    real_read_leaf = cgroupfs._read_leaf
    ended: list[str] = []

    def read_leaf(path: str, proc_root: str) -> list[int]:
        if not ended:  # the other step ends now, before the walk gets to it
            (other,) = [n for n in sleeps if f"/{n}/" not in f"{path}/"]
            sleeps[other].kill()
            sleeps[other].wait()
            for d in (f"{job}/{other}/task_0", f"{job}/{other}"):
                wait_for(lambda p=d: _rmdir(p), 10, f"{d} removed", every=0.05)
            ended.append(other)
        return real_read_leaf(path, proc_root)

    walks = cgroupfs.Walks()
    try:
        monkeypatch.setattr(cgroupfs, "_read_leaf", read_leaf)
        (found,) = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node, walks=walks)
        (live,) = [n for n in sleeps if n not in ended]
        assert found.job_id == "9" and found.pids == (sleeps[live].pid,)
        assert job not in walks  # changed under the walk: walked afresh next scrape
        monkeypatch.undo()
        (again,) = cgroupfs.discover_jobs("/sys/fs/cgroup", "/proc", node, walks=walks)
        assert again.pids == (sleeps[live].pid,) and again.steps == (live[5:],)
        assert job in walks
    finally:
        for proc in sleeps.values():
            proc.kill()
            proc.wait()
        for name in sleeps:
            for d in (f"{job}/{name}/task_0", f"{job}/{name}"):
                wait_for(lambda p=d: _rmdir(p), 10, f"{d} removed", every=0.05)
        for depth in range(3):  # job_9, uid_0, slurm_<node>
            wait_for(lambda d=depth: _rmdir(job.rsplit("/", d)[0] if d else job), 10,
                     "the job's cgroups removed", every=0.05)


def _rmdir(path: str) -> bool:
    """Removed or absent; False while a killed task still holds it."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
