"""One peak on the real stack: a `srun -n2` job whose tasks each hold 200 MiB states the
same peak in text, JSON, HTML and PDF, and its memory finding agrees; arrays are shown as
arrays and their tasks' metrics are found under the tasks' own ids."""

from __future__ import annotations

import json
import subprocess

import pytest

from webapp.formatting import format_bytes, format_percent
from webapp.model import PeakSource
from webapp.renderers import html, pdf, text
from webapp.renderers import json as json_renderer
from webapp.report.peak import sacct_peak

MIB = 2**20


def one_line(s: str) -> str:
    return " ".join(s.split())


@pytest.fixture(scope="module")
def multi_task(stack_jobs, service):
    return service.build(stack_jobs["multi-task"])


def test_two_tasks_peak_is_the_cgroups_not_one_tasks(multi_task, service):
    peak = multi_task.memory_peak
    assert peak.source == PeakSource.PROMETHEUS and (peak.node,) == multi_task.nodes
    # two tasks x 200 MiB (+ two Python interpreters), never one task's 200 MiB
    assert 400 * MIB <= peak.bytes <= 460 * MIB
    sacct = sacct_peak(service.sacct.job(multi_task.job_id))
    assert sacct.tasks == 2 and 200 * MIB <= sacct.per_task_bytes <= 230 * MIB
    assert abs(sacct.bytes - peak.bytes) <= 40 * MIB  # the estimate agrees with the cgroup
    assert multi_task.memory_efficiency == pytest.approx(peak.bytes / (4 * 1024 * MIB))


def test_one_peak_in_every_format_and_in_the_finding(multi_task, tmp_path):
    peak = multi_task.memory_peak_bytes
    shown = f"{format_bytes(peak)} of 4.0 GiB"
    pct = format_percent(multi_task.memory_efficiency)
    finding = next(f for f in multi_task.findings if f.name == "memory_over_requested")
    assert finding.evidence["memory_peak_bytes"] == peak
    assert f"at most {format_bytes(peak)} of the 4.0 GiB" in finding.message

    assert f"  {shown}" in text.render(multi_task)  # the memory gauge's detail
    data = json.loads(json_renderer.render(multi_task))
    assert data["memory_peak_bytes"] == data["memory_peak"]["bytes"] == peak
    assert data["memory_peak"]["source"] == "prometheus"
    assert next(f for f in data["findings"]
                if f["name"] == "memory_over_requested")["evidence"]["memory_peak_bytes"] == peak
    node = multi_task.nodes[0]
    assert (f"{shown} ({pct}) peak; largest anonymous + shared memory Prometheus sampled "
            f"on {node}") in one_line(html.render(multi_task))
    # the memory details' held figure of that node is the same number
    held = next(n.held_bytes for n in multi_task.memory_nodes if n.node == node)
    assert held == peak and data["memory_nodes"][0]["held_bytes"] == peak
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf.render(multi_task))
    pdf_text = one_line(subprocess.run(["pdftotext", str(path), "-"], check=True,
                                       capture_output=True, text=True).stdout)
    assert f"{shown} ({pct}) peak" in pdf_text
    assert f"at most {format_bytes(peak)} of the 4.0 GiB" in pdf_text


def test_array_is_shown_as_an_array_and_tasks_have_metrics(stack_jobs, service):
    array = stack_jobs["array"]
    report = service.build(array)
    assert report.array is not None and report.figures_from.startswith(f"{array}_")
    out = text.render(report)
    assert out.startswith(f"Array job {array} (4 tasks)")
    assert out.index("Array of 4 tasks") < out.index(f"task {report.figures_from}")
    # Every task's cgroup, hence its series, is named after the task's own raw id.
    for i in range(1, 5):
        task = service.build(f"{array}_{i}")
        assert task.usage.memory_rss, f"no metrics for {array}_{i}"
        assert text.render(task).startswith(f"Array task {array}_{i}")
