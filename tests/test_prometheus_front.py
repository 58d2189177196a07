"""The Prometheus front (``/prometheus/``, webapp/web/prometheus_front.py) over a real
Prometheus of the test's own (tests/helpers/prometheus_server.py), backfilled with
alice's job 4242 and bob's job 5000 (their owners: the fake report service's): what
passes answers Prometheus' own body and status, what does not is a 403 in Prometheus'
error format and one audit line."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import time
from collections.abc import Iterator

import pytest
import requests

from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from tests.helpers.reports import FakeService, default_service
from tests.helpers.web import make_app, password_settings, signed_in

GRAFANA = "10.1.2.3"  # the address JOBREPORT_PROMETHEUS_FRONT_PROXIES lists
STRANGER = "10.9.9.9"
NOW = int(time.time()) // 60 * 60
LAST = NOW - 120  # the newest sample
START = LAST - 2 * 3600
MINE = 'jobs_cpu_seconds_total{jobid="4242"}'
BOBS = 'jobs_cpu_seconds_total{jobid="5000"}'


SERIES = {  # family -> (series, value per minute since START)
    "jobs_cpu_seconds counter": (('jobs_cpu_seconds_total{jobid="4242",instance="n1"}', 30),
                                 ('jobs_cpu_seconds_total{jobid="5000",instance="n2"}', 5)),
    "slurm_nodes gauge": (('slurm_nodes{cluster="demo",state="idle"}', 0),),
}


def openmetrics() -> str:
    """Each family's samples together, each series' in time order, a minute apart."""
    lines = []
    for family, series in SERIES.items():
        lines.append(f"# TYPE {family}")
        for name, per_minute in series:
            lines += [f"{name} {3 + (t - START) // 60 * per_minute} {t}"
                      for t in range(START, LAST + 1, 60)]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("prometheus-front")
    (tmp / "samples.om").write_text(openmetrics())
    backfill(tmp / "samples.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture
def web_settings(tmp_path, prometheus):
    return password_settings(tmp_path, prometheus_url=prometheus,
                             prometheus_front_proxies=(ipaddress.ip_network(GRAFANA),))


@pytest.fixture
def alice(app):
    return signed_in(app, "alice")


def direct(prometheus: str, path: str, **params: str) -> requests.Response:
    return requests.get(f"{prometheus}/api/v1/{path}", params=params, timeout=10)


def test_her_own_job_answers_prometheus_own_body(alice, prometheus):
    query = f"max_over_time({MINE}[1h])"
    answer = alice.get("/prometheus/api/v1/query", query_string={"query": query,
                                                                 "time": str(LAST)})
    assert answer.status_code == 200
    result = answer.get_json()["data"]["result"]
    assert result and result[0]["metric"]["jobid"] == "4242"
    assert answer.get_data() == direct(prometheus, "query", query=query,
                                       time=str(LAST)).content


def test_a_range_query_posted_as_grafana_sends_it(alice, prometheus):
    form = {"query": f"rate({MINE}[5m])", "start": str(START + 600), "end": str(LAST),
            "step": "60"}
    answer = alice.post("/prometheus/api/v1/query_range", data=form)  # no CSRF token
    assert answer.status_code == 200 and answer.get_json()["data"]["resultType"] == "matrix"
    assert answer.get_data() == direct(prometheus, "query_range", **form).content


def test_prometheus_own_refusal_comes_back_as_it_is(alice, prometheus):
    answer = alice.get("/prometheus/api/v1/query", query_string={"query": MINE,
                                                                 "time": "yesterday"})
    expected = direct(prometheus, "query", query=MINE, time="yesterday")
    assert answer.status_code == expected.status_code == 400
    assert answer.get_data() == expected.content


@pytest.mark.parametrize(("query", "reason"), [
    (f"max_over_time({BOBS}[1h])", "job 5000 is not yours"),
    ("sum(jobs_cpu_seconds_total)", "does not name its jobs"),
    (f"{MINE} + on(instance) {BOBS}", "job 5000 is not yours"),
])
def test_what_is_not_hers_is_a_403_and_one_audit_line(alice, caplog, query, reason):
    with caplog.at_level(logging.WARNING, logger="webapp.web.prometheus_front"):
        answer = alice.get("/prometheus/api/v1/query", query_string={"query": query})
    assert answer.status_code == 403
    body = answer.get_json()
    assert body["status"] == "error" and body["errorType"] == "forbidden"
    assert reason in body["error"]
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1
    assert 'user="alice"' in lines[0] and reason in lines[0]
    assert "jobs_cpu_seconds_total" in lines[0]


def test_bob_reads_his_own_and_staff_read_everything(app):
    bob = signed_in(app, "bob")
    assert bob.get("/prometheus/api/v1/query", query_string={"query": BOBS}).status_code == 200
    assert bob.get("/prometheus/api/v1/query", query_string={"query": MINE}).status_code == 403
    staff = signed_in(app, "staffer")
    answer = staff.get("/prometheus/api/v1/query",
                       query_string={"query": "sum by (jobid) (jobs_cpu_seconds_total)",
                                     "time": str(LAST)})
    assert answer.status_code == 200
    assert {r["metric"]["jobid"] for r in answer.get_json()["data"]["result"]} == {"4242", "5000"}


def test_series_and_labels_need_match_selectors_that_pass(alice, app):
    series = alice.get("/prometheus/api/v1/series", query_string={"match[]": MINE})
    assert series.status_code == 200
    assert {s["jobid"] for s in series.get_json()["data"]} == {"4242"}
    assert alice.get("/prometheus/api/v1/series",
                     query_string={"match[]": [MINE, BOBS]}).status_code == 403
    assert alice.get("/prometheus/api/v1/series").status_code == 400  # as Prometheus says
    values = alice.get("/prometheus/api/v1/label/jobid/values", query_string={"match[]": MINE})
    assert values.status_code == 200 and values.get_json()["data"] == ["4242"]
    # no match[] at all: every job (a picker names its series: below)
    refused = alice.get("/prometheus/api/v1/label/jobid/values")
    assert refused.status_code == 403 and "needs match[]" in refused.get_json()["error"]
    labels = alice.post("/prometheus/api/v1/labels", data={"match[]": "slurm_nodes"})
    assert labels.status_code == 200 and "state" in labels.get_json()["data"]
    staff = signed_in(app, "staffer")
    every = staff.get("/prometheus/api/v1/label/jobid/values").get_json()["data"]
    assert every == ["4242", "5000"]


ALL_JOBS = "jobs_cpu_seconds_total"  # a job picker's match[]: per-job series, no job named


def test_a_job_picker_lists_only_the_askers_own_jobs(alice, app, caplog):
    window = {"start": str(START), "end": str(LAST)}
    for who, session, own in (("alice", alice, "4242"), ("bob", signed_in(app, "bob"), "5000")):
        values = session.get("/prometheus/api/v1/label/jobid/values",
                             query_string={"match[]": ALL_JOBS, **window})
        assert values.status_code == 200 and values.get_json()["data"] == [own], who
        series = session.post("/prometheus/api/v1/series", data={"match[]": ALL_JOBS, **window})
        assert series.status_code == 200
        assert {s["jobid"] for s in series.get_json()["data"]} == {own}, who
    # without a start: the asker's jobs of the last 30 days
    values = alice.get("/prometheus/api/v1/label/jobid/values", query_string={"match[]": ALL_JOBS})
    assert values.get_json()["data"] == ["4242"]
    # the clusters' names pass as they are (these samples have no cluster label: none)
    clusters = alice.get("/prometheus/api/v1/label/cluster/values",
                         query_string={"match[]": ALL_JOBS})
    assert clusters.status_code == 200 and clusters.get_json()["status"] == "success"
    # no picker: another label's values, a pattern, a name pattern, a query
    caplog.set_level(logging.WARNING, logger="webapp.web.prometheus_front")
    for path, match in (("label/user/values", ALL_JOBS), ("label/instance/values", ALL_JOBS),
                        ("label/jobid/values", 'jobs_cpu_seconds_total{jobid=~".+"}'),
                        ("label/jobid/values", '{__name__=~"jobs_.*"}'),
                        ("series", "slurm_nodes or jobs_cpu_seconds_total")):
        refused = alice.get(f"/prometheus/api/v1/{path}", query_string={"match[]": match})
        assert refused.status_code in (400, 403), (path, match, refused.get_json())
    assert "refused" in caplog.text
    query = alice.get("/prometheus/api/v1/query", query_string={"query": ALL_JOBS})
    assert query.status_code == 403 and "does not name its jobs" in query.get_json()["error"]


def test_a_picker_with_accounting_down_is_a_503(web_settings):
    alice = signed_in(make_app(web_settings, FakeService(down=True)), "alice")
    answer = alice.get("/prometheus/api/v1/label/jobid/values", query_string={"match[]": ALL_JOBS})
    assert answer.status_code == 503 and answer.get_json()["errorType"] == "unavailable"


def test_a_picker_on_a_shared_prometheus_must_name_the_cluster(tmp_path, prometheus):
    settings = password_settings(tmp_path, prometheus_url=prometheus,
                                 prometheus_cluster_label="cluster")
    alice = signed_in(make_app(settings, default_service()), "alice")
    bare = alice.get("/prometheus/api/v1/label/jobid/values", query_string={"match[]": ALL_JOBS})
    assert bare.status_code == 403 and "must name the cluster" in bare.get_json()["error"]
    pinned = alice.get("/prometheus/api/v1/label/jobid/values",
                       query_string={"match[]": f'{ALL_JOBS}{{cluster="demo"}}'})
    assert pinned.status_code == 200  # (these samples carry no cluster label: none listed)
    assert pinned.get_json()["data"] == []
    clusters = alice.get("/prometheus/api/v1/label/cluster/values",
                         query_string={"match[]": ALL_JOBS})
    assert clusters.status_code == 200


def test_cost_bounds_and_bad_parameters(alice):
    long_range = {"query": MINE, "start": "0", "end": str(LAST), "step": "1"}
    answer = alice.get("/prometheus/api/v1/query_range", query_string=long_range)
    assert answer.status_code == 403 and "points per series" in answer.get_json()["error"]
    huge = " + ".join([MINE] * 200)
    assert alice.post("/prometheus/api/v1/query", data={"query": huge}).status_code == 403
    bad = alice.get("/prometheus/api/v1/query", query_string={"query": "sum("})
    assert bad.status_code == 400 and bad.get_json()["errorType"] == "bad_data"
    # One query checked and another sent: never (Prometheus reads the form's first).
    twice = alice.post("/prometheus/api/v1/query?query=" + requests.utils.quote(MINE),
                       data={"query": BOBS})
    assert twice.status_code == 400 and "more than once" in twice.get_json()["error"]
    step = alice.get("/prometheus/api/v1/query_range",
                     query_string={**long_range, "step": "0"})
    assert step.status_code == 400 and "step" in step.get_json()["error"]


def test_grafana_names_the_user_only_from_its_listed_address(client):
    ask = {"query": MINE}
    grafana = client.get("/prometheus/api/v1/query", query_string=ask,
                         headers={"X-Grafana-User": "alice"},
                         environ_base={"REMOTE_ADDR": GRAFANA})
    assert grafana.status_code == 200
    for_bob = client.get("/prometheus/api/v1/query", query_string=ask,
                         headers={"X-Grafana-User": "bob"}, environ_base={"REMOTE_ADDR": GRAFANA})
    assert for_bob.status_code == 403
    stranger = client.get("/prometheus/api/v1/query", query_string=ask,
                          headers={"X-Grafana-User": "alice", "X-Remote-User": "alice"},
                          environ_base={"REMOTE_ADDR": STRANGER, "REMOTE_USER": "alice"})
    assert stranger.status_code == 401 and stranger.get_json()["errorType"] == "unauthorized"


def test_a_forwarded_address_is_not_the_peer(tmp_path, prometheus):
    # Behind one proxy (JOBREPORT_TRUSTED_PROXIES=1) remote_addr is X-Forwarded-For's
    # last entry, which a client writes itself: the header counts from the peer alone.
    settings = password_settings(tmp_path, prometheus_url=prometheus, trusted_proxies=1,
                                 prometheus_front_proxies=(ipaddress.ip_network(GRAFANA),))
    client = make_app(settings).test_client()
    answer = client.get("/prometheus/api/v1/query", query_string={"query": MINE},
                        headers={"X-Grafana-User": "alice", "X-Forwarded-For": GRAFANA},
                        environ_base={"REMOTE_ADDR": STRANGER})
    assert answer.status_code == 401


def test_a_session_is_not_widened_by_a_strangers_header(alice):
    answer = alice.get("/prometheus/api/v1/query",
                       query_string={"query": "sum(jobs_cpu_seconds_total)"},
                       headers={"X-Grafana-User": "staffer"},
                       environ_base={"REMOTE_ADDR": STRANGER})
    assert answer.status_code == 403


def test_remote_user_mode_believes_the_front_header_from_listed_peers_only(tmp_path, prometheus):
    settings = password_settings(tmp_path, prometheus_url=prometheus, auth="remote-user",
                                 prometheus_front_proxies=(ipaddress.ip_network(GRAFANA),))
    client = make_app(settings).test_client()
    ask = {"query": MINE}
    listed = client.get("/prometheus/api/v1/query", query_string=ask,
                        headers={"X-Remote-User": "alice"}, environ_base={"REMOTE_ADDR": GRAFANA})
    assert listed.status_code == 200
    other = client.get("/prometheus/api/v1/query", query_string=ask,
                       headers={"X-Remote-User": "alice"}, environ_base={"REMOTE_ADDR": STRANGER})
    assert other.status_code == 401


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/prometheus/api/v1/status/buildinfo"), ("GET", "/prometheus/api/v1/metadata"),
    ("POST", "/prometheus/api/v1/admin/tsdb/delete_series"), ("GET", "/prometheus/federate"),
    ("GET", "/prometheus/"), ("GET", "/prometheus/api/v1/query_exemplars"),
])
def test_everything_but_the_read_endpoints_is_a_404(alice, method, path):
    answer = alice.open(path, method=method)
    assert answer.status_code == 404 and answer.get_json()["errorType"] == "not_found"


def test_anonymous_gets_a_401_in_prometheus_format_not_the_login_page(client):
    answer = client.get("/prometheus/api/v1/query", query_string={"query": "up"})
    assert answer.status_code == 401 and answer.get_json()["status"] == "error"


def test_accounting_down_is_a_503_and_nothing_reaches_prometheus(web_settings):
    alice = signed_in(make_app(web_settings, FakeService(down=True)), "alice")
    answer = alice.get("/prometheus/api/v1/query", query_string={"query": MINE})
    assert answer.status_code == 503 and answer.get_json()["errorType"] == "unavailable"


def test_prometheus_down_is_a_503(web_settings):
    gone = dataclasses.replace(web_settings, prometheus_url=f"http://127.0.0.1:{free_port()}")
    alice = signed_in(make_app(gone, default_service()), "alice")
    answer = alice.get("/prometheus/api/v1/query", query_string={"query": MINE})
    assert answer.status_code == 503 and answer.get_json()["errorType"] == "unavailable"


def test_the_front_sends_only_what_it_checked(alice):
    # Parameters are passed as they came, so a second expression could hide in one
    # Prometheus reads: each single-valued one counts once, from the URL or the form.
    for name in ("query", "time", "start", "end", "step"):
        answer = alice.get(f"/prometheus/api/v1/query?{name}=1&{name}=2&query=up"
                           if name != "query" else "/prometheus/api/v1/query?query=up&query=up")
        assert answer.status_code == 400, name


def test_long_expressions_are_refused_unparsed(alice):
    deep = "(" * 3000 + MINE + ")" * 3000  # deep enough to crash the parser's stack
    answer = alice.post("/prometheus/api/v1/query", data={"query": deep})
    assert answer.status_code == 403 and "too long" in answer.get_json()["error"]


