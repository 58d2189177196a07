"""The recorded AMD GPU readings the exporter tests replay (see jobs_exporter/amdsmi_replay.py)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

from jobs_exporter.amdsmi_replay import ReplayAmdSmi

ROOT = pathlib.Path(__file__).resolve().parents[2]
AMDSMI = ROOT / "fixtures" / "exporter" / "amdsmi"


def replay_devices(name: str = "replay.json") -> list[dict]:
    return json.loads((AMDSMI / name).read_text())["devices"]


class FakeAmdSmi(ReplayAmdSmi):
    """ReplayAmdSmi defaulting to the MI300X node's devices and a still clock (energy
    counters stay at 0 J, so goldens do not vary)."""

    def __init__(
        self,
        devices: list[dict] | None = None,
        driver: bool = True,
        clock: Callable[[], float] = lambda: 0.0,
    ):
        if devices is None:
            self.recording = "replay.json"  # what jobs_exporter_replay_info names
        super().__init__(replay_devices() if devices is None else devices, driver, clock)
