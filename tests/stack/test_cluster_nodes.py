"""The stack's cluster of several nodes, live: a job on two nodes with figures per node, one
with an idle node (the report's finding and the watch's rule), a heterogeneous job, a node
that fails under its job, and a job waiting for one GPU model while the other sits idle.

The session batch (``stack.STACK_JOBS``) holds the plain jobs; the node failure and the
GPU wait are set up here, while the batch runs on the other nodes.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time

import pytest
import requests

from tests.helpers import stack
from tests.helpers.wait import wait_for
from webapp.detectors.gpu_type_unavailable import GpuTypeUnavailableDetector
from webapp.model import JobNotFound
from webapp.renderers import text
from webapp.renderers.json import to_dict
from webapp.sources.from_settings import prometheus_from
from webapp.sources.live import LiveSource
from webapp.watch.rules import node_idle
from webapp.watch.run import windows

MIB = 2**20


def prom(url: str, query: str, t: float) -> list[dict]:
    r = requests.get(f"{url}/api/v1/query", params={"query": query, "time": t}, timeout=30)
    return r.json()["data"]["result"]


def test_sinfo_lists_the_nodes_of_both_partitions(stack_env):
    listed = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %P %G"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert len({line.split()[0] for line in listed}) >= 4
    gres = {line.split()[2] for line in listed if line.split()[1] == "gpu"}
    # two NVIDIA models, AMD MI300X, and an H100 in MIG mode whose MIG devices are the GPUs
    assert gres == {"gpu:t4:2", "gpu:h100:2", "gpu:mi300x:2",
                    "gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2"}


def test_a_two_node_job_has_figures_per_node_and_the_busiest_nodes_peak(stack_jobs, service):
    report = service.build(stack_jobs["two-node"])
    assert len(report.nodes) == 2 and report.state == "COMPLETED"
    data = to_dict(report)
    cpu = {s["label"]: s for s in data["series"]["cpu_cores"]}
    rss = {s["label"]: s for s in data["series"]["memory_rss_bytes"]}
    assert set(cpu) == set(rss) == set(report.nodes)
    assert all(s["points"] for s in [*cpu.values(), *rss.values()])  # samples on both nodes
    peaks = {node: max(v for _, v in s["points"]) for node, s in rss.items()}
    low, high = sorted(peaks, key=peaks.get)
    assert 95 * MIB <= peaks[low] <= 140 * MIB and 195 * MIB <= peaks[high] <= 240 * MIB
    # The job's peak is the busiest node's (rank 1 held 200 MiB), never the sum of both.
    assert report.memory_peak.node == high
    assert peaks[high] <= report.memory_peak.bytes <= peaks[high] * 1.05
    assert "node_idle" not in {f.name for f in report.findings}


def test_a_two_node_job_with_an_idle_node_gets_the_finding_on_that_node(stack_jobs, service):
    job_id = stack_jobs["two-node-one-idle"]
    report = service.build(job_id)
    found = [f for f in report.findings if f.name == "node_idle"]
    verdict = {v.detector: v for v in report.audit.verdicts}.get("node_idle")
    assert len(found) == 1, (verdict, report.coverage,
                             [(s.label, s.mean()) for s in report.usage.cpu_cores])
    (finding,) = found
    # The idle node by the test's own reading of Prometheus: CPU seconds per node.
    end = report.end_time.timestamp()
    rows = prom(service.settings.prometheus_url,
                f'sum by (instance) (max_over_time(jobs_cpu_seconds_total{{jobid="{job_id}"}}'
                f"[{int(report.elapsed_seconds) + 30}s]))", end + 10)
    seconds = {r["metric"]["instance"]: float(r["value"][1]) for r in rows}
    assert set(seconds) == set(report.nodes)
    # The counter includes the idle rank's start (Python, its 200 MiB filled): a few tenths
    # of a second on a loaded node, so "idle" here is under a quarter of the busy node's seconds.
    idle, busy = sorted(seconds, key=seconds.get)
    assert seconds[idle] < 0.25 * seconds[busy], seconds  # a loaded node gives the busy rank less
    assert finding.evidence["idle_nodes"] == idle
    assert f"({idle}: 0.0" in finding.message


def test_the_watch_flags_the_idle_node_while_the_job_ran(stack_jobs, service):
    """The watch's rule on the same job, evaluated at a moment of its run with a window
    of that run's length (the watch reads Prometheus the same way while jobs run)."""
    report = service.build(stack_jobs["two-node-one-idle"])
    thresholds = dataclasses.replace(service.thresholds, node_idle_seconds=10.0)
    ended = service.accounting.job(report.job_id)
    job = dataclasses.replace(ended, state="RUNNING", end_time=None)  # as the watch saw it
    live = LiveSource(prometheus_from(service.settings))
    at = report.end_time.timestamp() - 2
    alert = node_idle(live.sample(job, at, windows(thresholds)), thresholds)
    assert alert is not None and f"1 of the 2 nodes of job {report.job_id}" in alert.message
    busy = [n for n in report.nodes if n not in
            {f.evidence["idle_nodes"] for f in report.findings if f.name == "node_idle"}]
    assert len(busy) == 1


def test_a_heterogeneous_job_has_one_line_per_component(stack_jobs, service):
    job_id = stack_jobs["het"]
    report = service.build(job_id)
    lines = {line.step_id: line for line in report.step_lines if line.kind == "component"}
    assert set(lines) == {f"{job_id}+0", f"{job_id}+1"}
    assert (lines[f"{job_id}+0"].cpus, lines[f"{job_id}+1"].cpus) == (1, 2)
    data = to_dict(report)
    assert [s["step_id"] for s in data["step_lines"] if s["kind"] == "component"] == [
        f"{job_id}+0", f"{job_id}+1"]


def test_a_heterogeneous_job_is_judged_whole(stack_jobs, service):
    """Asked for as ``123``, the job is both components: 3 cores in the headline, the key
    figures and the findings; each component stays a line of the details."""
    report = service.build(stack_jobs["het"])
    assert report.cpus == 3 and report.figures_from is None
    parts = [x for x in report.step_lines if x.kind == "component"]
    assert report.cpu_seconds == pytest.approx(sum(x.cpu_seconds or 0.0 for x in parts))
    assert set(report.nodes) == {n for c in report.components for n in c.nodes}
    # every component's series count (each is a job of its own to the exporter)
    assert report.coverage and all(n.samples for n in report.coverage.nodes), report.coverage
    out = text.render(report)
    assert "3 cores" in out and "Figures below are those of" not in out, out
    assert "of its 1 core" not in out
    one = service.build(f"{stack_jobs['het']}+1")  # a component asked for is itself
    assert one.cpus == 2


def test_one_busy_rank_per_node_is_not_serial(stack_jobs, service):
    report = service.build(stack_jobs["two-node-busy"])
    assert len(report.nodes) == 2
    cores = {s.label: s.mean() or 0.0 for s in report.usage.cpu_cores}
    # Both ranks worked, and alike: what share of this 2-core host each busy loop gets
    # depends on what else runs beside it (0.19 and 0.20 cores in run av), never one
    # node near idle while the other works.
    low, high = sorted(cores.values())
    assert low > 10 * service.thresholds.node_idle_cores and low >= high / 2, cores
    assert not {"serial_on_many_cores", "node_idle"} & {f.name for f in report.findings}


def test_each_gpu_model_reports_its_own_readings(stack_jobs, service):
    t4 = service.build(stack_jobs["gpu-untouched"])
    h100 = service.build(stack_jobs["gpu-h100"])
    assert t4.nodes != h100.nodes  # one GPU node each
    assert "gpu_idle" in {f.name for f in t4.findings}  # the replayed T4 idles
    assert "gpu_idle" not in {f.name for f in h100.findings}  # the replayed H100 works
    assert max(v for s in h100.usage.gpu_utilization for v in s.values) == pytest.approx(1.0)
    assert t4.usage.gpu_memory_total_bytes < 20 * 2**30 < h100.usage.gpu_memory_total_bytes


@pytest.fixture(scope="module")
def node_failure(stack_env):
    """A job alone on a node (``--exclusive``) that is set DOWN under it; the node is
    resumed whatever happens. Not requeueable: the job must end NODE_FAIL."""
    job = stack.StackJob("node-fail", "alice", ("-c1", "--mem=100M", "--time=5", "--exclusive",
                                                "--no-requeue"), "sleep 300")
    job_id = stack.submit(job)
    subprocess.run(["scontrol", "top", job_id], check=False, capture_output=True)
    node = stack.node_of(job_id)
    try:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down",
                        "reason=jobreport node-failure test"], check=True)
        states = stack.wait_until_done([job_id], timeout=120)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)
    return job_id, node, states[job_id]


def test_a_job_on_a_node_set_down_ends_node_fail_with_its_finding(node_failure, service):
    job_id, node, state = node_failure
    assert state == "NODE_FAIL"
    report = service.build(job_id)
    (finding,) = [f for f in report.findings if f.name == "node_failure"]
    assert report.nodes == (node,) and node in finding.evidence_text
    # slurmdbd's node event, read through the view: when and why, said once
    (event,) = [e for e in report.node_events if e.state.startswith("DOWN")]
    assert event.node == node and event.reason == "jobreport node-failure test"
    assert f'was set {event.state} at' in finding.message
    assert 'reason: "jobreport node-failure test"' in finding.message
    assert "hardware_fault" not in {f.name for f in report.findings}
    up = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True,
                        text=True).stdout.strip()
    assert not up.startswith("down")  # the test gave the node back


def test_a_job_waiting_for_a_busy_gpu_model_while_the_other_idles(stack_env, service):
    """Both T4s held by one job; a second asks for a T4 and waits while an H100 is free:
    its report (pending) says so."""
    blocker = stack.submit(stack.StackJob("t4-blocker", "alice", (
        "-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:t4:2", "--time=5"), "sleep 300"))
    waiter = None
    try:
        subprocess.run(["scontrol", "top", blocker], check=False, capture_output=True)
        stack.node_of(blocker)
        # No sample of the wait's window (it reaches one scrape, 5 s, before the submission)
        # may predate the blocker: slurm-exporter caches its answers for up to 2 s. Every
        # target scraped 3 s after the blocker ran, and a scrape interval later, before the
        # submission.
        stack.wait_for_scrape_after(service.settings.prometheus_url, time.time() + 3 + 5)
        waiter = stack.submit(stack.StackJob("t4-waiter", "bob", (
            "-c1", "--mem=100M", "-p", "gpu", "--gres=gpu:t4:1", "--time=5"), "sleep 5"))
        thresholds = dataclasses.replace(service.thresholds, queue_wait_min_seconds=15.0)
        built: list = []

        def long_enough():  # noqa: ANN202 - a report or None
            """The waiter's report once its wait is long enough and an H100 was seen free
            in it."""
            try:
                report = service.build(waiter)
            except JobNotFound:  # slurmdbd has not recorded the submission yet
                return None
            built[:] = [report]
            q = report.queue
            return report if q and q.pending_seconds >= 15 and dict(
                q.gpus_available_max).get("h100") else None

        report = wait_for(long_enough, 120,
                          lambda: f"the wait long enough: {built[0].queue if built else None}",
                          every=5)
        q = report.queue
        assert report.state == "PENDING" and q.requested_gpu_types == ("t4",)
        assert dict(q.gpus_available_max)["t4"] == 0
        (finding,) = GpuTypeUnavailableDetector().detect(report, thresholds)
        assert "t4 GPUs" in finding.message and "h100 (up to" in finding.message
    finally:
        subprocess.run(["scancel", blocker, *([waiter] if waiter else [])], check=False)
