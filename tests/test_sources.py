"""The Prometheus and accounting sources: pure parsers on real captures, and the sources
when their service is down (against the real stack: tests/stack/test_sources_live.py)."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from webapp.model import JobId, SourceUnavailable
from webapp.sources import accounting, prometheus, prometheus_queries
from webapp.sources.prometheus_answers import (
    merge_series,
    parse_matrix,
    parse_mean_since,
    parse_scalar,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "prometheus"


def _load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_parse_matrix_docs_example():
    series = parse_matrix(_load("prometheus_docs_query_range_matrix_example.json"),
                                     "instance")
    assert [s.label for s in series] == ["localhost:9090", "localhost:9091"]
    assert series[0].points[0] == (1435781430.781, 1.0)
    assert len(series[0].points) == 3


def test_parse_matrix_live_capture_keeps_every_point():
    series = parse_matrix(_load("slurmweb_query_range_matrix_cores_by_state.json"),
                                     "state")
    assert len(series) >= 2
    assert all(len(s.points) == 120 for s in series)
    times = [t for t, _ in series[0].points]
    assert times == sorted(times) and times[1] - times[0] == 30


def test_parse_matrix_empty_and_error():
    empty = _load("slurmweb_query_range_matrix_empty_result.json")
    assert parse_matrix(empty, "x") == []
    with pytest.raises(ValueError, match="parse error"):
        parse_matrix(_load("slurmweb_query_error_bad_data_http400.json"), "x")


def test_parse_scalar_vector_example():
    assert parse_scalar(_load("prometheus_docs_query_vector_example.json")) == 1.0


@pytest.mark.parametrize(("seconds", "interval", "step"), [
    (30, 5, 5.0),              # short job: one point per scrape
    (7 * 86400, 30, 606.0),    # a week: <= 1000 points
    (3600, 30, 30.0),
])
def test_step_keeps_series_under_max_points(seconds, interval, step):
    got = prometheus.choose_step(seconds, interval)
    assert got == step
    assert seconds / got + 1 <= prometheus.MAX_POINTS


@pytest.mark.parametrize("days", [1 / 24, 7, 365, 3650])
def test_range_queries_are_split_by_points_not_by_days(days):
    seconds = days * 86400
    step = prometheus.choose_step(seconds, 30)
    parts = prometheus.pieces(0, seconds, step)
    assert len(parts) <= prometheus.MAX_POINTS / prometheus.PIECE_STEPS
    assert parts[0][0] == 0 and parts[-1][1] == seconds


def test_many_nodes_share_the_points_budget():
    assert prometheus.max_points(1) == prometheus.MAX_POINTS
    assert prometheus.max_points(100) * 100 <= prometheus.POINTS_BUDGET
    assert prometheus.max_points(10_000) == prometheus.MIN_POINTS


def test_selector_escapes_and_limits_nodes():
    sel = prometheus.job_selector('1"}or{x="', ["node01", "gpu.a"])
    assert sel.startswith('jobid="1\\"}or{x=\\""')
    assert 'instance=~"(node01|gpu\\\\.a)(:[0-9]+)?"' in sel


def test_merge_series_joins_chunks():
    a = [prometheus.Series("n1", ((1.0, 1.0), (2.0, 2.0)))]
    b = [prometheus.Series("n1", ((2.0, 2.0), (3.0, 3.0))), prometheus.Series("n2", ((3.0, 0.0),))]
    merged = merge_series([a, b])
    assert [s.label for s in merged] == ["n1", "n2"]
    assert merged[0].points == ((1.0, 1.0), (2.0, 2.0), (3.0, 3.0))


# accounting: pure decoding of the view's integers


@pytest.mark.parametrize(("raw", "state"), [
    (3, "COMPLETED"), (5, "FAILED"), (6, "TIMEOUT"), (7, "NODE_FAIL"), (11, "OUT_OF_MEMORY"),
    (4 | 0x8000, "CANCELLED"),  # JOB_COMPLETING flag masked off
    # slurmdbd's record of a requeued run and of a job before a resize: the flag alone,
    # whose base would read PENDING (slurm.h JOB_REQUEUE 0x400, JOB_RESIZING 0x2000)
    (0x0400, "REQUEUED"), (0x2000, "RESIZING"),
])
def test_state_name(raw, state):
    assert accounting.state_name(raw) == state


def test_parse_exit_code_and_tres():
    assert accounting.exit_code_text(768) == "3:0"
    assert accounting.exit_code_text(9) == "0:9"
    names = {1: "cpu", 2: "mem", 4: "node", 1001: "gres/gpu"}
    assert accounting.parse_tres_ids("1=2,2=500,4=1,1001=2", names) == {
        "cpu": 2, "mem": 500, "node": 1, "gres/gpu": 2}


def test_parse_mem_req_per_cpu_and_per_node():
    assert accounting.mem_req_bytes(500, 2, 1) == 500 * 2**20
    assert accounting.mem_req_bytes(accounting.MEM_PER_CPU | 1000, 4, 1) == 4000 * 2**20
    assert accounting.mem_req_bytes(0, 1, 1) is None


# the sources when their service is down (on the stack: tests/stack/test_sources_live.py)


def test_prometheus_down_is_source_unavailable():
    src = prometheus.PrometheusSource("http://127.0.0.1:9", timeout=2)
    now = datetime.now(UTC)
    with pytest.raises(SourceUnavailable) as err:
        src.usage("1", now - timedelta(minutes=5), now)
    assert err.value.source == "prometheus"


@pytest.mark.parametrize("body", [b"[]", b'"ok"', b"null"])
def test_prometheus_answering_json_not_an_object_is_source_unavailable(body):
    """A proxy in front of Prometheus that answers JSON of another shape: the report's
    "data unavailable" note, not an AttributeError out of the page."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET  # noqa: N815 (http.server's name)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        src = prometheus.PrometheusSource(f"http://127.0.0.1:{server.server_port}", timeout=5)
        now = datetime.now(UTC)
        with pytest.raises(SourceUnavailable, match="not an object") as err:
            src.usage("1", now - timedelta(minutes=5), now)
        assert err.value.source == "prometheus"
    finally:
        server.shutdown()
        server.server_close()


def test_accounting_down_is_source_unavailable():
    src = accounting.AccountingSource("mysql://jobreport:x@127.0.0.1:9/jobreport", "demo")
    with pytest.raises(SourceUnavailable) as err:
        src.job(JobId(1))
    assert err.value.source == "accounting"



def test_figures_share_one_request_each_labelled():
    query = prometheus_queries.combined({"read_bytes": "sum(a)", "threads_max": "max(b)"})
    assert query == ('label_replace(sum(a), "figure", "read_bytes", "", "") or '
                     'label_replace(max(b), "figure", "threads_max", "", "")')


@pytest.mark.parametrize(("first", "at"), [(1_000, 1_090), (1_700_000_017, 1_700_604_877),
                                           (0, 3 * 365 * 86400), (3_599, 3_601)])
def test_peak_pieces_cover_the_whole_window(first, at):
    query, time = prometheus_queries.peak_query("threads_max", 'jobid="1"', first, at)
    piece, window = (int(x) for x in re.search(r"\[(\d+)s\]\)\[(\d+)s:", query).groups())
    assert time >= at and time % piece == 0  # the last piece ends at or after the end
    first_piece_end = (time - window) // piece * piece + piece  # first multiple > T - W
    assert first_piece_end - piece <= first  # and the first starts at or before the start
    assert window // piece <= 201 and piece >= 3600


def test_mean_since_start_from_raw_last_samples():
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"instance": "n1", "core": "0", "job": "a"},
         "values": [[1000, "40"], [1030, "45"]]},
        {"metric": {"instance": "n1", "core": "0", "job": "b"}, "values": [[1030, "9"]]},
        {"metric": {"instance": "n1", "core": "1"}, "values": [[1030, "3"]]},
    ]}}
    got = parse_mean_since(answer, "instance/core", 940, 1040)
    assert [(s.label, s.points) for s in got] == [("n1/0", ((1040, 0.5 + 0.1),)),
                                                  ("n1/1", ((1040, 3 / 90),))]


def test_a_final_sample_after_the_end_counts_the_run_only():
    # A 3 s job sampled once, 2 s after its (whole-second) end, 2.7 CPU-s on the core: its
    # mean is over its 3 s run, not over the 5 s up to the sample (nor nothing at all).
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"instance": "n1", "core": "0"}, "values": [[1005, "2.7"]]}]}}
    got = parse_mean_since(answer, "instance/core", 1000, 1003)
    assert [(s.label, s.points) for s in got] == [("n1/0", ((1003, pytest.approx(0.9)),))]


def test_pressure_tail_queries_filter_their_label_after_the_job_selector():
    from webapp.sources.prometheus_queries import (
        TAIL_FIGURES,
        V2_ONLY_FIGURES,
        WINDOW_QUERIES,
        tail_query,
    )

    q = tail_query("io_pressure_seconds", 'jobid="7"', "instance", "300s")
    assert q == ('max by (instance) (last_over_time(jobs_pressure_waiting_seconds_total'
                 '{jobid="7",resource="io"}[300s]))')
    assert 'jobs_memory_events_total{jobid="7",event="high"}' in tail_query(
        "memory_high_events", 'jobid="7"', "instance", "300s")
    assert V2_ONLY_FIGURES <= set(TAIL_FIGURES) <= set(WINDOW_QUERIES)
