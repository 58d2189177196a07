"""Power and energy sensors of the hwmon sysfs class (/sys/class/hwmon/hwmon*).

Per the kernel's hwmon ABI, ``energy<N>_input`` is a counter in microjoules and
``power<N>_input`` / ``power<N>_average`` an instantaneous or averaged reading in
microwatts; ``name`` names the chip. Only the ACPI power meter (chip ``power_meter``)
measures the whole node, so only it serves as the node's meter; other chips' sensors
(a GPU board, a voltage regulator) are parts of the node and only reported.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_SENSOR = re.compile(r"^(energy\d+_input|power\d+_(input|average))$")
NODE_METER_CHIP = "power_meter"


@dataclass(frozen=True)
class Sensor:
    path: str  # the sensor file
    chip: str  # the chip's name file, e.g. "power_meter"
    sensor: str  # e.g. "power1"
    kind: str  # "energy" (counter, microjoules) or "power" (microwatts)


def discover_sensors(root: str) -> list[Sensor]:
    """Readable power/energy sensors under ``root``; a chip with an energy counter keeps
    only that one (a counter integrates what the power reading samples)."""
    try:
        chips = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    found = []
    for chip_dir in chips:
        path = os.path.join(root, chip_dir)
        try:
            with open(os.path.join(path, "name")) as f:
                chip = f.read().strip()
            files = sorted(os.listdir(path))
        except OSError:
            continue
        sensors = []
        for name in files:
            if not _SENSOR.match(name):
                continue
            try:
                read_micro(os.path.join(path, name))
            except (OSError, ValueError):
                continue
            kind = "energy" if name.startswith("energy") else "power"
            sensors.append(Sensor(os.path.join(path, name), chip, name.split("_")[0], kind))
        if any(s.kind == "energy" for s in sensors):
            sensors = [s for s in sensors if s.kind == "energy"]
        found.extend(sensors)
    return found


def read_micro(path: str) -> int:
    """A sensor's value: microjoules (energy) or microwatts (power)."""
    with open(path) as f:
        return int(f.read())
