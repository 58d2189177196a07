"""Verdicts that hold on a busy node, on real jobs: four busy processes on one core and
two busy processes on two cores, both while processes outside Slurm load the node, and a
one-core single-process job beside them as the true negative.

This checkout's exporter is run in-process on the real cgroups and /proc of each node the
jobs run on (the stack's own exporters are the main checkout's), and its figures are put in the
report the real sacct and Prometheus give for the job.
"""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs_exporter.registry import JobsCollector
from jobs_exporter.settings import Settings as ExporterSettings
from tests.helpers import stack
from tests.helpers.wait import wait_for
from webapp.detectors import detect_all

# A busy loop bounded by timeout(1), N of them in parallel in the batch step.
LOOPS = "for i in $(seq {n}); do timeout {s} sh -c 'while :; do :; done' & done; wait; exit 0"
JOBS = {
    "four-on-one-core": stack.StackJob("cw-four-on-one", "alice", ("-c1", "--mem=200M", "--time=2"),
                                       LOOPS.format(n=4, s=30)),
    "one-on-one-core": stack.StackJob("cw-one-on-one", "bob", ("-c1", "--mem=200M", "--time=2"),
                                      LOOPS.format(n=1, s=30)),
    "two-on-two-cores": stack.StackJob("cw-two-on-two", "alice", ("-c2", "--mem=200M", "--time=2"),
                                       LOOPS.format(n=2, s=30)),
}
OUTSIDE_LOAD = 2  # busy processes outside Slurm: the node's other work


def _figures(text: str, wanted: set[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            job = s.labels.get("jobid")
            if job in wanted and s.name in ("jobs_cpu_wait_seconds_total", "jobs_busy_tasks"):
                out.setdefault(job, {})[s.name] = s.value
    return out


def _nodes(job_ids: list[str]) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%N", "-j", ",".join(job_ids)],
                         capture_output=True, text=True).stdout
    return set(out.split())


@pytest.fixture(scope="module")
def measured(stack_env):
    """name -> (job id, last CPU wait total, most busy threads in one scrape)."""
    from prometheus_client import CollectorRegistry, generate_latest

    ids = {name: stack.submit(job) for name, job in JOBS.items()}
    # Ahead of the session's other queued jobs: these take seconds, not the node.
    subprocess.run(["scontrol", "top", ",".join(ids.values())], check=False,
                   capture_output=True)
    registries: dict[str, CollectorRegistry] = {}  # node -> that node's exporter
    load: list[subprocess.Popen] = []
    wait, busy = {}, {}
    try:
        def sampled_until_ended() -> bool:
            states = stack.states(list(ids.values()))
            if not load and "RUNNING" in states.values():  # load only while ours run
                load.extend(subprocess.Popen(["sh", "-c", "while :; do :; done"])
                            for _ in range(OUTSIDE_LOAD))
            for node in _nodes(list(ids.values())) - registries.keys():
                registries[node] = CollectorRegistry()
                registries[node].register(JobsCollector(
                    ExporterSettings(gpus="off", scontrol="", node_name=node)))
            text = "".join(generate_latest(r).decode() for r in registries.values())
            for job, got in _figures(text, set(ids.values())).items():
                if "jobs_cpu_wait_seconds_total" in got:
                    wait[job] = got["jobs_cpu_wait_seconds_total"]
                if "jobs_busy_tasks" in got:
                    busy[job] = max(busy.get(job, 0.0), got["jobs_busy_tasks"])
            return all(states.get(j) in stack.FINAL_STATES for j in ids.values())

        wait_for(sampled_until_ended, 900, f"the jobs {ids} ended", every=3)
    finally:
        for p in load:
            p.kill()
            p.wait()
    stack.wait_until_done(list(ids.values()))
    return {name: (j, wait.get(j), busy.get(j)) for name, j in ids.items()}


def verdicts(service, measured, name):
    job, wait, busy = measured[name]
    assert wait is not None and busy is not None, (name, wait, busy)
    report = service.build(job)
    usage = dataclasses.replace(report.usage, cpu_wait_seconds=wait, busy_tasks_max=busy)
    report = dataclasses.replace(report, usage=usage)
    return report, {f.name for f in detect_all(report, service.thresholds)}


def test_four_busy_processes_on_one_core_of_a_loaded_node_are_oversubscribed(service,
                                                                             measured):
    report, found = verdicts(service, measured, "four-on-one-core")
    assert report.usage.busy_tasks_max >= 3, report.usage
    assert "oversubscribed" in found, found
    assert "cpu_starved" not in found


def test_two_busy_processes_under_outside_load_are_not_serial(service, measured):
    report, found = verdicts(service, measured, "two-on-two-cores")
    assert report.usage.busy_tasks_max == 2, report.usage
    assert "serial_on_many_cores" not in found and "oversubscribed" not in found, found
    if report.cpu_efficiency is not None and report.cpu_efficiency < 0.65:
        assert "cpu_starved" in found, found  # slowed by the load: said as such


def test_one_busy_process_on_its_own_core_is_not_oversubscribed(service, measured):
    report, found = verdicts(service, measured, "one-on-one-core")
    assert report.usage.busy_tasks_max == 1, report.usage
    assert not found & {"oversubscribed", "serial_on_many_cores"}, found
