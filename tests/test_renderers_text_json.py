"""The text and JSON renderers: 80 columns, hostile names inert, the documented schema."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from tests.helpers.reports import HEADER_PAYLOAD, gap_report, sample_report
from webapp.renderers import html, text
from webapp.renderers import json as json_renderer
from webapp.renderers.presentation import summary_rows

README = Path(__file__).resolve().parent.parent / "docs" / "json-schema.md"


def _multi_node():
    report = sample_report()
    return dataclasses.replace(report, nodes=tuple(f"node{i:02d}" for i in range(1, 9)))


def test_text_fits_80_columns_even_with_many_nodes():
    out = text.render(_multi_node())
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "node01" in out and "+" in out and "more" in out


def test_text_drops_control_characters_from_slurm_text():
    out = text.render(dataclasses.replace(sample_report(), job_name=HEADER_PAYLOAD + "\x1b[2J"))
    assert "\r" not in out and "\x1b" not in out


def test_text_names_every_gap():
    report = gap_report()
    out = " ".join(text.render(report).split())
    assert report.gaps and all(g.reason in out for g in report.gaps)
    assert "Metrics unavailable (Prometheus)" in out


def test_the_qos_is_shown_beside_the_partition_only_when_known():
    # the job's facts (the page's and the PDF's details); the text shows no partition
    known = dataclasses.replace(sample_report(), qos="long")
    assert ("Partition", "gpu (QoS long)") in summary_rows(known)
    assert '<th scope="row">Partition</th><td>gpu (QoS long)</td>' in html.render(known)
    assert ("Partition", "gpu") in summary_rows(sample_report())
    assert "QoS" not in html.render(sample_report())
    alone = dataclasses.replace(known, partition=None)
    assert ("Partition", "QoS long") in summary_rows(alone)


def _documented_fields() -> set[str]:
    section = README.read_text().split("## JSON schema", 1)[1].split("\n## ", 1)[0]
    names = set()
    for row in re.findall(r"^\| ([^|]+) \|", section, flags=re.M):
        names |= set(re.findall(r"`(\w+)`", row))
    return names


def test_json_top_level_fields_are_the_documented_ones():
    data = json.loads(json_renderer.render(sample_report()))
    assert set(data) - {"schema_version"} <= _documented_fields()
    for required in ("job_id", "cluster", "user", "account", "state", "elapsed_seconds", "cpus",
                     "cpu_efficiency", "memory_peak_bytes", "memory_requested_bytes", "gpus",
                     "findings", "gaps"):
        assert required in data


def test_json_types_and_units():
    data = json.loads(json_renderer.render(sample_report()))
    assert data["schema_version"] == json_renderer.SCHEMA_VERSION == 1
    assert isinstance(data["job_id"], str) and isinstance(data["cpus"], int)
    assert 0 <= data["cpu_efficiency"] <= 1
    assert isinstance(data["memory_peak_bytes"], int)
    assert data["findings"] and all(
        set(f) == {"name", "severity", "message", "advice", "evidence", "evidence_text"}
        for f in data["findings"])
    assert {f["severity"] for f in data["findings"]} <= {"info", "warning", "critical"}
    assert data["start_time"].endswith("+00:00")  # ISO 8601, UTC
    for series in data["series"].values():
        for s in series:
            assert set(s) == {"label", "points"}
            assert all(len(p) == 2 for p in s["points"])


def test_json_gaps_are_listed():
    data = json.loads(json_renderer.render(gap_report()))
    assert data["gaps"] and set(data["gaps"][0]) == {"source", "reason"}


def test_json_is_compact_by_default_and_indented_when_pretty():
    compact, pretty = json_renderer.render(sample_report()), json_renderer.render(
        sample_report(), pretty=True)
    assert compact.count("\n") == 1 and '", "' not in compact and '": ' not in compact
    assert pretty.startswith('{\n  "schema_version": 1,')
    assert json.loads(compact) == json.loads(pretty)  # every key, the same values
    assert len(compact) < len(pretty)
