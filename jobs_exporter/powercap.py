"""RAPL energy counters through the powercap sysfs class (Intel, and AMD's zones the same way).

Each zone directory (``intel-rapl:0``, ``intel-rapl:0:1``; ``amd-rapl:0`` on kernels that
name AMD's that way) holds ``name`` (``package-0``, ``dram``, ``core``, ...), ``energy_uj``
(a counter in microjoules that wraps to 0 after ``max_energy_range_uj``) and the limits.
Only package and DRAM zones are kept: ``core``/``uncore`` are parts of their package and
``psys`` overlaps everything, so adding them would count joules twice.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

_ZONE_DIR = re.compile(r"^(intel|amd)-rapl:\d+(:\d+)?$")


@dataclass(frozen=True)
class Zone:
    path: str  # the zone directory
    kind: str  # "package" or "dram"
    label: str  # the zone's name file, e.g. "package-0"
    max_range_uj: int


def parse_zone_kind(name: str) -> str | None:
    """``package-0`` -> ``package``; ``dram`` -> ``dram``; anything else -> None.

    Input is the one line of a zone's ``name`` file, e.g. ``package-0`` or ``core``.
    """
    name = name.strip()
    if re.fullmatch(r"package-\d+", name):
        return "package"
    if name == "dram":
        return "dram"
    return None


def discover_zones(root: str) -> list[Zone]:
    """The package and DRAM zones under ``root`` (e.g. /sys/class/powercap) we can read."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    zones = []
    for entry in names:
        if not _ZONE_DIR.match(entry):
            continue
        path = os.path.join(root, entry)
        try:
            kind = parse_zone_kind(_read(path, "name"))
            if kind is None:
                continue
            max_range = int(_read(path, "max_energy_range_uj"))
            read_energy_uj(path)  # readable? (root-only on kernels since 5.10)
        except (OSError, ValueError) as exc:
            log.info("powercap zone %s not usable: %s", path, exc)
            continue
        zones.append(Zone(path, kind, _read(path, "name").strip(), max_range))
    return zones


def read_energy_uj(zone_path: str) -> int:
    """The zone's energy counter, in microjoules."""
    return int(_read(zone_path, "energy_uj"))


def _read(path: str, name: str) -> str:
    with open(os.path.join(path, name)) as f:
        return f.read()
