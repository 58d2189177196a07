"""On the real stack: the Prometheus front of the web app (``/prometheus/``,
docs/grafana.md), signed in as alice, then as bob, over the stack's Prometheus and
accounting view. Alice reads her job's series and not bob's; nobody reads every job's
sum; every panel query of both Grafana dashboards in deploy/, its variables filled for
alice's job as Grafana fills them, passes for alice and answers for bob what the checker
says (the jobs dashboard's per-job panels: refused; the cluster's ``slurm_*``: passed)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import requests

from tests.helpers.browser import serve
from tests.helpers.web import http_login
from webapp.settings import SETTINGS_DOC, Settings
from webapp.web import promql_guard
from webapp.web.prometheus_front import rules

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARDS = ("grafana-jobs-dashboard.json", "grafana-slurm-dashboard.json")
RATE_INTERVAL = "1m"  # what Grafana puts for $__rate_interval at the stack's 5 s scrapes


@dataclasses.dataclass(frozen=True)
class Ran:
    job_id: str
    start: float
    end: float
    node: str


def ran(job_id: str) -> Ran:
    """The job's start, end and node, as sacct says (local times, as it prints them)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id,
                          "--format=Start,End,NodeList"],
                         capture_output=True, text=True, check=True).stdout
    start, end, node = out.splitlines()[0].split("|")
    return Ran(job_id, datetime.fromisoformat(start).timestamp(),
               datetime.fromisoformat(end).timestamp(), node)


@pytest.fixture(scope="module")
def stack_settings(stack_env) -> Settings:
    base = Settings.from_env({k: v for k, v in stack_env.items() if k in SETTINGS_DOC})
    return dataclasses.replace(base, staff=frozenset({"staff"}))


@pytest.fixture(scope="module")
def app_url(stack_settings, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("prometheus-front")
    settings = dataclasses.replace(stack_settings, archive_url=str(tmp / "archive.sqlite"))
    yield from serve(lambda: None, tmp, base=settings, users=("alice", "bob", "staff"))


def signed_in(base: str, user: str) -> requests.Session:
    session = requests.Session()
    answer = http_login(base, user, "pw", session, timeout=30)
    assert answer.status_code == 302 and "/login" not in answer.headers["Location"]
    return session


@pytest.fixture(scope="module")
def alice(app_url) -> requests.Session:
    return signed_in(app_url, "alice")


@pytest.fixture(scope="module")
def bob(app_url) -> requests.Session:
    return signed_in(app_url, "bob")


@pytest.fixture(scope="module")
def hers(stack_jobs) -> Ran:
    return ran(stack_jobs["busy"])  # alice's


def query(session: requests.Session, base: str, expr: str, at: float) -> requests.Response:
    return session.get(f"{base}/prometheus/api/v1/query",
                       params={"query": expr, "time": str(at)}, timeout=60)


def test_alice_reads_her_job_and_not_bobs(app_url, alice, stack_jobs, hers):
    mine = query(alice, app_url,
                 f'max_over_time(jobs_cpu_seconds_total{{jobid="{hers.job_id}"}}[1h])',
                 hers.end)
    assert mine.status_code == 200, mine.text
    assert mine.json()["data"]["result"], "her job's series are in the stack's Prometheus"
    bobs = query(alice, app_url,
                 f'max_over_time(jobs_cpu_seconds_total{{jobid="{stack_jobs["idle"]}"}}[1h])',
                 hers.end)
    assert bobs.status_code == 403
    assert bobs.json()["errorType"] == "forbidden" and "is not yours" in bobs.json()["error"]
    every = query(alice, app_url, "sum(jobs_cpu_seconds_total)", hers.end)
    assert every.status_code == 403 and "does not name its jobs" in every.json()["error"]


def panel_queries(name: str) -> list[str]:
    def panels(items: list[dict]) -> Iterator[dict]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    board = json.loads((DEPLOY / name).read_text())
    return [t["expr"] for p in panels(board["panels"]) for t in p.get("targets", [])
            if t.get("expr")]


def filled(expr: str, job: Ran, cluster: str) -> str:
    """The panel's expression as Grafana sends it for this job: its variables' values."""
    for var, value in (("$__rate_interval", RATE_INTERVAL), ("$jobid", job.job_id),
                       ("$instance", job.node), ("$cluster", cluster)):
        expr = expr.replace(var, value)
    assert "$" not in expr, expr
    return expr


def checker_passes(expr: str, user: str, settings: Settings, owner_of) -> bool:
    try:
        ids = promql_guard.jobs_in_query(expr, rules(settings))
        promql_guard.check_owners(ids, lambda job_id: owner_of(job_id) == user)
    except promql_guard.Refused:
        return False
    return True


@pytest.mark.parametrize("dashboard", DASHBOARDS)
def test_every_panel_passes_for_alice_and_answers_bob_as_the_checker_says(
        app_url, alice, bob, hers, stack_settings, service, dashboard):
    owner_of = service.owner  # the lookup the front itself makes
    exprs = [filled(e, hers, stack_settings.cluster) for e in panel_queries(dashboard)]
    assert exprs
    window = {"start": str(hers.start - 60), "end": str(hers.end + 60), "step": "15"}
    refused_for_bob = 0
    for expr in exprs:
        # As Grafana sends a panel's query: a POSTed form.
        for who, session in (("alice", alice), ("bob", bob)):
            answer = session.post(f"{app_url}/prometheus/api/v1/query_range",
                                  data={"query": expr, **window}, timeout=60)
            expected = checker_passes(expr, who, stack_settings, owner_of)
            assert (answer.status_code == 200) == expected, (who, expr, answer.text)
            if not expected:
                assert answer.status_code == 403 and answer.json()["errorType"] == "forbidden"
        assert checker_passes(expr, "alice", stack_settings, owner_of), expr
        if not checker_passes(expr, "bob", stack_settings, owner_of):
            refused_for_bob += 1
            assert f'jobid="{hers.job_id}"' in expr  # only what names her job
    if dashboard == "grafana-jobs-dashboard.json":
        assert refused_for_bob == len(exprs) - 1  # all but the exporter's own timings
    else:
        assert refused_for_bob == 0  # the cluster's slurm_* series are public


def test_the_dashboards_variables(app_url, alice, bob, hers, stack_jobs, stack_settings,
                                  service):
    def values(session: requests.Session, label: str, match: str) -> requests.Response:
        return session.get(f"{app_url}/prometheus/api/v1/label/{label}/values",
                           params={"match[]": match, "start": str(hers.start - 3600)},
                           timeout=60)

    cluster = stack_settings.cluster
    nodes = f'jobs_info{{cluster="{cluster}",jobid="{hers.job_id}"}}'  # $instance
    answer = values(alice, "instance", nodes)
    assert answer.status_code == 200 and hers.node in answer.json()["data"]
    assert values(bob, "instance", nodes).status_code == 403
    # $cluster of both dashboards: the clusters' names, for everyone
    for session in (alice, bob):
        for match in ("slurm_up", "jobs_info"):
            answer = values(session, "cluster", match)
            assert answer.status_code == 200 and cluster in answer.json()["data"], match
    # $jobid (label_values(jobs_info{cluster="$cluster"}, jobid)): each user's own jobs
    picker = f'jobs_info{{cluster="{cluster}"}}'
    mine = values(alice, "jobid", picker)
    assert mine.status_code == 200, mine.text
    theirs = values(bob, "jobid", picker)
    assert theirs.status_code == 200, theirs.text
    alices, bobs = set(mine.json()["data"]), set(theirs.json()["data"])
    assert hers.job_id in alices and stack_jobs["idle"] in bobs  # idle: bob's
    assert not alices & bobs
    assert all(service.owner(job_id) == "alice" for job_id in alices)
    staff = signed_in(app_url, "staff")
    every = set(values(staff, "jobid", picker).json()["data"])
    assert alices | bobs <= every
