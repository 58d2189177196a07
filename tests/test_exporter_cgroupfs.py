"""Kept-open cgroup files on the real v1 hierarchy: re-reads see new values, removal is gone."""

from __future__ import annotations

import os

import pytest

from exporter import cgroupfs

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
    files = cgroupfs.OpenFiles()
    limit = f"{cgroup}/memory.limit_in_bytes"
    assert int(files.read(limit)) > 2**40  # unlimited
    with open(limit, "w") as f:
        f.write(str(256 * 2**20))
    assert int(files.read(limit)) == 256 * 2**20  # same fd, new value
    assert len(files) == 1
    stat = files.read(f"{cgroup}/memory.stat")
    assert "total_rss" in cgroupfs.parse_flat_keyed(stat)
    files.retain(())
    assert len(files) == 0


def test_removed_cgroup_reads_as_gone_and_its_file_is_closed(cgroup):
    files = cgroupfs.OpenFiles()
    usage = f"{cgroup}/memory.usage_in_bytes"
    files.read(usage)
    os.rmdir(cgroup)
    with pytest.raises(FileNotFoundError):
        files.read(usage)  # ENODEV through the kept fd
    assert len(files) == 0
    with pytest.raises(FileNotFoundError):
        files.read(usage)  # and reopening finds nothing


def test_retain_keeps_only_live_jobs_files(cgroup):
    files = cgroupfs.OpenFiles()
    files.read(f"{cgroup}/memory.usage_in_bytes")
    files.read(f"{MEMORY}/memory.usage_in_bytes")
    files.retain([cgroup])
    assert len(files) == 1
    files.close()
    assert len(files) == 0


def test_files_past_the_cap_are_read_by_path(cgroup):
    files = cgroupfs.OpenFiles(max_open=1)
    files.read(f"{cgroup}/memory.usage_in_bytes")
    assert int(files.read(f"{cgroup}/memory.limit_in_bytes")) > 0
    assert len(files) == 1
