"""The deeper findings: starved versus idle (PSI from real captured cgroup v2 files, read
through the exporter), data-loader bound and its reverse, memory growth, GPU memory.

Each detector has a positive case, a true negative and a boundary. PSI cases take their
numbers from fixtures/exporter/psi-jobs (real workloads in a cgroup v2 group on the
development machine; see fixtures/SOURCES.md) scraped by the exporter's own collectors.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.exporter_scrape import FIXTURES, make_settings, scrape, value
from webapp.detectors import Thresholds, detect_all
from webapp.detectors.gpu_memory_low import cluster_gpu_types
from webapp.detectors.gpu_models import type_memory_bytes
from webapp.detectors.measures import pressure, waiting_for
from webapp.detectors.memory_growth import growth
from webapp.model import JobReport, QueueContext, Series, Usage
from webapp.sources.prometheus import _missing_tails, _tail_figures

GIB, MIB = 1024**3, 1024**2
T = Thresholds(min_runtime_seconds=10)  # the captures ran ~20 s, as the stack's jobs do
START = datetime(2026, 11, 23, 16, 0, tzinfo=UTC)
PSI_JOBS = FIXTURES / "psi-jobs"


def names(report: JobReport, thresholds: Thresholds = T) -> set[str]:
    return {f.name for f in detect_all(report, thresholds)}


def report(elapsed: float = 600.0, cpus: int = 1, cpu_seconds: float | None = None,
           usage: Usage | None = None, **changes) -> JobReport:
    fields = dict(
        job_id="7", cluster="test", user="alice", cpus=cpus, state="COMPLETED",
        exit_code="0:0", start_time=START, end_time=START + timedelta(seconds=elapsed),
        elapsed_seconds=elapsed, time_limit_seconds=elapsed * 1.2,
        cpu_seconds=elapsed * cpus if cpu_seconds is None else cpu_seconds,
        memory_requested_bytes=GIB, usage=usage or Usage(),
    )  # fmt: skip
    fields.update(changes)
    return JobReport(**fields)


# --- starved versus idle: real cgroup v2 captures through the exporter ----------------

def captured(name: str, tmp_path) -> tuple[float, dict[str, float]]:
    """(wall seconds, the exporter's CPU and pressure totals) for one captured workload,
    its files placed in the public v2 tree's job_4 as the kernel lays them out."""
    tree = tmp_path / "v2"
    shutil.copytree(FIXTURES / "v2-samples", tree, symlinks=True)
    job = tree / "cgroup/system.slice/slurmstepd.scope/job_4"
    for f in ("cpu.stat", "cpu.pressure", "io.pressure", "memory.pressure"):
        shutil.copy(PSI_JOBS / name / f, job / f)
    text = scrape(make_settings(tree))
    cpu = sum(value(text, "jobs_cpu_seconds_total", jobid="4", mode=m) for m in ("user", "system"))
    totals = {"cpu_seconds": cpu}
    for resource in ("cpu", "io", "memory"):
        totals[resource] = value(text, "jobs_pressure_waiting_seconds_total", jobid="4",
                                 resource=resource)
    return float((PSI_JOBS / name / "wall_seconds").read_text()), totals


def v2_report(name: str, cpus: int, tmp_path) -> JobReport:
    wall, got = captured(name, tmp_path)
    usage = Usage(cpu_pressure_seconds=got["cpu"], io_pressure_seconds=got["io"],
                  memory_pressure_seconds=got["memory"], memory_high_events=0.0)
    return report(elapsed=wall, cpus=cpus, cpu_seconds=got["cpu_seconds"], usage=usage)


@pytest.mark.parametrize(("capture", "cpus", "cause", "finding"), [
    # two workers on one core beside another job's two busy processes
    ("cpu-contended", 2, "cpu", "cpu_starved"),
    # 4 KiB writes, each fsync'ed
    ("io-sync-writes", 1, "io", "io_starved"),
    # a 128 MiB working set touched at random under a 64 MiB limit
    ("memory-thrash", 1, "memory", "memory_thrashing"),
    # a file read over and over under the limit: reclaim of once-read pages is I/O, not
    # thrashing (memory stalls stay under 4 %)
    ("memory-reclaim", 1, "io", "io_starved"),
])
def test_low_efficiency_gets_its_cause_from_captured_pressure(tmp_path, capture, cpus, cause,
                                                              finding):
    r = v2_report(capture, cpus, tmp_path)
    assert r.cpu_efficiency < T.cpu_efficiency_low
    assert waiting_for(r, T) == cause
    found = names(r)
    causes = {"cpu_starved", "io_starved", "memory_thrashing"}
    assert finding in found and not (found & causes) - {finding}, found
    assert "cpu_efficiency_low" not in found  # the cause replaces the bare verdict
    f = next(f for f in detect_all(r, T) if f.name == finding)
    assert "`" in f.advice and f.evidence_text and f.evidence[f"{cause}_pressure"] > 0.1


def test_idle_job_with_pressure_data_is_called_idle(tmp_path):
    r = v2_report("idle", 1, tmp_path)
    assert r.cpu_efficiency < 0.01 and max(pressure(r, x) for x in ("cpu", "io", "memory")) < 0.01
    f = next(f for f in detect_all(r, T) if f.name == "cpu_efficiency_low")
    assert "idle, not starved" in f.message
    assert names(r) & {"cpu_starved", "io_starved", "memory_thrashing"} == set()


def test_cgroup_v1_says_the_cause_cannot_be_told():
    r = report(cpu_seconds=60.0)  # 10 % of one core, no PSI series
    f = next(f for f in detect_all(r, T) if f.name == "cpu_efficiency_low")
    assert "cannot be told" in f.message and f.evidence["pressure_data"] == "no"
    assert waiting_for(r, T) is None


def test_pressure_thresholds_are_inclusive_and_need_low_efficiency():
    at = report(cpu_seconds=60.0, usage=Usage(cpu_pressure_seconds=0.2 * 600))
    below = report(cpu_seconds=60.0, usage=Usage(cpu_pressure_seconds=0.2 * 600 - 1))
    assert "cpu_starved" in names(at) and "cpu_starved" not in names(below)
    busy = report(cpu_seconds=550.0, usage=Usage(cpu_pressure_seconds=590.0))
    assert names(busy) & {"cpu_starved", "cpu_efficiency_low"} == set()


def test_memory_high_events_alone_mean_thrashing():
    r = report(cpu_seconds=60.0, usage=Usage(memory_pressure_seconds=0.0,
                                             io_pressure_seconds=300.0, memory_high_events=12))
    found = names(r)
    assert "memory_thrashing" in found and "io_starved" not in found
    f = next(f for f in detect_all(r, T) if f.name == "memory_thrashing")
    assert "12 time(s)" in f.message and "--mem=" in f.advice


def test_pressure_figures_come_from_the_tail_answer_and_never_trigger_the_fallback():
    answer = [({"figure": "cpu_pressure_seconds", "instance": "n1"}, 12.5),
              ({"figure": "cpu_pressure_seconds", "instance": "n2"}, 30.0),
              ({"figure": "memory_limit_bytes", "instance": "n1"}, 1e9),
              ({"figure": "memory_limit_bytes", "instance": "n2"}, 1e9)]
    figures = _tail_figures(answer)
    assert figures["cpu_pressure_seconds"] == 30.0  # the busiest node
    assert figures["io_pressure_seconds"] is None  # v1: unknown, not zero
    missing = _missing_tails(answer, {"n1", "n2"}, set())
    assert not set(missing) & {"cpu_pressure_seconds", "io_pressure_seconds",
                               "memory_pressure_seconds", "memory_high_events"}


# --- data-loader bound and its reverse ------------------------------------------------

def flat(label: str, v: float, n: int = 20, step: float = 30.0) -> Series:
    return Series(label, tuple((START.timestamp() + step * i, v) for i in range(n)))


def gpu_usage(util: float, held: float = 2 * GIB, cores: tuple[float, ...] = ()) -> Usage:
    return Usage(gpu_utilization=(flat("n1/0", util),), gpu_memory_used=(flat("n1/0", held),),
                 gpu_memory_total_bytes=16 * GIB,
                 cpu_per_core=tuple(flat(f"n1/{i}", c, 1) for i, c in enumerate(cores)))


def test_input_bound_gpu_with_one_saturated_core():
    r = report(cpus=4, gpus=1, cpu_seconds=600 * 1.02, usage=gpu_usage(0.06, cores=(0.97, 0.02,
                                                                                    0.02, 0.01)))
    found = names(r)
    assert "gpu_input_bound" in found
    # one verdict for one cause: not also "serial" or "GPU underused" or "CPU efficiency"
    assert not found & {"serial_on_many_cores", "gpu_util_low", "cpu_efficiency_low"}
    f = next(f for f in detect_all(r, T) if f.name == "gpu_input_bound")
    assert "num_workers" in f.advice and "`--cpus-per-gpu=8`" in f.advice
    assert f.evidence["busiest_core"] == 0.97 and f.evidence_text


def test_input_bound_needs_the_program_on_the_gpu_and_a_saturated_core():
    untouched = report(cpus=1, gpus=1, cpu_seconds=1.0, usage=gpu_usage(0.0, held=0))
    assert "gpu_input_bound" not in names(untouched)
    spread = report(cpus=4, gpus=1, cpu_seconds=600 * 2.0,
                    usage=gpu_usage(0.06, cores=(0.5, 0.5, 0.5, 0.5)))
    assert "gpu_input_bound" not in names(spread)  # two cores' worth, none saturated
    no_context = report(cpus=1, gpus=1, usage=gpu_usage(0.06, held=100 * MIB))
    assert "gpu_input_bound" not in names(no_context)


def test_input_bound_boundary_on_the_saturated_core():
    at = report(cpus=4, gpus=1, cpu_seconds=600 * 0.9,
                usage=gpu_usage(0.05, cores=(0.85, 0.03, 0.01, 0.01)))
    below = report(cpus=4, gpus=1, cpu_seconds=600 * 0.9,
                   usage=gpu_usage(0.05, cores=(0.84, 0.03, 0.01, 0.01)))
    assert "gpu_input_bound" in names(at, replace(T, serial_cores_max=0.8))
    assert "gpu_input_bound" not in names(below, replace(T, serial_cores_max=0.8))


def test_busy_gpu_with_idle_cores():
    r = report(cpus=8, gpus=1, cpu_seconds=600 * 1.0, usage=gpu_usage(0.92))
    found = names(r)
    assert "gpu_cores_idle" in found and "cpu_efficiency_low" not in found
    f = next(f for f in detect_all(r, T) if f.name == "gpu_cores_idle")
    assert "`--cpus-per-gpu=3`" in f.advice and "7.0 of the 8" in f.message


@pytest.mark.parametrize(("cpus", "util", "fires"), [
    (3, 0.92, True),  # exactly two cores idle
    (2, 0.92, False),  # one idle core is no waste worth a note
    (8, 0.49, False),  # the GPU was not busy
])
def test_busy_gpu_with_idle_cores_boundaries(cpus, util, fires):
    r = report(cpus=cpus, gpus=1, cpu_seconds=600 * 1.0, usage=gpu_usage(util))
    assert ("gpu_cores_idle" in names(r)) == fires


# --- memory growth ---------------------------------------------------------------------

def rss(f, n: int = 24, step: float = 5.0) -> Series:
    return Series("vm", tuple((START.timestamp() + step * i, float(f(i))) for i in range(n)))


def mem_report(series: Series, limit: int = 500 * MIB, **changes) -> JobReport:
    elapsed = series.points[-1][0] - series.points[0][0] + 5
    return report(elapsed=elapsed, cpu_seconds=elapsed * 0.9,
                  usage=Usage(memory_rss=(series,), memory_limit_bytes=limit), **changes)


def test_steady_growth_is_a_probable_leak_with_time_to_the_limit():
    r = mem_report(rss(lambda i: 20 * MIB + i * 12 * MIB + (i % 3) * MIB))
    f = next(f for f in detect_all(r, T) if f.name == "memory_growth")
    assert 0.95 < f.evidence["fit_r2"] <= 1.0
    slope = f.evidence["slope_bytes_per_second"]
    assert slope == pytest.approx(12 * MIB / 5, rel=0.05)
    end_bytes = f.evidence["memory_at_end_bytes"]
    assert f.evidence["seconds_to_limit"] == pytest.approx((500 * MIB - end_bytes) / slope,
                                                           rel=0.01)
    assert "leak" in f.message and "`tracemalloc`" in f.advice and f.evidence_text


def test_a_high_plateau_is_not_a_leak():
    # climbs in the first quarter, then holds: a job that needs that much, not a leak
    plateau = mem_report(rss(lambda i: min(i, 6) * 60 * MIB))
    assert "memory_growth" not in names(plateau)
    noisy = mem_report(rss(lambda i: (300 if i % 2 else 20) * MIB + i * MIB))
    assert "memory_growth" not in names(noisy)


def test_memory_growth_boundary_on_the_share_of_the_limit():
    line = rss(lambda i: 50 * MIB + i * 10 * MIB, n=11)  # +100 MiB over the run
    assert growth(line, 400 * MIB, T) is not None  # 25 % of 400 MiB: at the threshold
    assert growth(line, 401 * MIB, T) is None
    assert growth(rss(lambda i: i * 50 * MIB, n=4), 400 * MIB, T) is None  # too few points


def test_growth_until_killed_is_critical():
    r = mem_report(rss(lambda i: 20 * MIB + i * 20 * MIB), state="OUT_OF_MEMORY")
    f = next(f for f in detect_all(r, T) if f.name == "memory_growth")
    assert f.severity == "critical" and "killed" in f.message


def test_a_leak_ending_in_its_exit_sample_is_still_a_leak():
    """~5 MB/s for 55 s, the last scrape landing as the processes exited (▁▂▃▃▄▅▆▆▇█▁):
    that sample is not the job's memory, so it neither breaks the fit nor stays a point."""
    from webapp.report.build import read_usage
    from webapp.report.precedence import Timing

    points = [(START.timestamp() + 5 * i, 20 * MIB + i * 25 * MIB) for i in range(11)]
    points.append((START.timestamp() + 55, 3 * MIB))  # exiting: the shell's few MiB
    raw = Usage(memory_rss=(Series("vm", tuple(points)),), memory_limit_bytes=500 * MIB,
                step_seconds=5.0)

    class Recorded:
        def usage(self, *args, **kwargs) -> Usage:
            return raw

    end = START + timedelta(seconds=56)
    timing = Timing("COMPLETED", START, end, 56.0, ("vm",), "7")
    usage = read_usage(None, Recorded(), timing, end, "plot", [])
    assert usage.memory_rss[0].points == tuple(points[:-1])
    assert "memory_growth" in names(mem_report(usage.memory_rss[0]))
    assert "memory_growth" not in names(mem_report(raw.memory_rss[0]))  # what it cost


def test_memory_freed_before_the_end_is_not_an_exit_sample():
    from webapp.report.peak import while_running

    freed = rss(lambda i: 300 * MIB if i < 12 else 10 * MIB)  # half the run at 10 MiB
    end = freed.points[-1][0]
    usage = Usage(memory_rss=(freed,), step_seconds=5.0)
    assert while_running(usage, end) is usage
    assert while_running(usage, None) is usage


# --- GPU memory ------------------------------------------------------------------------

def gpu_mem_report(peak: float, total: float, types: tuple[str, ...] | None,
                   busy: float = 0.7) -> JobReport:
    usage = Usage(gpu_utilization=(flat("n1/0", busy),), gpu_memory_used=(flat("n1/0", peak),),
                  gpu_memory_total_bytes=int(total))
    queue = None if types is None else QueueContext(
        partition="gpu", pending_seconds=5.0, gpus_available=tuple((t, 1) for t in types))
    return report(cpus=4, gpus=1, usage=usage, queue=queue)


def test_small_use_of_a_large_gpu_names_the_clusters_smaller_types():
    types = ("a100_80g", "a100-40gb", "nvidia_a100_80gb_2g.20gb", "v100", "untyped")
    r = gpu_mem_report(6 * GIB, 80 * GIB, types, busy=0.2)
    assert cluster_gpu_types(r) == sorted(set(types) - {"untyped"})
    f = next(f for f in detect_all(r, T) if f.name == "gpu_memory_low")
    # 6 GiB x 1.25 = 7.5 GiB: the 16 GiB V100, the 20 GiB MIG slice and the 40 GiB A100
    assert f.advice.startswith("Ask for `--gres=gpu:v100:1` (16 GiB), "
                               "`--gres=gpu:nvidia_a100_80gb_2g.20gb:1` (20 GiB)")
    assert f.evidence["smaller_types"].split(", ")[0] == "v100"


def test_a_whole_card_jobs_own_peaks_name_the_mig_slice_it_would_fit():
    types = ("nvidia_a100_80gb", "nvidia_a100_80gb_1g.10gb", "nvidia_a100_80gb_3g.40gb")
    f = next(f for f in detect_all(gpu_mem_report(6 * GIB, 80 * GIB, types, busy=0.12), T)
             if f.name == "gpu_memory_low")
    assert f.advice.startswith("Its 6.0 GiB peak and 12% use would fit a 1g.10gb slice. "
                               "Ask for `--gres=gpu:nvidia_a100_80gb_1g.10gb:1` (10 GiB)")
    # busier than a seventh of the card: the 1g slice would slow it; the 3g one holds it
    f = next(f for f in detect_all(gpu_mem_report(6 * GIB, 80 * GIB, types, busy=0.3), T)
             if f.name == "gpu_memory_low")
    assert "would fit a 3g.40gb slice" in f.advice and "1g.10gb" not in f.advice


def test_gpu_memory_negatives_and_boundary():
    assert "gpu_memory_low" not in names(gpu_mem_report(1 * GIB, 16 * GIB, ("t4",)))  # small GPU
    assert "gpu_memory_low" not in names(gpu_mem_report(30 * GIB, 80 * GIB, ("v100",)))
    # the partition has only this GPU: nothing smaller to suggest
    assert "gpu_memory_low" not in names(gpu_mem_report(6 * GIB, 80 * GIB, ("a100_80g",)))
    # strictly under 25 %, as the other "low" thresholds (gpu_util_low, gpu_idle)
    assert "gpu_memory_low" in names(gpu_mem_report(20 * GIB - 1, 80 * GIB, None))
    assert "gpu_memory_low" not in names(gpu_mem_report(20 * GIB, 80 * GIB, None))


def test_without_cluster_types_the_size_needed_is_said():
    f = next(f for f in detect_all(gpu_mem_report(4 * GIB, 40 * GIB, None), T)
             if f.name == "gpu_memory_low")
    assert "5.0 GiB" in f.advice and "`sinfo -o '%P %G'`" in f.advice


@pytest.mark.parametrize(("name", "gib"), [
    ("a100", 40), ("A100_80gb", 80), ("nvidia_h100_80gb_hbm3_4g.40gb", 40), ("A30", 24),
    ("Q6K", 24), ("v100-32g", 32), ("t4", 16), ("l40s", 48), ("tesla", None), ("untyped", None),
    ("mi300x", 192), ("MI250X", 64),
])
def test_gpu_type_memory_from_its_name(name, gib):
    got = type_memory_bytes(name)
    assert (got / GIB if got else None) == gib


def test_series_fit_is_least_squares():
    fit = Series("x", ((0.0, 1.0), (1.0, 3.0), (2.0, 5.0))).fit()
    assert fit.slope == 2.0 and fit.intercept == 1.0 and fit.r2 == 1.0 and fit.at(3) == 7.0
    assert Series("x", ((0.0, 1.0),)).fit() is None


def test_an_idle_gpu_held_beside_a_saturated_core_is_one_verdict():
    r = report(cpus=1, gpus=1, cpu_seconds=600 * 0.97, usage=gpu_usage(0.0, held=GIB,
                                                                        cores=(0.97,)))
    found = names(r)
    assert "gpu_input_bound" in found and "gpu_idle" not in found
    f = next(f for f in detect_all(r, T) if f.name == "gpu_input_bound")
    assert "did no work although the program held 1.0 GiB" in f.message
    assert "`.to(device)`" in f.advice
    # nothing held on the GPU: the program never opened it, which is gpu_idle's verdict
    bare = report(cpus=1, gpus=1, cpu_seconds=600 * 0.97, usage=gpu_usage(0.0, held=0,
                                                                           cores=(0.97,)))
    assert {"gpu_idle"} <= names(bare) and "gpu_input_bound" not in names(bare)


def test_a_loader_given_part_of_its_core_by_a_loaded_node_is_still_input_bound():
    """The stack's case under load: one busy loop beside an idle GPU it holds, given 0.6
    of its core by the node's other jobs, waited for a core the other 0.38 of the run.
    What it asked of the CPU (a whole core) decides, not what it got; with its wait
    unmeasured the same job reads as an idle GPU beside a core that was not saturated."""
    starved = report(cpus=1, gpus=1, cpu_seconds=600 * 0.6, usage=replace(
        gpu_usage(0.0, held=GIB), cpu_wait_seconds=600 * 0.38, busy_tasks_max=1))
    found = names(starved)
    assert "gpu_input_bound" in found and "gpu_idle" not in found
    f = next(f for f in detect_all(starved, T) if f.name == "gpu_input_bound")
    assert "waited for a core 38% of the run" in f.message
    unmeasured = report(cpus=1, gpus=1, cpu_seconds=600 * 0.6, usage=gpu_usage(0.0, held=GIB))
    assert "gpu_input_bound" not in names(unmeasured)
    # two threads each runnable throughout are two cores asked: not one saturated
    two = report(cpus=2, gpus=1, cpu_seconds=600 * 1.0, usage=replace(
        gpu_usage(0.0, held=GIB), cpu_wait_seconds=600 * 1.0, busy_tasks_max=2))
    assert "gpu_input_bound" not in names(two)


def triggering_reports():
    """(case id, report, thresholds) on which each of these detectors fires: for the
    evidence-sentence tests, which need every detector to fire somewhere."""
    yield "cpu-starved", report(cpu_seconds=60.0, usage=Usage(cpu_pressure_seconds=400.0)), T
    yield "io-starved", report(cpu_seconds=60.0, usage=Usage(io_pressure_seconds=400.0)), T
    yield "memory-thrashing", report(cpu_seconds=60.0, usage=Usage(
        memory_pressure_seconds=120.0, memory_high_events=3)), T
    yield "gpu-input-bound", report(cpus=4, gpus=1, cpu_seconds=600 * 1.02, usage=gpu_usage(
        0.06, cores=(0.97, 0.02, 0.02, 0.01))), T
    yield "gpu-cores-idle", report(cpus=8, gpus=1, cpu_seconds=600.0, usage=gpu_usage(0.92)), T
    yield "memory-growth", mem_report(rss(lambda i: 20 * MIB + i * 12 * MIB)), T
    yield "gpu-memory-low", gpu_mem_report(6 * GIB, 80 * GIB, ("a100_80g", "v100")), T
