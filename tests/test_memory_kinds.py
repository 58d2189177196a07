"""Memory as the kernel and Slurm count it: anonymous memory, shared memory (files in
/dev/shm or another tmpfs), page cache and sacct's MaxRSS, side by side; the memory
findings judge what cannot be reclaimed (anonymous + shared), never the page cache.

The jobs are real: sacct as captured (fixtures/sacct/local-shm-1.psv on the stack's
cgroup v1, vm-v24-memory-2-3.psv on v24's cgroup v2) and the per-scrape figures their
exporters gave (fixtures/exporter/v1-shm, v2-shm-24.11; SOURCES.md), held flat over the
run as they were. Reports are joined by ``precedence.join``, as the service joins them.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.test_detectors import sacct_job
from webapp.detectors import Thresholds, detect_all
from webapp.model import JobId, JobReport, NodeMemory, PeakSource, Series, Usage
from webapp.renderers import html, pdf, text
from webapp.renderers import json as json_renderer
from webapp.report.peak import node_memory, page_cache_series, while_running
from webapp.report.precedence import join, timing

MIB, GIB = 1024**2, 1024**3
STACK, V24 = "local-shm-1.psv", "vm-v24-memory-2-3.psv"
T = Thresholds()


def flat(node: str, value: float, start: float, n: int = 6, every: float = 5.0) -> Series:
    return Series(node, tuple((start + every * i, float(value)) for i in range(n)))


def usage_of(node: str, start: float, rss: float, shmem: float | None, cache: float,
             limit: float, v2: bool = False) -> Usage:
    return Usage(
        memory_rss=(flat(node, rss, start),),
        memory_shmem=(flat(node, shmem, start),) if shmem is not None else (),
        memory_cache=(flat(node, cache, start),),
        memory_limit_bytes=int(limit),
        # the exporter's per-core CPU series: cgroup v1 only
        cpu_per_core=() if v2 else (Series(f"{node}/0", ((start + 25, 0.05),)),),
    )


def report(fixture: str, job_id: str, usage: Usage) -> JobReport:
    """What the service joins from sacct and Prometheus, findings attached."""
    sj = sacct_job(fixture, job_id)
    jid = JobId.of(job_id)
    t = timing(jid, None, sj, datetime(2026, 11, 29, 5, tzinfo=UTC))
    joined = join(jid, "test", None, sj, t, usage, (None, None))
    return replace(joined, findings=detect_all(joined, T))


def start_of(fixture: str, job_id: str) -> float:
    return sacct_job(fixture, job_id).start_time.timestamp()


def shm_stack(limit: float = 1500 * MIB) -> JobReport:
    """The stack's job 1 (cgroup v1): a GiB in /dev/shm, 0.4 MiB anonymous memory."""
    return report(STACK, "1", usage_of("cpu1", start_of(STACK, "1"), 450560, GIB,
                                       1073778688, limit))


def page_cache_v24() -> JobReport:
    """v24's job 2 (cgroup v2): 440 MiB read through the page cache under a 500M limit."""
    return report(V24, "2", usage_of("v24n1", start_of(V24, "2"), 581632, 0.0, 461381632,
                                     500 * MIB, v2=True))


def names(r: JobReport) -> set[str]:
    return {f.name for f in r.findings}


# --- one definition: held = anonymous + shared, sample by sample ---------------------------

def test_held_memory_is_anonymous_plus_shared_at_each_sample():
    anon = Series("n1", ((0.0, 100.0), (5.0, 300.0), (10.0, 100.0)))
    shmem = Series("n1", ((0.0, 250.0), (5.0, 0.0), (10.0, 250.0)))
    cache = Series("n1", ((0.0, 260.0), (5.0, 40.0), (10.0, 900.0)))
    other = Series("n2", ((0.0, 70.0),))  # no shared memory series: its anonymous alone
    usage = Usage(memory_rss=(anon, other), memory_shmem=(shmem,), memory_cache=(cache,))
    assert usage.memory_held == (Series("n1", ((0.0, 350.0), (5.0, 300.0), (10.0, 350.0))),
                                  Series("n2", ((0.0, 70.0),)))
    # the page cache without its shared memory: what the kernel may drop
    assert page_cache_series(usage) == (Series("n1", ((0.0, 10.0), (5.0, 40.0),
                                                      (10.0, 650.0))),)
    # each part its own peak; held is the peak of the sum (350), not the sum of peaks (550)
    # each node's own peak beside them (the job peak's rule on its figures)
    assert node_memory(usage, None) == (NodeMemory("n1", 350, 300, 250, 650, peak_bytes=350),
                                        NodeMemory("n2", 70, 70, None, None, peak_bytes=70))


def test_an_exit_tail_is_cut_from_every_memory_series():
    """The last sample of a job whose /dev/shm file went with its exit: the tail of what
    it held, cut from the anonymous, shared and cache series alike."""
    start = 1.7e9
    usage = replace(usage_of("n1", start, 450560, GIB, GIB, 1500 * MIB), step_seconds=5.0)
    ended = replace(usage, memory_rss=(Series("n1", usage.memory_rss[0].points
                                              + ((start + 30, 100000.0),)),),
                    memory_shmem=(Series("n1", usage.memory_shmem[0].points
                                         + ((start + 30, 0.0),)),))
    cut = while_running(ended, start + 30)
    assert [len(s.points) for s in (*cut.memory_rss, *cut.memory_shmem, *cut.memory_cache)] \
        == [6, 6, 6]


# --- the shm job: a GiB in /dev/shm under 1500M (stack, cgroup v1) -------------------------

def test_files_in_dev_shm_are_part_of_the_peak():
    r = shm_stack()
    assert r.memory_peak.source == PeakSource.PROMETHEUS  # MaxRSS 1248K: far below
    assert r.memory_peak_bytes == GIB + 450560
    assert r.memory_nodes == (NodeMemory("cpu1", GIB + 450560, 450560, GIB, 36864,
                                         1248 * 1024, 1500 * MIB, GIB + 450560),)
    assert r.memory_efficiency == pytest.approx((GIB + 450560) / (1500 * MIB))
    assert "memory_over_requested" not in names(r)  # it used the 1.0 GiB it asked room for


def test_the_shm_job_gets_the_tmpfs_finding():
    r = shm_stack()
    assert {"memory_in_tmpfs"} <= names(r) and "memory_near_limit" not in names(r)
    f = next(f for f in r.findings if f.name == "memory_in_tmpfs")
    assert "held up to 1.0 GiB of the job's memory" in f.message
    assert "MaxRSS (1.2 MiB) leaves them out" in f.message  # cgroup v1: anonymous only
    assert "$TMPDIR" in f.advice and "delete" in f.advice
    assert f.evidence["memory_shmem_bytes"] == GIB and f.evidence["max_rss_bytes"] == 1277952


def test_shared_memory_near_the_limit_is_a_risk():
    r = shm_stack(limit=1100 * MIB)  # the GiB of files is 93 % of the limit
    f = next(f for f in r.findings if f.name == "memory_near_limit")
    assert "files in /dev/shm" in f.message and f.evidence["memory_shmem_bytes"] == GIB


def test_v2_counts_the_files_in_maxrss_and_says_nothing_of_it():
    """v24's job 3: MaxRSS 1013244K (memory.current) holds the files; the finding stands
    without claiming sacct missed them."""
    r = report(V24, "3", usage_of("v24n1", start_of(V24, "3"), 659456, 1033687040,
                                  1033695232, 1500 * MIB, v2=True))
    f = next(f for f in r.findings if f.name == "memory_in_tmpfs")
    assert "MaxRSS" not in f.message and r.memory_nodes[0].max_rss_bytes == 1013244 * 1024


@pytest.mark.parametrize(("rss", "shmem"), [
    (400 * MIB, 64 * MIB),  # MPI's or multiprocessing's own segments: small
    (8 * GIB, 600 * MIB),  # large, but a small share of what the job held
    (400 * MIB, None),  # an exporter (or a 3.10 kernel) without shared memory figures
])
def test_no_tmpfs_finding_for_small_or_unmeasured_shared_memory(rss, shmem):
    r = report(STACK, "1", usage_of("cpu1", start_of(STACK, "1"), rss, shmem,
                                    (shmem or 0) + 10 * MIB, 16 * GIB))
    assert "memory_in_tmpfs" not in names(r)


# --- page cache near the limit is no risk ------------------------------------------------

def test_page_cache_near_the_limit_is_not_near_the_limit_on_cgroup_v2():
    """v24's job 2: MaxRSS 465528K is memory.current (page cache included), 95 % of the
    500M limit; the job held 0.6 MiB. The peak is what it held, and no finding says it
    came near the limit."""
    r = page_cache_v24()
    assert r.memory_peak.source == PeakSource.PROMETHEUS and r.memory_peak_bytes == 581632
    assert "memory_near_limit" not in names(r)
    assert r.memory_nodes == (NodeMemory("v24n1", 581632, 581632, 0, 461381632,
                                         465528 * 1024, 500 * MIB, 581632),)


def test_on_cgroup_v1_a_larger_maxrss_is_still_a_peak_between_scrapes():
    """MaxRSS is anonymous memory there: above every sample, it is the better account."""
    r = report(STACK, "1", usage_of("cpu1", start_of(STACK, "1"), 1000.0, 0.0, 0.0,
                                    1500 * MIB))
    assert r.memory_peak.source == PeakSource.SACCT and r.memory_peak_bytes == 1248 * 1024


# --- side by side in every format ---------------------------------------------------------

def test_the_details_show_the_parts_side_by_side_in_text():
    out = text.render(shm_stack(), details=True)
    block = out.split("\nMemory\n", 1)[1].split("\n\n", 1)[0]
    assert "anonymous plus shared memory" in block
    row = next(line for line in block.splitlines() if line.lstrip().startswith("cpu1"))
    assert re.split(r"\s{2,}", row.strip()) == ["cpu1", "1.0 GiB", "440 KiB", "1.0 GiB",
                                                 "36 KiB", "1.2 MiB"]
    assert "\nMemory\n" not in text.render(shm_stack())  # a detail: not on one screen
    assert "Mem cpu1" in out  # the plot line is what the job held


@pytest.mark.needs("pdflatex")
def test_the_details_show_the_parts_side_by_side_in_html_json_and_pdf(tmp_path):
    r = shm_stack()
    page = html.render(r)
    section = page.split('<section id="memory">', 1)[1].split("</section>", 1)[0]
    assert "<th scope=\"col\">shm, tmpfs</th>" in section
    assert "<td>1.0 GiB</td><td>440 KiB</td><td>1.0 GiB</td><td>36 KiB</td>" in section
    data = json.loads(json_renderer.render(r))
    assert data["memory_nodes"] == [{"node": "cpu1", "held_bytes": GIB + 450560,
                                     "anon_bytes": 450560, "shmem_bytes": GIB,
                                     "page_cache_bytes": 36864, "max_rss_bytes": 1277952,
                                     "requested_bytes": 1500 * MIB,
                                     "peak_bytes": GIB + 450560}]
    assert list(data).index("memory_nodes") == list(data).index("series") + 1
    assert {"memory_shmem_bytes", "memory_cache_bytes"} <= set(data["series"])
    path = tmp_path / "shm.pdf"
    path.write_bytes(pdf.render(r))
    second = subprocess.run(["pdftotext", "-f", "2", "-l", "2", "-layout", str(path), "-"],
                            capture_output=True, text=True, check=True).stdout
    row = next(line for line in second.splitlines()
               if line.strip().startswith("cpu1 ") and "KiB" in line)
    assert row.split() == "cpu1 1.0 GiB 440 KiB 1.0 GiB 36 KiB 1.2 MiB".split()
