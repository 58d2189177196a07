"""A report on nodes whose exporter replayed recorded readings says so: the combined GPU
request's ``replay`` figure read into ``Usage.replayed`` (literally, and through a real
Prometheus holding a real exporter's series), the note in the audit of every renderer,
and the figures that rest on a replay worded as no measurement."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobs_exporter import amdsmi_replay, nvml_replay
from jobs_exporter.powercap_replay import start_replay
from jobs_exporter.registry import JobsCollector
from tests.helpers.exporter_scrape import FIXTURES, make_settings
from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import backfill, start_prometheus, stop
from tests.helpers.reports import sample_report
from webapp.detectors.gpu_idle import IdleGpuDetector
from webapp.json_codec import decode, encode
from webapp.model import Energy, JobReport, Replay, Series
from webapp.renderers import html, pdf, text
from webapp.renderers import json as json_renderer
from webapp.renderers.presentation import energy_text
from webapp.report.coverage import audited
from webapp.sources.prometheus import PrometheusSource, parse_labelled
from webapp.sources.prometheus_answers import parse_replayed
from webapp.sources.prometheus_bulk import RANGE, BulkMetrics, JobWindow
from webapp.sources.prometheus_queries import FIGURE_LABEL
from webapp.thresholds import Thresholds

SCRAPE = 5
NVML = FIXTURES / "nvml" / "replay.json"
AMDSMI = FIXTURES / "amdsmi" / "replay.json"
TRACE = FIXTURES / "energy/rapl/icpe2024_broadwell-ep_compute_bdbda7c9_perf_first-second.txt"
NOTE = "Readings replayed, not measured: node01 (NVIDIA, recording replay.json)"


def replay_figure(payload: dict) -> list[tuple[dict[str, str], float]]:
    """The ``replay`` figure of a combined answer, as ``usage`` picks it out."""
    return [(m, v) for m, v in parse_labelled(payload) if m.get(FIGURE_LABEL) == "replay"]


def test_the_replay_figure_of_the_combined_answer_is_read_by_node_and_source():
    # /api/v1/query's answer to the GPU energy, faults and devices request (label order
    # and string values as Prometheus writes them): a GPU's identity beside the replays.
    payload = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"figure": "info", "gpu": "0", "instance": "gpu1:9306", "model": "Tesla T4",
                    "vendor": "nvidia"}, "value": [1764979200.5, "1"]},
        {"metric": {"figure": "replay", "instance": "gpu1:9306", "recording": TRACE.name,
                    "source": "powercap"}, "value": [1764979200.5, "1"]},
        {"metric": {"figure": "replay", "instance": "gpu1:9306", "recording": "replay.json",
                    "source": "nvml"}, "value": [1764979200.5, "1"]},
        {"metric": {"figure": "replay", "instance": "gpu3:9306", "source": "amdsmi"},
         "value": [1764979200.5, "1"]},
    ]}}
    assert parse_replayed(replay_figure(payload), "instance") == (
        Replay("gpu1:9306", "nvml", "replay.json"), Replay("gpu1:9306", "powercap", TRACE.name),
        Replay("gpu3:9306", "amdsmi", ""))
    assert parse_replayed([], "instance") == ()
    assert Replay("gpu3:9306", "amdsmi").described == "gpu3:9306 (AMD)"


# ---------------------------------------------------------------- through a real Prometheus


def exposition(tree: str, gpus: str = "off", **libraries) -> str:
    """One scrape of a real exporter on a captured job tree."""
    registry = CollectorRegistry()
    registry.register(JobsCollector(make_settings(FIXTURES / tree, gpus=gpus, scontrol=""),
                                    user_name=lambda uid: "alice", **libraries))
    return generate_latest(registry).decode()


def gauges(text: str, instance: str, t0: float) -> list[str]:
    """jobs_info and jobs_exporter_replay_info of an exposition as Prometheus would store
    them from ``instance``, scraped 24 times from ``t0``."""
    out = []
    for family in text_string_to_metric_families(text):
        if family.name not in ("jobs_info", "jobs_exporter_replay_info"):
            continue
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted({**s.labels,
                                                               "instance": instance}.items()))
            out += [f"{s.name}{{{labels}}} {s.value} {t0 + SCRAPE * i:.3f}" for i in range(24)]
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory) -> Iterator[tuple[str, float]]:
    """gpu1 replays NVML and RAPL and runs job 2 (v1-local); cpu2 measures and runs job 2
    too; gpu3 replays amdsmi and runs jobs 10 and 11 (v1-samples), not job 2."""
    tmp = tmp_path_factory.mktemp("replayed")
    t0 = float((int(time.time()) - 3600) // 60 * 60)
    powercap = start_replay(str(TRACE), str(FIXTURES / "energy/powercap"))
    try:
        gpu1 = exposition("v1-local", "auto", nvml=nvml_replay.load_replay(NVML),
                          replays=[powercap])
    finally:
        powercap.stop()
    gpu3 = exposition("v1-samples", "auto", amdsmi=amdsmi_replay.load_replay(AMDSMI))
    lines = [*gauges(gpu1, "gpu1:9306", t0), *gauges(exposition("v1-local"), "cpu2:9306", t0),
             *gauges(gpu3, "gpu3:9306", t0)]
    # OpenMetrics wants one block per family: the TYPE line once, its samples together.
    by_family: dict[str, list[str]] = {}
    for line in lines:
        if not line.startswith("#"):
            by_family.setdefault(line.split("{", 1)[0], []).append(line)
    body = [f"# TYPE {name} gauge\n" + "\n".join(samples) for name, samples in by_family.items()]
    (tmp / "replayed.om").write_text("\n".join(body) + "\n# EOF\n")
    backfill(tmp / "replayed.om", tmp / "data")
    port = free_port()
    proc = start_prometheus(tmp, tmp / "data", port=port)
    try:
        yield f"http://127.0.0.1:{port}", t0
    finally:
        stop(proc)


GPU1 = (Replay("gpu1:9306", "nvml", "replay.json"), Replay("gpu1:9306", "powercap", TRACE.name))


@pytest.mark.parametrize("nodes", [("gpu1", "cpu2"), ()])
def test_the_jobs_nodes_replays_and_no_others(prom, nodes):
    url, t0 = prom
    source = PrometheusSource(url, scrape_interval=SCRAPE)
    start = datetime.fromtimestamp(t0, UTC)
    end = datetime.fromtimestamp(t0 + SCRAPE * 22, UTC)
    usage = source.usage("2", start, end, nodes)
    # gpu3 replays too but never ran job 2; cpu2 ran it and measured: neither is named.
    assert usage.replayed == GPU1
    assert any("replays" in name for name, _ in usage.queries)
    assert source.usage("999", start, end, nodes).replayed == ()  # a job Prometheus lacks


def test_the_bulk_read_names_the_same_replays(prom):
    url, t0 = prom
    bulk = BulkMetrics(PrometheusSource(url, scrape_interval=SCRAPE))
    end = t0 + SCRAPE * 22
    usage = bulk.fetch([JobWindow("2", t0, end, ("gpu1", "cpu2")),
                        JobWindow("10", t0, end, ("gpu3",)),
                        # on gpu1 by its accounting, but never scraped there (it ended
                        # within a second): no reading of its was replayed, as alone
                        JobWindow("999", t0, end, ("gpu1",))])
    assert usage["2"].replayed == GPU1
    assert usage["10"].replayed == (Replay("gpu3:9306", "amdsmi", "replay.json"),)
    assert usage["999"].replayed == ()
    # no request of their own: the window's range queries, one-number figures, per-core
    # value and time, the GPUs' energy, faults, identities and replays, the coverage's two
    assert bulk.requests == len(RANGE) + 1 + 2 + 1 + 2


# ---------------------------------------------------------------- what the report says


def replayed_report(*replays: Replay, **changes) -> JobReport:
    """The sample job audited, its node01 GPU series labelled ``node01/<gpu>``: GPU 1
    idle, drawing 0.33 kWh."""
    report = sample_report(**changes)
    usage = dataclasses.replace(
        report.usage, replayed=replays,
        gpu_utilization=tuple(Series(f"node01/{i}", s.points)
                              for i, s in enumerate(report.usage.gpu_utilization)),
        gpu_energy=(("node01/0", 4.8e6), ("node01/1", 1.2e6)))
    return audited(dataclasses.replace(report, usage=usage), Thresholds(), 0.8)


def test_every_renderer_shows_the_replay_in_its_audit(tmp_path):
    report = replayed_report(Replay("node01", "nvml", "replay.json"))
    out = " ".join(text.render(report, details=True, audit=True).split())
    audit = out.split(" Audit Checks ", 1)[1]  # the audit section's rows
    assert "Readings replayed not measured: node01 (NVIDIA, recording replay.json)" in audit
    section = html.render(report).split('<section id="audit">', 1)[1]
    assert ('<th scope="row">Readings replayed</th><td>not measured: node01 (NVIDIA, '
            'recording replay.json)</td>') in section
    data = json.loads(json_renderer.render(report))
    assert data["usage"]["replayed"] == [
        {"node": "node01", "source": "nvml", "recording": "replay.json"}]
    assert data["coverage"]["replay_note"] == NOTE  # the JSON's audit
    tex = " ".join(pdf.build_document(report, str(tmp_path)).dumps().split())
    assert "Readings replayed" in tex and "recording replay.json" in tex
    back = decode(encode(report))  # the archive keeps it
    assert back.usage.replayed == report.usage.replayed


def test_a_measured_report_has_neither():
    report = replayed_report()
    assert "replayed" not in text.render(report, details=True, audit=True)
    assert "Readings replayed" not in html.render(report)
    data = json.loads(json_renderer.render(report))
    assert data["usage"]["replayed"] == [] and data["coverage"]["replay_note"] is None


def idle_message(report: JobReport) -> str:
    (finding,) = IdleGpuDetector().detect(report, Thresholds())
    return finding.message


def test_the_idle_gpus_energy_is_not_called_measured_when_replayed():
    measured = idle_message(replayed_report())
    assert measured.endswith("The idle GPU drew 0.33 kWh.")
    replayed = idle_message(replayed_report(Replay("node01", "nvml", "replay.json")))
    assert replayed.endswith("The idle GPU drew 0.33 kWh (replayed from replay.json, "
                             "not measured).")
    # A replay elsewhere, or of the node's RAPL zones only, leaves the GPU's reading as read.
    assert idle_message(replayed_report(Replay("node02", "nvml", "replay.json"),
                                        Replay("node01", "powercap", "t.txt"))) == measured


def test_the_energy_line_says_it_rests_on_a_replay():
    energy = Energy(7.2e6, (("node01", 5.4e6), ("node02", 1.8e6)), None, None, None, "", None)
    plain = energy_text(replayed_report(energy=energy))
    assert "replayed" not in plain
    rapl = replayed_report(Replay("node02", "powercap", "t.txt"), energy=energy)
    assert energy_text(rapl) == plain + " from replayed readings, not measured (see the audit)"
    # A GPU replay matters only to a job holding GPUs.
    no_gpus = replayed_report(Replay("node01", "nvml", "replay.json"), energy=energy, gpus=0)
    assert energy_text(no_gpus) == plain
