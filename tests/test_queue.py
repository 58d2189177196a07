"""Queue context and its findings on real captures: the stack's Prometheus answers for
job 146, the partition's time limits from the accounting view, and (for two GPU types,
which the one-node stack cannot have) a sinfo line parsed by slurm-exporter."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime
from pathlib import Path

from slurm_exporter.collectors.gpus import available
from slurm_exporter.sinfo import parse_sinfo
from tests.helpers.reports import sample_report
from webapp.detectors import detect_all
from webapp.detectors.gpu_type_unavailable import GpuTypeUnavailableDetector
from webapp.detectors.time_limit_past_usual import TimeLimitPastUsualDetector
from webapp.model import QueueContext
from webapp.renderers import json as json_renderer
from webapp.renderers import text
from webapp.report.queue import weighted_median
from webapp.sources.cluster import QUEUE_QUERIES, reasons_from
from webapp.sources.prometheus_answers import parse_matrix, parse_vector
from webapp.thresholds import Thresholds

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "fixtures" / "prometheus" / "cluster"
SUBMIT = datetime(2026, 11, 23, 13, 20, 54, tzinfo=UTC)
START = datetime(2026, 11, 23, 13, 22, 52, tzinfo=UTC)
WAIT_ONLY = Thresholds(queue_wait_min_seconds=60)  # the stack's waits last minutes


def answer(name: str) -> dict:
    return json.loads((CAPTURE / f"job-146-{name}.json").read_text())


def one(name: str) -> int:
    return int(parse_vector(answer(name), "")[0].values[0])


def per_type(name: str) -> tuple[tuple[str, int], ...]:
    return tuple((s.label, int(s.values[0])) for s in parse_vector(answer(name), "gpu_type"))


def usual() -> dict[float, int]:
    data = json.loads((ROOT / "fixtures/sacct/local-partition-time-limits-debug.json").read_text())
    return {float(k): v for k, v in data["time_limit_seconds_to_jobs"].items()}


def job_146() -> QueueContext:
    """The queue context ClusterSource builds from the captured answers."""
    pending = (START - SUBMIT).total_seconds()
    limits = usual()
    return QueueContext(
        partition="debug", pending_seconds=pending,
        reasons=tuple(reasons_from(parse_matrix(answer("reasons"), "reason"), 5.0, pending)),
        cpus_idle=one("cpus_idle"), cpus_total=one("cpus_total"),
        gpus_available=per_type("gpus_available"), queue_length=one("queue_length"),
        gpus_available_max=per_type("gpus_available_max"),
        usual_time_limit_seconds=weighted_median(limits),
        usual_time_limit_jobs=sum(limits.values()), seen=True,
    )


def report(queue: QueueContext, **changes):
    return dataclasses.replace(sample_report(), queue=queue, submit_time=SUBMIT,
                               start_time=START, **changes)


def test_reasons_in_the_order_slurm_gave_them():
    q = job_146()
    assert [r.reason for r in q.reasons] == ["Priority", "Resources"]
    assert all(0 < r.seconds <= q.pending_seconds for r in q.reasons)
    assert q.reasons[0].first_seen < q.reasons[1].first_seen
    assert (q.cpus_idle, q.cpus_total, q.queue_length) == (2, 2, 0)
    assert q.gpus_available == (("untyped", 2),)


def test_the_queries_carry_the_cluster_and_escape_slurm_text():
    from webapp.sources.cluster import _queries

    q = _queries("demo", 'p"} or up{x="', "146", 60)
    assert 'partition="p\\"} or up{x=\\""' in q["cpus_idle"]
    assert all('cluster="demo"' in text for text in q.values()) and len(q) == len(QUEUE_QUERIES)


def test_weighted_median_of_the_captured_partition():
    assert weighted_median(usual()) == 300.0  # 5 min: 121 of 250 jobs at or below 3 min
    assert weighted_median({}) is None


def test_time_limit_past_usual_fires_on_a_limit_far_past_the_partition():
    found = TimeLimitPastUsualDetector().detect(
        report(job_146(), time_limit_seconds=3600.0, state="COMPLETED", elapsed_seconds=16.0),
        WAIT_ONLY)
    assert len(found) == 1 and found[0].evidence["ratio"] == 12.0
    assert "--time=" in found[0].advice


def test_time_limit_past_usual_silent_on_the_jobs_real_limit_and_short_waits():
    # Job 146 asked for 10 min: twice the usual 5 min, not far past it.
    assert TimeLimitPastUsualDetector().detect(
        report(job_146(), time_limit_seconds=600.0), WAIT_ONLY) == ()
    # The default floor (30 min) makes a 2-minute wait no finding at all.
    assert TimeLimitPastUsualDetector().detect(
        report(job_146(), time_limit_seconds=3600.0), Thresholds()) == ()


def two_types() -> tuple[tuple[str, int], ...]:
    """GPUs available per type, by slurm-exporter's own rule, on the two-type node."""
    free: dict[str, int] = {}
    for line in parse_sinfo((ROOT / "fixtures/slurm/derived-two-gpu-types.sinfo.txt").read_text()):
        for gpu_type, total in line.gpus.items():
            idle = total - line.gpus_alloc.get(gpu_type, 0) if available(line) else 0
            free[gpu_type] = free.get(gpu_type, 0) + idle
    return tuple(sorted(free.items()))


def test_gpu_type_unavailable_fires_when_the_asked_type_had_none_free():
    assert two_types() == (("A30", 0), ("Q6K", 4))
    q = dataclasses.replace(job_146(), gpus_available_max=two_types(),
                            requested_gpu_types=("A30",))
    found = GpuTypeUnavailableDetector().detect(report(q, gpus=1), WAIT_ONLY)
    assert len(found) == 1 and "Q6K (up to 4)" in found[0].message
    assert found[0].evidence["gpus_free_max_A30"] == 0


def test_gpu_type_unavailable_silent_when_the_asked_type_was_free():
    q = dataclasses.replace(job_146(), gpus_available_max=two_types(),
                            requested_gpu_types=("Q6K",))
    assert GpuTypeUnavailableDetector().detect(report(q, gpus=1), WAIT_ONLY) == ()
    # Job 146 as captured: untyped GPUs, nothing asked by type.
    assert GpuTypeUnavailableDetector().detect(report(job_146()), WAIT_ONLY) == ()


def test_queue_context_in_text_within_80_columns():
    out = text.render(report(job_146()), details=True)
    assert "Pending reasons   Priority (1m 10s), Resources (20s)" in out
    assert "2 of 2 CPUs idle" in out and "Usual time limit  5m 00s" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_json_queue_object_is_the_documented_one():
    data = json.loads(json_renderer.render(report(job_146())))
    readme = (ROOT / "docs" / "json-schema.md").read_text().split("## JSON schema", 1)[1]
    row = re.search(r"^\| `queue` \|(.*)$", readme, flags=re.M).group(1)
    documented = set(re.findall(r"`(\w+)`", row)) | set(re.findall(r"[{ ](\w+)[,}:]", row))
    assert set(data["queue"]) <= documented
    assert set(data["queue"]["at_submit"]) <= documented
    assert set(data["queue"]["reasons"][0]) <= documented
    assert data["queue"]["reasons"][1]["reason"] == "Resources"
    assert json.loads(json_renderer.render(sample_report()))["queue"] is None


def test_a_report_without_queue_context_has_no_queue_findings():
    assert not {f.name for f in detect_all(sample_report(), WAIT_ONLY)} & {
        "gpu_type_unavailable", "time_limit_past_usual"}


class _Unseen:
    """A cluster source that had no slurm-exporter sample while the job waited (what
    ClusterSource gives then: the wait alone)."""

    def __init__(self, pending: float) -> None:
        self.pending = pending

    def queue(self, job_id, partition, submit, start) -> QueueContext:
        return QueueContext(partition=partition, pending_seconds=self.pending)


def test_a_short_wait_needs_no_note_and_a_long_one_says_what_is_missing():
    from webapp.report.queue import with_queue

    base = dataclasses.replace(sample_report(), submit_time=SUBMIT, start_time=START)
    short = with_queue(base, _Unseen(1.0), None)  # the job: it waited 1 second
    assert not short.queue.long_wait and short.gaps == base.gaps
    assert "Waited" not in text.render(short)  # not a key figure
    assert "Waited            1s from submit" in text.render(short, details=True)
    long = with_queue(base, _Unseen(3600.0), None, note_after=600)
    assert long.queue.long_wait
    (gap,) = set(long.gaps) - set(base.gaps)
    assert gap.reason.startswith("the scheduler's state was not recorded while the job waited")
    out = text.render(long)
    assert "Waited 1h 00m in the queue" in out and "Note: The scheduler's state" in out
    assert "unknown" not in out.split("Key figures")[1]
