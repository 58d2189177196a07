"""History and right-sizing on real jobs: ten jobs of one name holding 50..500 MiB; the
#SBATCH block's numbers are the documented percentiles, computed here independently from
Prometheus and sacct."""

from __future__ import annotations

import math
import re
import subprocess

import pytest
import requests

from tests.helpers import stack


def p95(values: list[float]) -> float:
    """The 95th percentile by linear interpolation between closest ranks (numpy's default)."""
    v = sorted(values)
    pos = (len(v) - 1) * 0.95
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def peaks_and_elapsed(ids: list[str], env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Each job's peak by the documented rule (the largest RSS sample Prometheus holds for
    it, unless sacct's MaxRSS of one task is larger) and its elapsed seconds."""
    out = subprocess.run(["sacct", "-n", "-P", "-o", "JobID,ElapsedRaw,MaxRSS", "--units=K",
                          "-j", ",".join(ids)], capture_output=True, text=True, check=True).stdout
    elapsed, max_rss = {}, {}
    for line in out.splitlines():
        jid, secs, rss = line.split("|")
        job = jid.split(".")[0]
        if "." not in jid:
            elapsed[job] = float(secs)
        elif rss:
            max_rss[job] = max(max_rss.get(job, 0.0), float(rss.rstrip("K")) * 1024)
    query = (f'max by (jobid) (max_over_time(jobs_memory_rss_bytes{{jobid=~"{"|".join(ids)}"}}'
             '[1h]))')
    answer = requests.get(env["JOBREPORT_PROMETHEUS_URL"] + "/api/v1/query",
                          params={"query": query}, timeout=30).json()["data"]["result"]
    prom = {r["metric"]["jobid"]: float(r["value"][1]) for r in answer}
    peaks = [max(prom.get(j, 0.0), max_rss.get(j, 0.0)) for j in ids]
    return peaks, [elapsed[j] for j in ids]


@pytest.fixture(scope="module")
def history(stack_jobs, stack_env):
    ids = [stack_jobs[f"sizing-{mib}"] for mib in stack.SIZING_MIB]
    out = stack.jobreport("history", "--user", "alice", "--name", stack.SIZING_NAME,
                          "--since", "1d")
    assert out.returncode == 0, out.stderr
    return ids, out.stdout, stack_env


def test_history_lists_the_ten_jobs_with_their_peaks(history):
    ids, text, env = history
    listed = [line.split()[0] for line in text.splitlines() if line.split()[:1] and
              line.split()[0] in ids]
    assert sorted(listed) == sorted(ids)
    peaks, _ = peaks_and_elapsed(ids, env)
    for mib, peak in zip(stack.SIZING_MIB, peaks, strict=True):
        assert mib * 2**20 <= peak <= (mib + 40) * 2**20, (mib, peak)
    assert all(len(line) <= 80 for line in text.splitlines())


def test_sbatch_block_is_the_documented_percentiles(history):
    ids, text, env = history
    peaks, elapsed = peaks_and_elapsed(ids, env)
    block = dict(re.findall(r"^  #SBATCH (--[a-z-]+)=(\S+)$", text, re.M))
    # --mem: p95 of the peaks x 1.2, at least the largest, rounded up to 100M steps (under
    # ~1 GiB).
    mem = max(p95(peaks) * 1.2, max(peaks))
    assert mem < 1000 * 2**20
    assert block["--mem"] == f"{math.ceil(mem / (100 * 2**20))}00M"
    # --time: p95 of elapsed x 1.3, at least the longest, rounded up to 5 minutes (under
    # an hour).
    minutes = max(5, math.ceil(max(p95(elapsed) * 1.3, max(elapsed)) / 300) * 5)
    assert block["--time"] == f"00:{minutes:02d}:00"
    assert block["--cpus-per-task"] == "1" and "--gpus" not in block
    assert f"Next submission (from 10 jobs named '{stack.SIZING_NAME}' of alice" in text
    # Asked for 1G each: the saving in memory is stated, in GiB-hours as every figure.
    assert "GiB-hours of memory" in " ".join(text.split())


def test_single_report_shows_the_same_block(history, service):
    ids, text, _ = history
    report = service.build(ids[-1])
    assert report.sizing is not None and report.sizing.based_on == 10
    block = [line.strip() for line in text.splitlines() if line.startswith("  #SBATCH")]
    assert report.sizing.lines() == block
