"""The text report names each efficiency in full and stays within 80 columns; the sizing
block appears in text and JSON when the report has one."""

from __future__ import annotations

import json
import re

from tests.helpers.reports import sample_report
from webapp.model import SizingSuggestion
from webapp.renderers import json as json_renderer
from webapp.renderers import text

SIZING = SizingSuggestion((("--mem", "4G"), ("--time", "01:30:00"), ("--cpus-per-task", "2"),
                           ("--gpus", "1")), 12, ("31.50 GiB-hours of memory",),
                          "jobs named 'train-model' of alice since 2026-10-24")


def _label_lines(out: str, label: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"  {label} ")]


def test_efficiency_lines_are_named_in_full():
    out = text.render(sample_report())
    assert len(_label_lines(out, "CPU efficiency")) == 1
    assert len(_label_lines(out, "Memory efficiency")) == 1
    gpus = _label_lines(out, "GPU utilisation")  # one key figure; each GPU in --details
    assert len(gpus) == 1 and gpus[0].endswith("mean of the 2 GPUs") and "42%" in gpus[0]
    assert "gpu0" in text.render(sample_report(), details=True)
    # The old bare labels ("CPU", "Memory", "GPU gpu0" before a bar) are gone.
    assert not re.search(r"^  (CPU|Memory|GPU gpu\d) +\[", out, re.M)
    assert all(len(line) <= 80 for line in out.splitlines())


def test_sizing_block_in_text_and_json():
    report = sample_report(sizing=SIZING)
    out = text.render(report)
    assert "\n  #SBATCH --mem=4G\n  #SBATCH --time=01:30:00\n" in out
    assert "Next submission (from 12 jobs named 'train-model' of alice" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    data = json.loads(json_renderer.render(report))
    assert data["sizing"]["lines"][0] == "#SBATCH --mem=4G"
    assert data["sizing"]["based_on"] == 12 and data["sizing"]["options"][3] == ["--gpus", "1"]
    assert json.loads(json_renderer.render(sample_report()))["sizing"] is None


def test_text_prints_the_pages_block_lines_wrapped_only():
    from webapp.renderers.presentation import sizing_lines

    hostile = SizingSuggestion((("--job-name", "a\nb\rc"), ("--mem", "4G")), 3)
    out = text.render(sample_report(sizing=hostile))
    assert sizing_lines(hostile) == ["#SBATCH --job-name=a\\nb\\rc", "#SBATCH --mem=4G"]
    assert "\n  #SBATCH --job-name=a\\nb\\rc\n  #SBATCH --mem=4G\n" in out
