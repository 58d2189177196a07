"""ProcReader on real /proc and on a copied tree: cache, exited processes, pid reuse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from exporter import procfs
from tests.helpers.exporter_scrape import FIXTURES


def test_reads_own_process_same_with_and_without_cache():
    pid = os.getpid()
    cached = procfs.ProcReader("/proc", cache=True).read(pid)
    plain = procfs.ProcReader("/proc", cache=False).read(pid)
    assert cached is not None and plain is not None
    assert cached.threads == plain.threads >= 1
    assert cached.ppid == plain.ppid == os.getppid()
    assert cached.starttime == plain.starttime > 0
    assert cached.open_files_limit == plain.open_files_limit
    assert cached.open_files and cached.open_files >= 3


def test_exited_process_is_skipped_and_its_fds_closed():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    reader = procfs.ProcReader("/proc", cache=True)
    try:
        assert reader.read(child.pid) is not None
        assert child.pid in reader._open
    finally:
        child.kill()
        child.wait()
    assert reader.read(child.pid) is None  # cached fd now fails with ESRCH
    assert child.pid not in reader._open


def test_sweep_closes_fds_of_processes_no_longer_listed():
    reader = procfs.ProcReader("/proc", cache=True)
    reader.read(os.getpid())
    assert reader._open
    reader.sweep(set())
    assert not reader._open


def test_pid_reuse_detected_by_starttime(tmp_path):
    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "v1-samples/proc/26231", root / "26231", symlinks=True)
    reader = procfs.ProcReader(str(root), cache=True)
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
    reader = procfs.ProcReader("/proc", cache=True, max_cached=0)
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
    reader = procfs.ProcReader(str(root), cache=True)
    before = len(os.listdir("/proc/self/fd"))
    assert reader.read(26232) is None
    assert len(os.listdir("/proc/self/fd")) == before
    assert not reader._open
