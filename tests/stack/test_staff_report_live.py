"""The staff report over the stack's jobs: each table's rows equal what this test
computes on its own from sacct (allocation lines, ElapsedRaw, AllocTRES) and per-job
Prometheus queries, over the same window."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from collections import defaultdict
from datetime import datetime

import pytest
import requests

from tests.helpers import stack
from webapp.thresholds import Thresholds

GIB, H = 1024**3, 3600.0
DAYS = 0.25
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def size(text: str) -> float | None:
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)", text)
    return float(m.group(1)) * UNITS.get(m.group(2), 1) if m else None


def cpu_time(text: str) -> float:
    days, _, rest = text.rpartition("-")
    parts = [float(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return (int(days) if days else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def sacct_jobs(since: int, until: int) -> dict[str, dict]:
    fmt = ("JobID,JobIDRaw,User,Partition,ElapsedRaw,TimelimitRaw,AllocCPUS,AllocTRES,"
           "TotalCPU,MaxRSS,Submit,Start,End,NTasks,NNodes")
    local = [datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")
             for t in (since, until + 1)]
    out = subprocess.run(
        ["sacct", "-a", "-P", "-n", "-o", fmt, "-S", local[0], "-E", local[1],
         "-s", "BF,CA,CD,DL,F,NF,OOM,PR,TO"], check=True, capture_output=True, text=True,
        env={**os.environ, "SLURM_TIME_FORMAT": "%s"}).stdout
    jobs: dict[str, dict] = {}
    for line in out.splitlines():
        p = line.split("|")
        if len(p) != 15:
            continue
        jid, step = p[0].partition(".")[0], "." in p[0]
        if not step:
            if not p[11].isdigit() or not p[12].isdigit() or not since <= int(p[12]) <= until:
                continue  # never started (cancelled while pending), or outside the window
            tres = dict(kv.split("=", 1) for kv in p[7].split(",") if "=" in kv)
            limit = float(p[5]) * 60 if p[5].isdigit() else None  # UNLIMITED
            jobs[jid] = {"raw": p[1], "user": p[2], "elapsed": float(p[4]),
                         "limit": limit, "cpus": int(p[6]),
                         "mem": size(tres.get("mem", "")), "gpus": int(tres.get("gres/gpu", 0)),
                         "cpu": cpu_time(p[8]), "rss": None, "nodes": int(p[14] or 1),
                         "wait": float(p[11]) - float(p[10]) if p[10].isdigit() else None}
        elif jid in jobs and (size(p[9]) or 0) > 0:
            # The report's peak: MaxRSS x the step's tasks per node, for the largest step
            # (a MaxRSS of 0, a step over before its first sample, is an unknown peak).
            per_node = math.ceil(int(p[13] or 1) / max(1, int(p[14] or 1)))
            jobs[jid]["rss"] = max(jobs[jid]["rss"] or 0.0, size(p[9]) * per_node)
    return jobs


def prom(query: str, t: float) -> list[dict]:
    r = requests.get("http://127.0.0.1:9090/api/v1/query", params={"query": query, "time": t},
                     timeout=30)
    return r.json()["data"]["result"]


@pytest.fixture(scope="module")
def both(stack_env, stack_jobs, tmp_path_factory):
    until = int(time.time()) - 5
    since = until - int(DAYS * 86400)
    base = stack.load_env()
    env = {**base, "JOBREPORT_OUTBOX": str(tmp_path_factory.mktemp("staff") / "o"),
           "JOBREPORT_STAFF_REPORT": "rows=100000",
           "JOBREPORT_THRESHOLDS": ",".join(filter(None, (
               base.get("JOBREPORT_THRESHOLDS"), "min_core_hours=0,min_gpu_hours=0")))}
    # sacct's window, held to sacct's own figures (the archive's path equals it:
    # tests/stack/test_staff_archive.py; the stack's archive may hold this window too).
    proc = stack.jobreport("staff-report", "--days", str(DAYS), "--until", str(until),
                           "--format", "json", "--from-sacct", env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["since"] == since and report["until"] == until
    assert report["source"] == "sacct"
    return report["tables"], sacct_jobs(since, until), since, until


def per_user(jobs, value) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for j in jobs.values():
        v = value(j)
        if v is not None:
            out[j["user"]] += v
    return {u: v for u, v in out.items() if v > 0}


def test_memory_and_time_unused_equal_sacct(both):
    tables, jobs, *_ = both
    assert len(jobs) > 10
    # Unused memory is each node's request less its own peak, summed over nodes (docs/
    # findings.md "Memory per node"); sacct gives one node's peak (MaxRSS), so: one-node
    # jobs exactly, and a job on several nodes between 0 and (request - busiest peak),
    # the other nodes' peaks unknown to sacct.
    def unused(j, nodes: str):  # noqa: ANN001, ANN202
        if j["rss"] is None or j["mem"] is None or (j["nodes"] == 1) != (nodes == "one"):
            return None
        return max(0.0, j["mem"] - j["rss"]) * j["elapsed"] / GIB / H
    one, several = per_user(jobs, lambda j: unused(j, "one")), per_user(
        jobs, lambda j: unused(j, "several"))
    got = {r["user"]: r["gib_hours_unused"] for r in tables["memory_unused"]["rows"]}
    assert set(one) <= set(got)
    for user, value in got.items():
        low, high = one.get(user, 0.0), one.get(user, 0.0) + several.get(user, 0.0)
        assert low * (1 - 1e-6) <= value <= high * (1 + 1e-6), (user, low, value, high)
    tu = per_user(jobs, lambda j: None if j["limit"] is None
                  else max(0.0, j["limit"] - j["elapsed"]) * j["cpus"] / H)
    got = {r["user"]: r["core_hours_unused"] for r in tables["time_unused"]["rows"]}
    assert got == pytest.approx(tu, rel=1e-6)


def test_low_efficiency_users_equal_sacct(both):
    tables, jobs, *_ = both
    core = per_user(jobs, lambda j: j["elapsed"] * j["cpus"])
    used = per_user(jobs, lambda j: j["cpu"])
    ranks = {u: i + 1 for i, u in enumerate(sorted(core, key=lambda u: (-core[u], u)))}
    rows = {r["user"]: r for r in tables["low_efficiency_users"]["rows"]}
    thresholds = Thresholds()  # the stack leaves both at their defaults
    eff = {u: used.get(u, 0.0) / c for u, c in core.items()}
    low = {u for u, e in eff.items() if e < thresholds.cpu_efficiency_low}
    assert low, f"the session's idle jobs leave no user below the threshold: {eff}"
    for user in low:
        assert rows[user]["rank_core_hours"] == ranks[user]
        assert rows[user]["core_hours"] == pytest.approx(core[user] / H, rel=1e-6)
        assert rows[user]["cpu_efficiency"] == pytest.approx(eff[user], abs=1e-3)
    # Every other row is there for its GPUs alone.
    for user in rows.keys() - low:
        assert rows[user]["cpu_efficiency"] == pytest.approx(eff.get(user, 0.0), abs=1e-3)
        assert rows[user]["gpu_efficiency"] < thresholds.low_efficiency_users_gpu_util, rows[user]


def test_longest_queued_equal_sacct_and_prometheus(both):
    tables, jobs, since, until = both
    rows = tables["longest_queued"]["rows"]
    assert {r["job"]: r["wait"] for r in rows} == {
        j: v["wait"] for j, v in jobs.items() if v["wait"] is not None}
    assert [r["wait"] for r in rows] == sorted((r["wait"] for r in rows), reverse=True)
    for r in rows[:3]:
        seen = prom(f'sum by (reason) (count_over_time(slurm_job_pending_info{{cluster="demo",'
                    f'jobid="{r["job"]}"}}[{until - since}s]))', until)
        assert set(r["reasons"].split(",")) - {""} == {s["metric"]["reason"] for s in seen}


def test_smaller_gpu_jobs_equal_prometheus(both):
    tables, jobs, since, until = both
    expected = set()
    for jid, j in jobs.items():
        if not j["gpus"]:
            continue
        q = f'jobid="{j["raw"]}"'
        util = prom(f"avg(avg_over_time(jobs_gpu_utilization_ratio{{{q}}}[{until - since}s]))",
                    until)
        used = prom(f"max(max_over_time(jobs_gpu_memory_used_bytes{{{q}}}[{until - since}s]))",
                    until)
        total = prom(f"max(max_over_time(jobs_gpu_memory_total_bytes{{{q}}}[{until - since}s]))",
                     until)
        if util and total and float(util[0]["value"][1]) < 0.3 and \
                float(used[0]["value"][1]) <= 0.5 * float(total[0]["value"][1]):
            expected.add(jid)
    assert expected  # the stack's GPU jobs: the replayed T4 sits idle
    assert {r["job"] for r in tables["smaller_gpu"]["rows"]} == expected


def test_gpu_fragmentation_rows_equal_sacct(both):
    tables, jobs, *_ = both
    spread = {j: v for j, v in jobs.items() if v["nodes"] >= 2 and 2 <= v["gpus"] <= v["nodes"]}
    assert spread  # the session's gpu-spread: one GPU on each of the two GPU nodes
    rows = {r["job"]: r for r in tables["gpu_fragmentation"]["rows"]}
    assert set(rows) == set(spread)
    for jid, j in spread.items():
        assert (rows[jid]["nodes"], rows[jid]["gpus"]) == (j["nodes"], j["gpus"])
        assert rows[jid]["gpu_hours"] == pytest.approx(j["elapsed"] * j["gpus"] / H, rel=1e-6)


def test_idle_node_rows_equal_sacct_and_prometheus(both):
    """Per node, the job's CPU seconds (its counters' last value in the window) over its
    elapsed time (sacct): under ``node_idle_cores`` it is idle."""
    tables, jobs, since, until = both
    cut, expected = Thresholds().node_idle_cores, {}
    for jid, j in jobs.items():
        if j["nodes"] < 2 or not j["elapsed"]:
            continue
        per_node = {r["metric"]["instance"]: float(r["value"][1]) for r in prom(
            f'sum by (instance) (max_over_time(jobs_cpu_seconds_total{{jobid="{j["raw"]}"}}'
            f"[{until - since}s]))", until)}
        idle = sorted(n for n, seconds in per_node.items() if seconds / j["elapsed"] < cut)
        if idle:
            expected[jid] = (",".join(idle), len(idle) * j["elapsed"] / H)
    assert expected  # the session's two-node-one-idle
    rows = {r["job"]: (r["idle_nodes"], r["node_hours_idle"])
            for r in tables["idle_nodes"]["rows"]}
    assert set(rows) == set(expected)
    for jid, (idle, hours) in expected.items():
        assert rows[jid][0] == idle and rows[jid][1] == pytest.approx(hours, rel=1e-6)
