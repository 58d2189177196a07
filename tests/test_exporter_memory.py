"""The memory collector on real captured cgroup trees: anonymous memory, page cache and the
shared memory in it (files in /dev/shm), on cgroup v1 and v2, and a kernel without the
shared memory line (fixtures/SOURCES.md)."""

from __future__ import annotations

import pytest

from tests.helpers.exporter_scrape import FIXTURES, make_settings, scrape, value

GIB = 1024**3


@pytest.mark.parametrize(("tree", "node", "job", "rss", "shmem", "cache", "usage"), [
    # the stack's job 1 (Slurm 22.05, cgroup v1): 1 GiB written to /dev/shm by dd
    ("v1-shm", "cpu1", "1", 450560, GIB, 1073778688, 1077485568),
    # v24's job 3 (Slurm 24.11, cgroup v2): as much as the VM's /dev/shm held (985.8 MiB)
    ("v2-shm-24.11", "v24n1", "3", 659456, 1033687040, 1033695232, 1037053952),
])
def test_shared_memory_is_exported_beside_anonymous_memory_and_cache(
        tree, node, job, rss, shmem, cache, usage):
    out = scrape(make_settings(FIXTURES / tree, node_name=node))
    assert value(out, "jobs_memory_shmem_bytes", jobid=job) == shmem
    assert value(out, "jobs_memory_rss_bytes", jobid=job) == rss  # tmpfs files are not anon
    # The page cache includes the shared memory (v1 total_cache, v2 file) ...
    assert value(out, "jobs_memory_cache_bytes", jobid=job) == cache >= shmem
    # ... and the usage both: what the limit (and Slurm's v2 MaxRSS) counts.
    assert value(out, "jobs_memory_usage_bytes", jobid=job) == usage >= rss + cache
    assert value(out, "jobs_memory_mapped_file_bytes", jobid=job) == 0  # dd maps nothing


def test_a_kernel_without_shared_memory_figures_has_no_series_not_zero():
    """treydock's capture (CentOS 7's 3.10 kernel): memory.stat has no total_shmem line."""
    out = scrape(make_settings(FIXTURES / "v1-samples"))
    assert value(out, "jobs_memory_rss_bytes", jobid="11") == 6051483648
    assert value(out, "jobs_memory_shmem_bytes", jobid="11") is None
    assert value(out, "jobs_memory_mapped_file_bytes", jobid="11") == 19931136
