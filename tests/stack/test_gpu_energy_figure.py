"""One fact, one figure: the demo's idle GPU's energy is the same number wherever the
JSON report shows it (the idle-GPU finding, the unused energy, the job's GPU joules and
the card's own line), and the text shows it in one rounding."""

from __future__ import annotations

import pytest

from webapp.formatting import format_energy
from webapp.renderers import text
from webapp.renderers.json import to_dict


def test_the_idle_gpus_energy_is_one_value_wherever_it_appears(stack_jobs, service):
    report = service.build(stack_jobs["gpu-untouched"])
    data = to_dict(report)
    (finding,) = [f for f in data["findings"] if f["name"] == "gpu_idle"]
    shown = {
        "finding": finding["evidence"]["idle_gpus_energy_joules"],
        "unused": data["energy"]["unused_gpus_joules"],
        "job's gpu joules": data["usage"]["energy_gpu_joules"],
        **{f"card {label}": joules for label, joules in data["usage"]["gpu_energy"]},
    }
    assert len(shown) == 4 and shown["finding"] > 0, shown
    assert all(v == pytest.approx(shown["finding"], rel=1e-9) for v in shown.values()), shown
    out = text.render(report, details=True)
    assert f"drew {format_energy(shown['finding'])}" in out
