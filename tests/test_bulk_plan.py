"""The bulk summaries' pure parts: step classes, windows, id selectors, one SQL for many."""

from __future__ import annotations

from webapp.model import JobId
from webapp.sources.accounting import jobs_query
from webapp.sources.prometheus_bulk import (
    JOBS_PER_QUERY,
    WINDOW_POINTS,
    JobWindow,
    id_selector,
    node_matches,
    plan,
    step_class,
)


def test_step_class_is_scrape_times_a_power_of_two():
    assert step_class(60, 5) == 5
    assert step_class(600 * 5, 5) == 10  # 3000 s at 5 s would be 601 points
    assert step_class(7 * 86400, 30) == 30 * 64
    for seconds in (1, 100, 10_000, 10**6):
        step = step_class(seconds, 30)
        assert seconds / step <= 600 and step / 30 in (1, 2, 4, 8, 16, 32, 64, 128)


def test_plan_bounds_each_window_by_points_and_jobs():
    jobs = [JobWindow(str(i), 1_000_000 + 7 * i, 1_000_000 + 7 * i + 60) for i in range(1000)]
    jobs.append(JobWindow("long", 1_000_000, 1_000_000 + 86400 * 3))
    batches = plan(jobs, 5)
    assert sorted(j.job_id for b in batches for j in b.jobs) == sorted(j.job_id for j in jobs)
    for b in batches:
        assert len(b.jobs) <= JOBS_PER_QUERY
        assert (b.end - b.start) / b.step <= WINDOW_POINTS
        assert b.start % b.step == 0
        assert all(b.start <= j.start and j.end <= b.end for j in b.jobs)
    assert [j.job_id for b in batches if b.step > 5 for j in b.jobs] == ["long"]
    assert len(batches) == 4  # 1000 one-minute jobs in 3 windows of 400, the long one alone


def test_id_selector_is_one_literal_alternation():
    assert id_selector(["12", "3_4", "5+1", "12"]) == 'jobid=~"(12|3_4|5\\\\+1)"'


def test_node_matches_with_and_without_port():
    assert node_matches("node01:9306", ("node01",))
    assert node_matches("node01", ("node01",))
    assert not node_matches("node011:9306", ("node01",))
    assert node_matches("anything", ())


def test_jobs_query_binds_every_value():
    sql, params = jobs_query("demo", [JobId.parse("12"), JobId.parse("3_4"),
                                      JobId.parse("5+1")])
    assert params == ["demo", 12, 3, 4, 5, 1]
    assert sql.count("%s") == len(params)
    assert "12" not in sql and "demo" not in sql


def test_bulk_queue_max_gpus_stops_at_the_start():
    """GPUs freed just after a job started were not available to it (as the per-job
    max_over_time ending at the start reads them)."""
    from webapp.sources.cluster_bulk import Wait, context

    def series(values: list[float], **labels: str) -> list[dict]:
        return [{"metric": labels, "values": [[100 + 5 * i, str(v)] for i, v in
                                              enumerate(values)]}]

    gpus = series([1, 0, 0, 0, 2, 2], partition="debug", gpu_type="untyped")
    answers = {"seen": series([1] * 6), "reasons": [], "cpus_idle": series([0] * 6,
               partition="debug"), "cpus_total": series([2] * 6, partition="debug"),
               "queue_length": series([1] * 6, partition="debug"), "gpus_available": gpus}
    q = context(Wait("7", "debug", submit=106, start=117), answers, 5.0)
    assert q.gpus_available == (("untyped", 0),)  # at submit (the sample at 105)
    assert q.gpus_available_max == (("untyped", 0),)  # not the 2 freed at 120
    q = context(Wait("7", "debug", submit=101, start=117), answers, 5.0)
    assert q.gpus_available_max == (("untyped", 1),)  # the state at submit counts
