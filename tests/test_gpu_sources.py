"""JOBREPORT_GPU_METRICS: the same job's GPU figures from jobs-exporter, dcgm-exporter and
AMD device-metrics-exporter agree, on a real Prometheus.

The job is the real H200 recording (fixtures/exporter/nvml/real_h200_*_nvml_record.json:
20 NVML samples 2 s apart, 10 idle then 10 under a matmul loop), written as each exporter
writes it: jobs-exporter's ``jobs_gpu_*`` (its own units), dcgm-exporter's
``DCGM_FI_DEV_GPU_UTIL`` (percent) and ``DCGM_FI_DEV_FB_*`` (MiB), AMD's
``gpu_gfx_activity`` (percent) and ``gpu_*_vram`` (MiB), each with the label layout of
one of those exporters' recorded expositions (fixtures/prometheus/gpu_sources) and the
job label their Slurm integration adds. Beside them, the recorded expositions themselves:
a MIG card's instances (left out), AMD series whose job_id is empty (matching no job).
Backfilled with promtool into a Prometheus of the test's own.

Tolerance: utilisation within half a percentage point (the exporters report whole
percent), memory within 1 MiB (they report whole MiB; the card's total within 2 MiB,
dcgm's being three whole-MiB parts).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from webapp.model import gpu_utilization
from webapp.settings import Settings
from webapp.sources.from_settings import prometheus_from
from webapp.sources.gpu_metrics import AMD, DCGM, JOBS, SOURCES
from webapp.sources.gpu_tres_values import GpuTres, parse_gpu_tres
from webapp.sources.prometheus import PrometheusSource
from webapp.sources.prometheus_bulk import BulkMetrics, JobWindow

ROOT = Path(__file__).resolve().parents[1]

RECORD = ROOT / "fixtures/exporter/nvml/real_h200_580.159.04_nvml_record.json"
RECORDED = ROOT / "fixtures/prometheus/gpu_sources"
MIG = ROOT / "fixtures/exporter/nvml/dcgm-exporter-issue-512_h100_mig_gr_engine_active.prom"
MIB = 2**20
NODE, JOB, MIG_JOB = "h200", "2", "3"
SCRAPE = 2.0  # the recording's sample spacing
PORTS = {"jobs": 9306, "dcgm": 9400, "amd": 5000}
UTIL_TOLERANCE = 0.005
MEMORY_TOLERANCE = MIB


def recorded_labels(name: str, metric: str) -> dict[str, str]:
    """The labels of the first sample of ``metric`` in a recorded exposition."""
    text = (RECORDED / name).read_text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric:
                return dict(sample.labels)
    raise LookupError(f"{metric} not in {name}")


def samples() -> list[dict]:
    """(t, util %, used bytes (v2), reserved, free, total, processes' bytes) per sample."""
    out = []
    for s in json.loads(RECORD.read_text())["samples"]:
        d = s["devices"][0]
        v2 = d["memory_info_v2"]
        out.append({"t": s["t_unix"], "util": d["utilization"]["gpu"], "used": v2["used"],
                    "reserved": v2["reserved"], "free": v2["free"], "total": v2["total"]})
    return out


def series(t0: float) -> dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]]:
    """metric -> [(labels, [(time, value)])]: the job as each exporter writes it."""
    rec = samples()
    first = rec[0]["t"]
    at = [t0 + s["t"] - first for s in rec]

    def one(labels: dict[str, str], values: list[float]) -> list:
        return [(labels, list(zip(at, values, strict=True)))]

    jobs = {"jobid": JOB, "gpu": "0", "instance": f"{NODE}:{PORTS['jobs']}"}
    dcgm = {**recorded_labels("dcgm-exporter_issue-250_v100_bare-metal.prom",
                              "DCGM_FI_DEV_GPU_UTIL"),
            "gpu": "0", "hpc_job": JOB, "instance": f"{NODE}:{PORTS['dcgm']}"}
    amd = {**recorded_labels("device-metrics-exporter_issue-259.prom", "gpu_used_vram"),
           "gpu_id": "0", "job_id": JOB, "instance": f"{NODE}:{PORTS['amd']}"}
    out = {
        "jobs_gpu_utilization_ratio": one(jobs, [s["util"] / 100 for s in rec]),
        "jobs_gpu_memory_used_bytes": one(jobs, [s["used"] for s in rec]),
        "jobs_gpu_memory_total_bytes": one(jobs, [s["total"] for s in rec]),
        "DCGM_FI_DEV_GPU_UTIL": one(dcgm, [s["util"] for s in rec]),
        "DCGM_FI_DEV_FB_USED": one(dcgm, [s["used"] // MIB for s in rec]),
        "DCGM_FI_DEV_FB_FREE": one(dcgm, [s["free"] // MIB for s in rec]),
        "DCGM_FI_DEV_FB_RESERVED": one(dcgm, [s["reserved"] // MIB for s in rec]),
        "gpu_gfx_activity": one(amd, [s["util"] for s in rec]),
        "gpu_used_vram": one(amd, [s["used"] // MIB for s in rec]),
        "gpu_total_vram": one(amd, [s["total"] // MIB for s in rec]),
    }
    # The recorded expositions themselves, as scraped from the same node all along: a MIG
    # card whose instances carry the MIG job (dcgm-exporter labels every instance of a
    # card with every job of the card), and AMD series whose job_id stayed empty.
    for name, port, extra in (
            (MIG, PORTS["dcgm"], {"hpc_job": MIG_JOB}),
            (RECORDED / "device-metrics-exporter_issue-259.prom", PORTS["amd"], {}),
            (RECORDED / "device-metrics-exporter_pr-211_mi325x_debian.prom", PORTS["amd"], {})):
        for family in text_string_to_metric_families(name.read_text()):
            for s in family.samples:
                labels = {**s.labels, **extra, "instance": f"{NODE}:{port}"}
                out.setdefault(s.name, []).append((labels, [(t, s.value) for t in at]))
    return out


def write_openmetrics(path: Path, data: dict) -> None:
    with open(path, "w") as f:
        for metric, members in sorted(data.items()):
            f.write(f"# TYPE {metric} gauge\n")
            for labels, points in members:
                text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                f.writelines(f"{metric}{{{text}}} {v} {t:.3f}\n" for t, v in points)
        f.write("# EOF\n")


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[tuple[str, datetime, datetime]]:
    with recorded_prometheus(tmp_path_factory.mktemp("gpu-sources")) as found:
        yield found


@contextmanager
def recorded_prometheus(tmp: Path) -> Iterator[tuple[str, datetime, datetime]]:
    """The recording, as each exporter writes it, in a Prometheus of its own: (its URL,
    the job's start, its end)."""
    t0 = float((int(time.time()) - 3 * 3600) // 60 * 60)
    write_openmetrics(tmp / "gpus.om", series(t0))
    backfill(tmp / "gpus.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    rec = samples()
    start = datetime.fromtimestamp(t0, UTC)
    end = datetime.fromtimestamp(t0 + rec[-1]["t"] - rec[0]["t"], UTC)
    try:
        yield f"http://127.0.0.1:{port}", start, end
    finally:
        stop(proc)


def source(url: str, name: str) -> PrometheusSource:
    """What the settings open with JOBREPORT_GPU_METRICS=name."""
    return prometheus_from(Settings.from_env({
        "JOBREPORT_CONFIG": "", "JOBREPORT_PROMETHEUS_URL": url,
        "JOBREPORT_SCRAPE_INTERVAL": str(SCRAPE), "JOBREPORT_GPU_METRICS": name}))


def figures(url: str, name: str, start: datetime, end: datetime, job: str = JOB) -> dict:
    u = source(url, name).usage(job, start, end, (NODE,), resolution="full")
    peaks = [m for s in u.gpu_memory_used if (m := s.max()) is not None]
    return {"gpus": sorted(s.label.split("/", 1)[1] for s in u.gpu_utilization),
            "util": gpu_utilization(u.gpu_utilization),
            "peak": max(peaks) if peaks else None,
            "total": u.gpu_memory_total_bytes, "usage": u}


def test_the_job_labels_are_the_ones_the_exporters_write():
    """dcgm-exporter's ``hpc_job`` (its transformation/const.go), AMD's ``job_id`` as a
    recorded MI300X series with the Slurm labels filled carries it."""
    assert DCGM.job_label == "hpc_job"
    amd = recorded_labels("device-metrics-exporter_pr-16_mi300x_slurm.prom",
                          "gpu_ecc_uncorrect_mpio")
    assert amd[AMD.job_label] == "5" and "gpu_id" in amd


def test_the_setting_chooses_and_refuses_an_unknown_source():
    assert source("http://prom", "dcgm").gpu_metrics is DCGM
    assert source("http://prom", "jobs").gpu_metrics is JOBS
    assert set(SOURCES) == {"jobs", "dcgm", "amd", "tres"}
    with pytest.raises(Exception, match="JOBREPORT_GPU_METRICS"):
        source("http://prom", "nvidia-smi")


@pytest.mark.parametrize("name", ["dcgm", "amd"])
def test_the_same_job_agrees_whichever_source(prom, name):
    url, start, end = prom
    ours = figures(url, "jobs", start, end)
    theirs = figures(url, name, start, end)
    # the recording: idle, then 99-100 % with 1,194,131,456 bytes used (v2) of 143,771 MiB
    assert ours["gpus"] == theirs["gpus"] == ["0"]
    assert 0.3 < ours["util"] < 0.7 and ours["peak"] == 1_194_131_456
    assert math.isclose(theirs["util"], ours["util"], abs_tol=UTIL_TOLERANCE)
    assert abs(theirs["peak"] - ours["peak"]) <= MEMORY_TOLERANCE
    assert abs(theirs["total"] - ours["total"]) <= 2 * MEMORY_TOLERANCE
    # point by point, not only on average
    mine = {t: v for t, v in ours["usage"].gpu_utilization[0].points}
    for t, v in theirs["usage"].gpu_utilization[0].points:
        assert math.isclose(v, mine[t], abs_tol=UTIL_TOLERANCE)


@pytest.mark.parametrize("name", ["jobs", "dcgm", "amd"])
def test_the_syncs_bulk_read_gives_the_jobs_own_gpu_figures(prom, name):
    # The sync reads a batch of ended jobs with one query per figure, from the same source.
    url, start, end = prom
    src = source(url, name)
    window = JobWindow(JOB, start.timestamp(), end.timestamp(), (NODE,))
    bulk = BulkMetrics(src)
    got = bulk.fetch([window])[JOB]  # a refused query would leave the job out
    own = src.usage(JOB, start, end, (NODE,))
    assert [s.label for s in got.gpu_utilization] == [s.label for s in own.gpu_utilization]
    assert got.gpu_utilization and got.gpu_memory_total_bytes == own.gpu_memory_total_bytes
    assert math.isclose(gpu_utilization(got.gpu_utilization),
                        gpu_utilization(own.gpu_utilization), abs_tol=UTIL_TOLERANCE)
    assert max(s.max() for s in got.gpu_memory_used) == max(s.max() for s in own.gpu_memory_used)
    covered = src.coverage(JOB, start, end, (NODE,))
    assert covered.gpus and bulk.coverages[JOB] == covered  # the GPUs' samples, the source's


@pytest.mark.parametrize("gm", [DCGM, AMD], ids=["dcgm", "amd"])
def test_the_report_names_the_source_it_used(prom, gm):
    url, start, end = prom
    usage = figures(url, gm.name, start, end)["usage"]
    named = dict(usage.queries)[f"GPU figures from {gm.exporter}"]
    assert named == gm.note
    ranges = [q for n, q in usage.queries if n.startswith("gpu_utilization")]
    assert len(ranges) == 1 and gm.job_label + '="2"' in ranges[0]
    default = figures(url, "jobs", start, end)["usage"]
    assert not any(n.startswith("GPU figures from") for n, _ in default.queries)


def test_a_mig_card_is_left_out_with_dcgm(prom):
    """dcgm-exporter#369: the job mapping labels every instance of a card (issue 512's
    recording: three 1g.10gb instances) with every job of the card, so none of them is
    taken for the job's own."""
    url, start, end = prom
    got = figures(url, "dcgm", start, end, job=MIG_JOB)
    assert got["gpus"] == [] and got["peak"] is None and got["total"] is None
    assert "MIG cards left out" in DCGM.note


def test_amd_series_with_an_empty_job_id_are_no_job_s(prom):
    """device-metrics-exporter#162/#195/#231: the recorded series with job_id="" (83 %
    busy, 26 MiB used, on the job's node and GPU id) add nothing to the job's figures."""
    url, start, end = prom
    got = figures(url, "amd", start, end)
    assert got["peak"] == samples()[-1]["used"] // MIB * MIB
    idle = [v for t, v in got["usage"].gpu_utilization[0].points
            if t < start.timestamp() + 19]
    assert idle and max(idle) == 0.0


def test_coverage_reads_the_chosen_source(prom):
    url, start, end = prom
    for name in ("jobs", "dcgm", "amd"):
        cov = source(url, name).coverage(JOB, start, end, (NODE,))
        assert [c.samples for c in cov.gpus] == [len(samples())], name
        assert cov.gpus[0].fraction > 0.7, name


def test_slurm_tres_of_a_real_step():
    """hb-jobinfo's recorded sacct line: a one-V100 batch step's usage TRES."""
    line = next(x for x in (ROOT / "fixtures/sacct/DERIVED_hb-jobinfo_sacct_as_parsable2_"
                                   "with_header.psv").read_text().splitlines()
                if x.startswith("7965768.batch|"))
    fields = line.split("|")
    got = parse_gpu_tres(fields[23], fields[23], gpus=1)  # TRESUsageInMax (no Ave column)
    assert got.utilization == 0.9 and got.memory_bytes == 20500736 * 1024
    assert parse_gpu_tres("cpu=00:00:00,mem=80K", "", gpus=1) == GpuTres(None, None)
    assert parse_gpu_tres("gres/gpuutil=150", "gres/gpumem=2G", gpus=2).utilization == 0.75


def test_slurm_tres_memory_is_the_processes_and_agrees_within_one_percent(prom):
    """Slurm's gres/gpumem is what the job's processes hold (NVML's per-process
    usedGpuMemory, recorded beside the card's readings): 1,184,890,880 bytes under load
    against the card's 1,194,131,456 used (v2), 8.8 MiB (0.8 %) the context holds that no
    process is charged for. Within 1 % of the series' peak."""
    url, start, end = prom
    ours = figures(url, "jobs", start, end)
    record = json.loads(RECORD.read_text())["samples"]
    processes = max((p["usedGpuMemory"] for s in record for p in s["devices"][0]["processes"]),
                    default=0)
    tres = parse_gpu_tres("", f"gres/gpumem={processes // 1024}K", gpus=1)
    assert tres.memory_bytes == 1_184_890_880
    assert abs(tres.memory_bytes - ours["peak"]) <= 0.01 * ours["peak"]
