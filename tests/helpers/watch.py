"""Running jobs and live samples for the watch tests, from captured data where it counts.

Not a test module. GPU readings come from ``fixtures/exporter/nvml/replay.json`` (a real
H100 at 100 % and a real Tesla T4 at 0 %); per-node CPU from Prometheus answers captured
on the local stack (``fixtures/prometheus/watch/``: a busy job and an idle one)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from webapp.model import AccountingJob, Series
from webapp.sources.live import LiveSample, Measured, Windows
from webapp.sources.prometheus import parse_labelled

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0
WINDOWS = Windows(gpu=HOUR, node=1800.0, memory=1800.0, output=1800.0, small_files=600.0)


def running_job(job_id: str = "501", *, user: str = "alice", account: str = "research",
                partition: str = "debug", gpus: int = 1, nodes: tuple[str, ...] = ("vm",),
                ran: float = 2 * HOUR, limit: float = 24 * HOUR,
                qos: str | None = None) -> AccountingJob:
    start = datetime.fromtimestamp(NOW - ran, UTC)
    return AccountingJob(
        cluster="demo", job_id=job_id, job=int(job_id), array_job=None, array_task=None,
        het_job=None, het_offset=None, uid=1001, user=user, account=account,
        partition=partition, job_name="train", state="RUNNING", exit_code="0:0",
        submit_time=start, start_time=start, end_time=None, cpus=2,
        memory_requested_bytes=4 * 1024**3, time_limit_seconds=limit, nodes=nodes,
        node_list=",".join(nodes), work_dir="/home/alice", gpus=gpus, qos=qos)


def nvml_utilization(name: str) -> float:
    """The recorded utilisation (0..1) of the device whose name contains ``name``."""
    devices = json.loads((FIXTURES / "exporter/nvml/replay.json").read_text())["devices"]
    return next(d["utilization_gpu_percent"] for d in devices if name in d["name"]) / 100


def gpu_sample(job: AccountingJob, utilization: float, samples: int = 720) -> LiveSample:
    gpus = tuple(Measured(f"vm/{i}", utilization, samples) for i in range(job.gpus))
    return LiveSample(job, NOW, WINDOWS, 5.0, gpu_utilization=gpus)


def captured_node(job: str, node: str) -> Measured:
    """A node's mean cores busy and sample count, from a captured answer, renamed."""
    base = FIXTURES / "prometheus/watch"
    cores = parse_labelled(json.loads((base / f"job-{job}-node_cores.json").read_text()))
    count = parse_labelled(json.loads((base / f"job-{job}-node_samples.json").read_text()))
    return Measured(node, cores[0][1], int(count[0][1]))


def node_sample(job: AccountingJob, *jobs: str) -> LiveSample:
    """A multi-node job whose nodes behaved as the captured jobs did (20 s windows)."""
    nodes = tuple(captured_node(j, n) for j, n in zip(jobs, job.nodes, strict=True))
    return LiveSample(job, NOW, replace(WINDOWS, node=20.0), 5.0, node_cores=nodes)


def memory_series(per_second: float, base: float, n: int = 60,
                  step: float = 30.0) -> Series:
    return Series("vm", tuple((NOW - (n - 1 - i) * step, base + per_second * (i * step))
                              for i in range(n)))
