"""Long-term storage: Prometheus remote_write into VictoriaMetrics gives the same report.

A Prometheus of the test's own scrapes the stack's exporters and remote-writes every
sample to a VictoriaMetrics of its own; a real job runs; its JSON report built with
JOBREPORT_PROMETHEUS_URL pointed at either, once both hold every sample of the job, gives
the same numbers within 1 %."""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.helpers import stack
from tests.helpers.longterm import prometheus_with_victoriametrics
from tests.helpers.sync import known
from tests.helpers.wait import wait_for
from webapp.renderers import json as json_renderer
from webapp.report.service import ReportService
from webapp.settings import Settings

pytestmark = pytest.mark.stack

JOB = stack.StackJob(
    "long-term", "alice", ("-c2", "--mem=600M", "--time=5"),
    "python3 -c 'b = bytearray(200 * 2**20)\nimport time\nt = time.time()\n"
    "while time.time() < t + 60: pass'")
# Rates (CPU, I/O) legitimately differ point by point: Prometheus extrapolates from the
# first and last samples inside the window, VictoriaMetrics takes the slope from the last
# sample before it (both documented), so each point, and a mean over a few points, weighs
# a different span of scrapes; a busy loop sharing the CPUs with other work changes its
# rate from one scrape to the next and the two answers move apart (measured under load:
# means of 0.422 and 0.415 cores for a 2-CPU job; beside two more busy loops 0.558 and
# 0.536; in a CI run beside the VM clusters 0.649 and 0.691 of 2 cores, 2.1 %). A rate
# series is therefore held to its mean over the points whose window lies inside the job's
# samples, within 4 % of its full scale (the job's CPUs; for I/O its
# peak); everything else within 1 % of its value, on samples both stores hold
# identically (checked first).
RATE_SERIES = ("cpu_cores", "io_read_bytes_per_second", "io_write_bytes_per_second")
RATE_WINDOW = 20.0  # webapp.sources.prometheus.rate_window at 5 s scrapes
RATE_SCALE_SHARE = 0.04


def report(env: dict[str, str], url: str) -> dict:
    settings = Settings.from_env({**known(env), "JOBREPORT_PROMETHEUS_URL": url})
    return json.loads(json_renderer.render(ReportService(settings).build(
        JOB_ID[0], archive_fallback=False)))


JOB_ID: list[str] = []


def close(a, b, path: str, out: list[str], last_sample: float, cpus: float = 1.0) -> None:
    """Every number within 1 %, gauge series point by point, rate series by their mean
    within 4 % of full scale (see RATE_SERIES), every other value equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}", out, last_sample, cpus)
    elif path.startswith(".series.") and isinstance(a, list):
        assert [s["label"] for s in a] == [s["label"] for s in b], path
        for sa, sb in zip(a, b, strict=True):
            pa, pb = dict(sa["points"]), dict(sb["points"])
            assert pa.keys() == pb.keys(), f"{path}[{sa['label']}] instants"
            where = f"{path}[{sa['label']}]"
            name = path.rsplit(".", 1)[1]
            if name in RATE_SERIES:
                first = min(pa, default=0.0)
                inside = [t for t in pa if first + RATE_WINDOW <= t <= last_sample]
                assert len(inside) >= 6 or not pa, f"{where}: {len(inside)} points inside"
                scale = cpus if name == "cpu_cores" else max(
                    [abs(v) for v in (*pa.values(), *pb.values())], default=0.0)
                if inside:
                    mean_a = sum(pa[t] for t in inside) / len(inside)
                    mean_b = sum(pb[t] for t in inside) / len(inside)
                    if abs(mean_a - mean_b) > RATE_SCALE_SHARE * scale:
                        out.append(f"{where} mean: {mean_a} vs {mean_b} (full scale {scale})")
            else:
                for t in sorted(pa):
                    close(pa[t], pb[t], f"{where}@{t:.0f}", out, last_sample)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]", out, last_sample, cpus)
    elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        if a != pytest.approx(b, rel=0.01, abs=1e-9):
            out.append(f"{path}: {a} vs {b}")
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


def raw_samples(url: str, job_id: str) -> dict[tuple, list[tuple[float, float]]]:
    """Every stored sample of the job's series (a range selector returns them unchanged).
    VictoriaMetrics also lists the staleness markers Prometheus wrote after a series'
    last scrape (as NaN), which Prometheus itself leaves out: so are they here."""
    answer = requests.get(f"{url}/api/v1/query", timeout=10,
                          params={"query": f'{{jobid="{job_id}"}}[15m]'}).json()
    assert answer["status"] == "success", answer
    return {tuple(sorted(r["metric"].items())): [(float(t), float(v)) for t, v in r["values"]
                                                 if v != "NaN"]
            for r in answer["data"]["result"]}


def same_samples(a: dict, b: dict) -> bool:
    """The same series with the same timestamps; values equal to VictoriaMetrics' storage
    precision (12 significant digits)."""
    return a.keys() == b.keys() and all(
        [t for t, _ in a[k]] == [t for t, _ in b[k]]
        and all(x == pytest.approx(y, rel=1e-9) for (_, x), (_, y) in zip(a[k], b[k],
                                                                          strict=True))
        for k in a)


def wait_until_both_hold_the_job(prom: str, vm: str, job_id: str) -> float:
    """Wait until Prometheus has the job's last scrape (its series stopped growing) and
    VictoriaMetrics holds exactly the same samples; the time of the last sample."""
    before: list[dict] = [{}]

    def both_hold() -> float | None:
        held = raw_samples(prom, job_id)
        # Still growing, or a new scrape may yet come (5 s scrapes, read late under load)?
        settled = held and held == before[0] and all(
            v[-1][0] < time.time() - 12 for v in held.values())
        before[0] = held
        if settled and same_samples(held, raw_samples(vm, job_id)):
            return max(v[-1][0] for v in held.values())
        return None

    time.sleep(2)  # the first look compares with a reading 2 s before it, as every later one
    return wait_for(both_hold, 120, "VictoriaMetrics holding the job's samples", every=2)


def test_victoriametrics_gives_the_same_report(stack_env, tmp_path):
    with prometheus_with_victoriametrics(tmp_path) as (prom, vm):
        stack.wait_for_scrape_after(prom, time.time())  # the exporters scraped before the job
        JOB_ID[:] = [stack.submit(JOB)]
        stack.wait_until_done(JOB_ID, timeout=1200)  # behind other suites on a shared node
        # Both stores hold every sample of the job (scraped every 5 s, remote-written in
        # 1 s batches, queryable): the reports then read the same data at the same steps.
        last_sample = wait_until_both_hold_the_job(prom, vm, JOB_ID[0])
        from_prometheus, from_vm = report(stack_env, prom), report(stack_env, vm)
    assert from_prometheus["usage"]["memory_max_usage_bytes"]  # the job was seen
    # A minute of 5 s points: most compared point by point, past the first rate window.
    # (12 scrapes; two missed on a loaded node still leave 10.)
    assert len(from_prometheus["series"]["cpu_cores"][0]["points"]) >= 10
    # (A job that started at once has no queue context in either: the same gap.)
    assert not [g for g in from_prometheus["gaps"] + from_vm["gaps"]
                if g["source"] == "prometheus"]
    differences: list[str] = []
    assert from_prometheus["cpus"] == 2
    close(from_prometheus, from_vm, "", differences, last_sample, from_prometheus["cpus"])
    assert differences == []
