"""ProcReader on real /proc and on a copied tree: cache, exited processes, pid reuse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from jobs_exporter import proc_reader, procfs
from tests.helpers.exporter_scrape import FIXTURES


def test_reads_a_process_same_with_and_without_cache():
    # A child of its own, not this process: the worker's threads and files come and go
    # with other tests' (16 threads then 17 between the two reads, a fresh clone's run).
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        cached = proc_reader.ProcReader("/proc", cache=True).read(child.pid)
        plain = proc_reader.ProcReader("/proc", cache=False).read(child.pid)
    finally:
        child.kill()
        child.wait()
    assert cached is not None and plain is not None
    assert cached.threads == plain.threads >= 1
    assert cached.ppid == plain.ppid == os.getpid()
    assert cached.starttime == plain.starttime > 0
    assert cached.open_files_limit == plain.open_files_limit
    assert cached.open_files and cached.open_files >= 3


def test_exited_process_is_skipped_and_its_fds_closed():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    reader = proc_reader.ProcReader("/proc", cache=True)
    try:
        assert reader.read(child.pid) is not None
        assert child.pid in reader._open
    finally:
        child.kill()
        child.wait()
    assert reader.read(child.pid) is None  # cached fd now fails with ESRCH
    assert child.pid not in reader._open


def test_sweep_closes_fds_of_processes_no_longer_listed():
    reader = proc_reader.ProcReader("/proc", cache=True)
    reader.read(os.getpid())
    assert reader._open
    reader.sweep(set())
    assert not reader._open


def test_pid_reuse_detected_by_starttime(tmp_path):
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "v1-samples/proc/26231", root / "26231", symlinks=True)
    reader = proc_reader.ProcReader(str(root), cache=True)
    first = reader.read(26231)
    assert first is not None and first.threads == 1
    # A different process now has pid 26231: other starttime, 4 threads.
    stat = (root / "26231/stat").read_text().split(" ")
    stat[19], stat[21] = "4", "99999999"
    (root / "26231/stat").write_text(" ".join(stat))
    again = reader.read(26231)
    assert again is not None and again.threads == 4
    assert reader._open[26231][0] == 99999999


def test_cache_limited_by_budget_falls_back_to_plain_reads():
    reader = proc_reader.ProcReader("/proc", cache=True, max_cached=0)
    assert reader.read(os.getpid()) is not None
    assert not reader._open


def test_uses_scratch_on_cwd_and_open_files(tmp_path):
    scratch = tmp_path / "scratch"
    (scratch / "job").mkdir(parents=True)
    code = "import sys,time; f=open(sys.argv[1],'w'); print('ok', flush=True); time.sleep(30)"
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(scratch / "job/out")], stdout=subprocess.PIPE
    )
    try:
        assert child.stdout.readline().strip() == b"ok"
        prefixes = procfs.normalize_prefixes([str(scratch)])
        assert procfs.uses_scratch("/proc", [child.pid], prefixes)
        assert not procfs.uses_scratch("/proc", [child.pid], ("/nonexistent",))
    finally:
        child.kill()
        child.wait()
    assert not procfs.uses_scratch("/proc", [child.pid], prefixes)  # exited: skipped


def test_partly_missing_process_leaks_no_fd(tmp_path):
    # Capture 26232 has stat and limits but no io: reads as an exited process.
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "v1-samples/proc/26232", root / "26232", symlinks=True)
    reader = proc_reader.ProcReader(str(root), cache=True)
    before = len(os.listdir("/proc/self/fd"))
    assert reader.read(26232) is None
    assert len(os.listdir("/proc/self/fd")) == before
    assert not reader._open


def _sleepers(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(["sleep", "60"]) for _ in range(n)]


def test_time_budget_reads_least_recently_read_first_and_keeps_the_rest():
    children = _sleepers(80)
    pids = [c.pid for c in children]
    reader = proc_reader.ProcReader("/proc", cache=True)
    try:
        assert reader.refresh(pids, budget=1e-9) == 80 - 32  # at least 32 per scrape
        first = set(reader.samples)
        assert len(first) == 32
        assert reader.refresh(pids, budget=1e-9) == 48
        second = {p for p, r in reader._last_read.items() if r == reader._round}
        assert len(second) == 32 and second.isdisjoint(first)  # the unread ones came next
        assert len(reader.samples) == 64  # the 32 of the first round kept their sample
        reader.refresh(pids, budget=1e-9)
        assert set(reader.samples) == set(pids)
        assert reader.refresh(pids, budget=0) == 0  # no budget: everything, every time
    finally:
        for c in children:
            c.kill()
            c.wait()
    assert reader.refresh(pids) == 0 and not reader.samples and not reader._open


@pytest.mark.needs("root")  # real procfs: fstat sizes of another process's fd directory
def test_fd_count_by_fstat_matches_the_listing():
    code = (
        "import time; fs=[open('/dev/null') for _ in range(200)]; "
        "print('ok', flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"ok"
        listed = len(os.listdir(f"/proc/{child.pid}/fd"))
        reader = proc_reader.ProcReader("/proc", cache=True)
        assert reader._fd_size_counts == (_kernel() >= (6, 2))  # root, real procfs
        assert reader.read(child.pid).open_files == listed  # opens the fd directory
        assert reader.read(child.pid).open_files == listed  # fstat of the kept one
        assert listed >= 203
    finally:
        child.kill()
        child.wait()


def test_limits_read_once_per_process():
    import resource

    child = _sleepers(1)[0]
    try:
        reader = proc_reader.ProcReader("/proc", cache=True)
        before = reader.read(child.pid).open_files_limit
        resource.prlimit(child.pid, resource.RLIMIT_NOFILE, (100, 100))
        assert reader.read(child.pid).open_files_limit == before != 100
        assert proc_reader.ProcReader("/proc", cache=False).read(child.pid).open_files_limit == 100
    finally:
        child.kill()
        child.wait()


def _kernel() -> tuple[int, int]:
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int(minor)


def test_running_out_of_fds_reads_the_rest_by_path():
    import resource

    children = _sleepers(40)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    reader = proc_reader.ProcReader("/proc", cache=True, max_cached=10_000)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 30, hard))
        assert reader.refresh([c.pid for c in children]) == 0
        assert len(reader.samples) == 40  # every process read, none lost
        assert 0 < reader.max_cached < 40  # caching stopped where the fds ran out
        assert reader.refresh([c.pid for c in children]) == 0
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        reader.close()
        for c in children:
            c.kill()
            c.wait()


def test_fd_budget_leaves_room_for_cgroup_files_and_the_rest():
    processes, cgroup_files = proc_reader.fd_budget(65536)
    assert cgroup_files == 4096 and 4 * processes + cgroup_files <= 65536 - 256
    assert proc_reader.fd_budget(1024) == ((1024 - 256 - 128) // 4, 128)
    assert proc_reader.fd_budget(100) == (0, 12)


def test_threads_from_the_task_directory_and_stat_read_once():
    code = (
        "import threading,time\n"
        "e=threading.Event()\n"
        "ts=[threading.Thread(target=e.wait) for _ in range(3)]\n"
        "[t.start() for t in ts]\n"
        "print('ok',flush=True)\n"
        "input()\n"
        "e.set()\n"
        "print('joined',flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    reader = proc_reader.ProcReader("/proc", cache=True)
    try:
        assert child.stdout.readline().strip() == b"ok"
        assert proc_reader.task_dir_nlink_is_count("/proc")  # procfs, as root
        first = reader.read(child.pid)
        assert first is not None and first.threads == 4
        assert reader._open[child.pid][1] is None  # stat closed: read once
        child.stdin.write(b"\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == b"joined"
        for _ in range(100):  # ended threads leave the thread group a moment later
            again = reader.read(child.pid)
            if again is not None and again.threads == 1:
                break
            time.sleep(0.01)
        assert again is not None and again.threads == 1
        stat = procfs.parse_stat(open(f"/proc/{child.pid}/stat").read())
        assert (again.ppid, again.starttime) == (stat.ppid, stat.starttime) == (
            os.getpid(),
            first.starttime,
        )
    finally:
        child.kill()
        child.wait()
    assert reader.read(child.pid) is None  # the io fd now fails with ESRCH
    assert child.pid not in reader._open


def test_limits_read_once_per_process_past_the_fd_cache(tmp_path):
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "v1-samples/proc/26231", root / "26231", symlinks=True)
    reader = proc_reader.ProcReader(str(root), cache=True, max_cached=0)
    first = reader.read(26231)
    assert first is not None and not reader._open
    limits = root / "26231/limits"
    limits.write_text(limits.read_text().replace(str(first.open_files_limit), "77"))
    assert reader.read(26231).open_files_limit == first.open_files_limit  # not re-read
    stat = (root / "26231/stat").read_text().split(" ")
    stat[21] = "99999999"  # another process on the same pid: its own limits
    (root / "26231/stat").write_text(" ".join(stat))
    assert reader.read(26231).open_files_limit == 77


@pytest.mark.needs("root")  # real procfs: another process's io, task and fd directories
def test_a_sleeping_process_keeps_its_sample_a_working_one_is_read_anew():
    """``refresh``'s kept path (``_read_kept``): the same sample while the kernel answers
    the same bytes, a new one when the process reads, opens a file or starts a thread, and
    the same figures as ``read`` (the path for every other case)."""
    code = (
        "import sys,threading,time\n"
        "cmd=sys.stdin.readline().strip()\n"
        "while cmd:\n"
        "    if cmd=='read': open('/proc/self/status').read()\n"
        "    if cmd=='open': f=open('/dev/null')\n"
        "    if cmd=='thread': threading.Thread(target=time.sleep,args=(30,)).start()\n"
        "    print('done',flush=True)\n"
        "    cmd=sys.stdin.readline().strip()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    reader = proc_reader.ProcReader("/proc", cache=True)

    def ask(cmd: str) -> None:
        child.stdin.write(cmd.encode() + b"\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == b"done"

    def sample() -> procfs.ProcessSample:
        reader.refresh([child.pid], budget=5.0)
        return reader.samples[child.pid]

    try:
        ask("wait")  # started, imports done
        first = sample()  # opened and read by path
        kept = sample()
        assert kept.tasks is not None and kept.threads == 1
        assert sample() is kept  # asleep: the kernel answered the same bytes
        reader.forget_samples()  # read in full once more: the same figures
        again = sample()
        assert again is not kept and (again.io, again.open_files, again.tasks) == (
            kept.io, kept.open_files, kept.tasks)
        kept = again
        by_read = proc_reader.ProcReader("/proc", cache=True).read(child.pid)
        assert by_read is not None
        assert (kept.io, kept.open_files, kept.ppid, kept.starttime) == (
            by_read.io, by_read.open_files, by_read.ppid, by_read.starttime)
        ask("read")
        after_read = sample()
        assert after_read is not kept and after_read.io is not None and kept.io is not None
        assert after_read.io.syscr > kept.io.syscr
        ask("open")
        assert sample().open_files == after_read.open_files + 1
        ask("thread")
        threaded = sample()  # two threads: read through ``read``, each thread's times
        assert threaded.threads == 2 and threaded.tasks is not None
        assert len(threaded.tasks) == 2
        assert first.starttime == threaded.starttime
    finally:
        child.kill()
        child.wait()
    reader.refresh([child.pid], budget=5.0)
    assert child.pid not in reader.samples and child.pid not in reader._open
