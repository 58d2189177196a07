"""Steps, billing units and coverage on real jobs of the stack (issue 14, items 1, 6, 7).

- ``steps``: a real two-step job; every format lists each step with seff's figures, which
  equal sacct's own per-step lines, and the CPU finding names the step responsible.
- billing: the JSON waste figures against an independent computation from the accounting
  database itself (job_table's ``tres_alloc`` billing TRES, step_table's CPU seconds).
- ``coverage-half``: the shared exporter must not be stopped, so half of the job's run is
  removed from the real Prometheus with its admin API (``delete_series``, matched on this
  job's ``jobid`` only: no other test reads that job). Its samples then cover ~50 % of the
  run. The CPU verdict from sacct (complete whatever Prometheus holds) still stands; built
  without sacct, the verdict would rest on the Prometheus CPU rate, so it is withheld.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pymysql
import pytest
import requests

from tests.helpers.stack import jobreport
from tests.helpers.wait import wait_for
from webapp.renderers import html, text
from webapp.renderers import json as json_renderer
from webapp.report.service import ReportService
from webapp.sources.sacct_values import parse_sacct_duration


def _sacct_steps(job_id: str) -> dict[str, tuple[float, float, int, str]]:
    """step -> (elapsed, TotalCPU, AllocCPUS, State) as sacct prints them."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id, "--format=JobID,Elapsed,TotalCPU,AllocCPUS,State"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    steps = {}
    for line in out:
        jid, elapsed, cpu, cpus, state = line.split("|")
        if "." in jid:
            steps[jid.split(".", 1)[1]] = (parse_sacct_duration(elapsed) or 0.0,
                                           parse_sacct_duration(cpu) or 0.0, int(cpus), state)
    return steps


def test_each_step_has_its_own_line_in_every_format(stack_jobs, stack_env):
    job = stack_jobs["steps"]
    expected = _sacct_steps(job)
    assert {"0", "1"} <= set(expected)
    data = json.loads(jobreport("show", job, "--format", "json", env=stack_env).stdout)
    lines = {x["step_id"]: x for x in data["step_lines"]}
    assert set(lines) == set(expected) - {"extern"}
    for step, (elapsed, cpu, cpus, state) in expected.items():
        if step == "extern":
            continue
        x = lines[step]
        assert x["cpus"] == cpus and x["state"] == state.split()[0]
        assert x["cpu_efficiency"] == pytest.approx(cpu / (elapsed * cpus), abs=0.01)
    # Step 0 asked for 2 cores for 20 s and kept one busy for 2 s: most of the idle
    # core-seconds are its.
    finding = next((f for f in data["findings"] if f["name"] == "cpu_efficiency_low"),
                   None)
    assert finding is not None, data["findings"]
    assert finding["evidence"]["step"] == "0" and "step 0" in finding["message"]
    out = jobreport("show", job, "--details", env=stack_env).stdout
    assert "Steps" in out and any(line.startswith("  0 ") for line in out.splitlines())
    page = jobreport("show", job, "--format", "html", env=stack_env).stdout
    assert '<section id="steps">' in page and "<td>0</td>" in page and "<td>1</td>" in page


def _accounting_row(cluster: str, job_id: str) -> tuple[str, int, int, float]:
    """(tres_alloc, start, end, CPU seconds of its steps) straight from slurm_acct_db: the
    newest job of the id (ids repeat after a controller reset), as the report picks it."""
    assert re.fullmatch(r"[a-z0-9_]+", cluster)  # table names cannot be bound parameters
    jobs, steps = f"{cluster}_job_table", f"{cluster}_step_table"
    conn = pymysql.connect(unix_socket="/run/mysqld/mysqld.sock", user="root",
                           database="slurm_acct_db")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT job_db_inx, tres_alloc, time_start, time_end FROM `{jobs}` "  # noqa: S608 - checked name
                        "WHERE id_job = %s ORDER BY time_submit DESC LIMIT 1", (int(job_id),))
            inx, tres, start, end = cur.fetchone()
            cur.execute("SELECT SUM(user_sec + user_usec / 1e6 + sys_sec + sys_usec / 1e6) "  # noqa: S608 - checked name
                        f"FROM `{steps}` WHERE job_db_inx = %s", (inx,))
            (cpu,) = cur.fetchone()
    finally:
        conn.close()
    return tres, int(start), int(end), float(cpu)


@pytest.mark.parametrize("name", ["steps", "idle"])
def test_billing_units_match_the_accounting_db(stack_jobs, stack_env, name):
    job = stack_jobs[name]
    tres, start, end, cpu_seconds = _accounting_row(stack_env["JOBREPORT_CLUSTER"], job)
    alloc = dict(item.split("=") for item in tres.split(","))
    billing, cpus = float(alloc["5"]), int(alloc["1"])  # tres ids: 5 billing, 1 cpu
    # No TRESBillingWeights on the stack's partition: billing counts CPUs, one core-hour
    # costs billing / cpus units.
    unused_core_hours = (cpus * (end - start) - cpu_seconds) / 3600
    expected = unused_core_hours * billing / cpus
    data = json.loads(jobreport("show", job, "--format", "json", env=stack_env).stdout)
    assert data["billing"] == billing
    cpu = next(i for i in data["waste"]["items"] if i["resource"] == "cpu")
    # Elapsed (sacct) and the DB's start/end may differ by a second; CPU by milliseconds.
    assert cpu["billing_units"] == pytest.approx(expected, abs=billing / 3600 + 1e-4)
    assert data["waste"]["total_billing_units"] >= cpu["billing_units"]


def _delete_first_half(prometheus: str, job_id: str, start: float, end: float) -> None:
    """The job's samples of [start, middle] deleted from the real Prometheus (this jobid only)."""
    middle = start + (end - start) / 2
    resp = requests.post(f"{prometheus}/api/v1/admin/tsdb/delete_series",
                         params={"match[]": f'{{jobid="{job_id}"}}', "start": start - 10,
                                 "end": middle}, timeout=30)
    assert resp.status_code == 204, resp.text


def _samples_until(prometheus: str, job_id: str, start: float, t: float) -> list:
    """The job's series (this jobid only) holding samples of [start - 10, t]."""
    resp = requests.get(f"{prometheus}/api/v1/query", timeout=30, params={
        "query": f'{{jobid="{job_id}"}}[{int(t - start) + 10}s]', "time": t})
    return resp.json()["data"]["result"]


@pytest.fixture(scope="module")
def half_covered(stack_jobs, settings):
    job = stack_jobs["coverage-half"]
    service = ReportService(settings)
    before = service.build(job)
    assert before.coverage.node_fraction > 0.8
    start, end = before.start_time.timestamp(), before.end_time.timestamp()
    _delete_first_half(settings.prometheus_url, before.metrics_id, start, end)
    wait_for(lambda: not _samples_until(settings.prometheus_url, before.metrics_id, start,
                                        start + (end - start) / 2), 30,
             f"Prometheus without job {job}'s deleted samples", every=0.5)
    return job


def test_half_a_run_without_samples_shows_half_coverage(half_covered, settings):
    report = ReportService(settings).build(half_covered)
    (node,) = report.coverage.nodes
    # Each sample covers one scrape interval: half of a 30 s run reads 0.5 +- one scrape.
    assert 0.5 - 0.17 <= node.fraction <= 0.5 + 0.17, node
    assert node.interval_seconds == pytest.approx(settings.scrape_interval, abs=1)
    assert node.gaps and node.gaps[0][0] == pytest.approx(report.start_time.timestamp(), abs=1)
    # sacct's TotalCPU does not depend on the samples: the CPU verdict stands, and says so.
    verdict = {v.detector: v for v in report.audit.verdicts}["cpu_efficiency_low"]
    assert not verdict.withheld and verdict.rests_on.startswith("sacct")
    assert "cpu_efficiency_low" in {f.name for f in report.findings}


def test_cpu_verdict_on_half_coverage_is_withheld(half_covered, settings):
    no_sacct = ReportService(dataclasses.replace(settings, sacct="/nonexistent/sacct"))
    report = no_sacct.build(half_covered)
    assert str(report.cpu_source) == "prometheus"
    verdict = {v.detector: v for v in report.audit.verdicts}["cpu_efficiency_low"]
    assert verdict.withheld and "samples cover too little" in verdict.why
    assert "cpu_efficiency_low" not in {f.name for f in report.findings}
    out = text.render(report)
    assert "Verdicts withheld, samples cover too little" in out and "cpu_efficiency_low" in out
    data = json.loads(json_renderer.render(report))
    assert data["coverage"]["nodes"][0]["fraction"] < settings.min_coverage
    assert any(q["name"] == "coverage_nodes" for q in data["coverage"]["queries"])
    assert "withheld: samples cover too little" in html.render(report)
