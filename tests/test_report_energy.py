"""The job's energy in the report: kWh per node, the unused allocation's kWh beside the
waste, CO2e at a constant or a site's Prometheus series, in every renderer and the JSON."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from tests.helpers.reports import sample_report
from webapp.archive.record import report_from_record
from webapp.detectors import detect_all
from webapp.renderers import html as html_renderer
from webapp.renderers import json as json_renderer
from webapp.renderers import pdf as pdf_renderer
from webapp.renderers import text as text_renderer
from webapp.report.energy import Intensity, compute_energy, intensity_for, series_query
from webapp.report.waste import compute_waste
from webapp.settings import Settings, SettingsError
from webapp.sources.prometheus_bulk import Batch, JobWindow, by_job, split

KWH = 3.6e6


def energy_report(**changes):
    report = sample_report(**changes)
    usage = dataclasses.replace(
        report.usage, energy_joules=2 * KWH, energy_gpu_joules=1 * KWH,
        energy_other_joules=0.5 * KWH,
        energy_by_node=(("node01", 1.5 * KWH), ("node02", 0.5 * KWH)),
    )
    report = dataclasses.replace(report, usage=usage)
    return dataclasses.replace(report, waste=compute_waste(report, {}))


def test_energy_figures_and_carbon_at_a_constant():
    report = energy_report()
    energy = compute_energy(report, Intensity(370.0, "constant (JOBREPORT_CARBON_INTENSITY)"))
    assert energy.joules == 2 * KWH
    assert energy.co2e_grams == pytest.approx(740.0)
    # idle cores: the meter's share of the job's cores x the CPU time left unused
    assert energy.unused_cores_joules == pytest.approx(0.5 * KWH * (1 - report.cpu_efficiency))
    # idle GPUs: one busy at 85 %, one idle: the GPUs' joules x (1 - 0.425)
    assert energy.unused_gpus_joules == pytest.approx(1 * KWH * (1 - 0.425))


def test_no_energy_series_no_energy():
    assert compute_energy(sample_report(), Intensity(370.0, "constant")) is None


def test_carbon_from_a_site_series_mean_over_the_run():
    report = energy_report()
    asked = []

    def vector(query, at):
        asked.append((query, at))
        return [({}, 250.0)]

    intensity = intensity_for('promql:grid_carbon_intensity{zone="DE"}', report, vector)
    assert asked == [(series_query('grid_carbon_intensity{zone="DE"}', report.elapsed_seconds),
                      report.end_time.timestamp())]
    assert 'avg_over_time(grid_carbon_intensity{zone="DE"}[3600s])' in asked[0][0]
    energy = compute_energy(report, intensity)
    assert energy.co2e_grams == pytest.approx(500.0)
    assert "grid_carbon_intensity" in energy.intensity_source
    no_samples = intensity_for("promql:grid", report, lambda q, t: [])
    assert compute_energy(report, no_samples).co2e_grams is None


def test_reports_show_kwh_co2e_and_the_unused_allocations_energy():
    report = energy_report()
    report = dataclasses.replace(
        report, energy=compute_energy(report, Intensity(370.0, "constant")))
    line = "Energy: 2.0 kWh (node01 1.5 kWh, node02 0.5 kWh); 740 g CO2e at 370 g/kWh (constant)"
    text = " ".join(text_renderer.render(report).split())  # wrapped to 80 columns
    assert line in text  # a key figure
    unused = f"The unused allocation drew {report.energy.unused_joules / KWH:.2f} kWh"
    assert unused not in text  # the waste is a detail ...
    details = " ".join(text_renderer.render(report, details=True).split())
    assert unused in details  # ... beside it
    page = html_renderer.render(report)
    assert line in page and unused in page
    data = json.loads(json_renderer.render(report))
    assert data["energy"]["kwh"] == pytest.approx(2.0)
    assert data["energy"]["co2e_grams"] == pytest.approx(740.0)
    assert data["energy"]["carbon_intensity_g_per_kwh"] == 370.0
    assert data["energy"]["carbon_intensity_source"] == "constant"
    assert data["energy"]["by_node"] == [{"node": "node01", "joules": 1.5 * KWH, "kwh": 1.5},
                                         {"node": "node02", "joules": 0.5 * KWH, "kwh": 0.5}]
    assert data["usage"]["energy_joules"] == 2 * KWH


def test_report_without_energy_has_no_energy_line():
    text = text_renderer.render(sample_report())
    assert "kWh" not in text
    assert json.loads(json_renderer.render(sample_report()))["energy"] is None


def test_archived_report_keeps_the_energy_figures():
    report = energy_report()
    back = report_from_record(json_renderer.to_dict(report), {})
    assert back.usage.energy_joules == 2 * KWH
    assert back.usage.energy_other_joules == 0.5 * KWH
    assert back.usage.energy_by_node == (("node01", 1.5 * KWH), ("node02", 0.5 * KWH))


@pytest.mark.parametrize("value", ["-3", "lots", "promql:"])
def test_bad_carbon_intensity_names_the_variable(value):
    with pytest.raises(SettingsError, match="JOBREPORT_CARBON_INTENSITY"):
        Settings.from_env({"JOBREPORT_CARBON_INTENSITY": value, "JOBREPORT_CONFIG": ""})


@pytest.mark.needs("pdflatex")
def test_pdf_carries_the_energy_line(tmp_path):
    report = energy_report()
    report = dataclasses.replace(
        report, energy=compute_energy(report, Intensity(370.0, "constant")))
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_renderer.render(report))
    text = subprocess.run(["pdftotext", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout
    assert "740 g CO2e at 370 g/kWh" in " ".join(text.split())


def test_idle_gpu_finding_says_how_much_energy_it_drew():
    report = energy_report()
    labels = [s.label for s in report.usage.gpu_utilization]  # gpu0 busy, gpu1 idle
    usage = dataclasses.replace(report.usage, gpu_energy=((labels[0], 2.5e6), (labels[1], 1.44e6)))
    finding = next(f for f in detect_all(dataclasses.replace(report, usage=usage))
                   if f.name == "gpu_idle")
    assert finding.message.endswith("The idle GPU drew 0.4 kWh.")
    assert finding.evidence["idle_gpus_energy_joules"] == 1.44e6
    # Without energy series the finding says nothing of energy.
    plain = next(f for f in detect_all(report) if f.name == "gpu_idle")
    assert "kWh" not in plain.message


def test_an_idle_mig_devices_energy_is_said_to_be_an_estimate():
    """A MIG device's joules are its share of the card's (jobs_gpu_info power_share): the
    finding says so rather than "drew" as if measured."""
    from webapp.model import GpuDevice

    report = energy_report()
    labels = [s.label for s in report.usage.gpu_utilization]  # gpu0 busy, gpu1 idle
    devices = tuple(GpuDevice(label, "nvidia", "NVIDIA H100 80GB HBM3", "1g.10gb",
                              power_share="1/7") for label in labels)
    usage = dataclasses.replace(report.usage, gpu_devices=devices,
                                gpu_energy=((labels[0], 2.5e6), (labels[1], 1.44e6)))
    finding = next(f for f in detect_all(dataclasses.replace(report, usage=usage))
                   if f.name == "gpu_idle")
    assert finding.message.endswith("The idle GPU drew about 0.4 kWh (an estimate: 1/7 of its "
                                    "card's power, the card metering no MIG device or "
                                    "partition of its own).")
    assert finding.evidence["idle_gpus_energy_joules"] == 1.44e6


def test_bulk_usage_sums_a_jobs_energy_over_its_nodes():
    # The sync's bulk answer: per job and node, the sources' last joules already summed
    # (PEAK_QUERY with the figure's sum): the job's total there.
    job = JobWindow("77", 1000.0, 1100.0, ("n1", "n2"))
    batch = Batch(30.0, 1000.0, 1100.0, (job,))
    answer = [{"metric": {"jobid": "77", "instance": n}, "value": [1130, v]} for n, v in
              (("n1", "250"), ("n2", "50"),
               ("other", "999"))]  # another node's job of the same id: not ours
    usage = split(batch, {}, {"energy_joules": by_job(answer)}, [], "instance", 30.0)["77"]
    assert usage.energy_joules == 300.0
