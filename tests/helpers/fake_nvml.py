"""The recorded NVML readings the exporter tests replay (see jobs_exporter/nvml_replay.py)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable

from jobs_exporter.nvml_replay import ReplayNvml

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPLAY = ROOT / "fixtures" / "exporter" / "nvml" / "replay.json"


class FakeNvml(ReplayNvml):
    """ReplayNvml defaulting to the fixture's devices."""

    def __init__(
        self,
        devices: list[dict] | None = None,
        driver: bool = True,
        clock: Callable[[], float] = lambda: 0.0,
    ):
        # A still clock by default: energy counters stay at 0 J, so goldens do not vary.
        if devices is None:
            devices = json.loads(REPLAY.read_text())["devices"]
            self.recording = REPLAY.name  # what jobs_exporter_replay_info names
        super().__init__(devices, driver, clock)
