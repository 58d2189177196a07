"""Which GPU is which: identity by PCI bus id, UUID and device file, and Slurm's numbering.

A GPU is never known by a driver's enumeration index. Each vendor's reader (exporter/gpu.py
for NVML, exporter/gpu_amd.py for amdsmi) describes its devices by what does not depend on
enumeration: the PCI bus id, the UUID and the device file Slurm's gres.conf names
(``/dev/nvidia<minor>``, ``/dev/dri/renderD<minor>``, with its major:minor for the devices
cgroup). The index Slurm gives a job (``scontrol -d show job``'s ``IDX``, the prolog's
``SLURM_JOB_GPUS``) is a position in Slurm's own list of the node's GPUs, so it is mapped
through that list, never taken as a driver index:

- ``file``: gres.conf names the files (``File=/dev/nvidia[0-3]``): Slurm lists them in
  file-name order, so index N is the N-th device file (the minor number when the files
  are contiguous; not when one is missing);
- ``pci``: ``AutoDetect=nvml`` / ``rsmi``: Slurm sorts the detected GPUs by the driver's
  enumeration, which is PCI bus id order (gres_gpu.c ``_sort_gpu_by_links_order``).

When a device's file is unknown (a driver that does not report its minor number) the file
order cannot be told, and PCI bus id order is used for every device.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

NVIDIA_MAJOR = 195  # /dev/nvidia<minor>
DRM_MAJOR = 226  # /dev/dri/card<minor>, /dev/dri/renderD<minor> (minors from 128)
RENDER_MINOR_BASE = 128
ORDERS = ("file", "pci")
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class GpuDevice:
    """One GPU (or one compute partition of a partitioned card) as the node sees it."""

    vendor: str  # "nvidia" | "amd"
    model: str  # the driver's product name; "" when it does not tell
    uuid: str  # "" when the driver does not tell
    bus_id: str  # canonical PCI bus id, "0000:05:00.0"
    minor: int | None  # minor number of the device file; None: unknown
    partition: int | None = None  # compute partition of a partitioned card (AMD CPX ...)

    @property
    def major(self) -> int:
        return NVIDIA_MAJOR if self.vendor == "nvidia" else DRM_MAJOR

    @property
    def path(self) -> str | None:
        """The device file Slurm's gres.conf names for this GPU."""
        if self.minor is None:
            return None
        if self.vendor == "nvidia":
            return f"/dev/nvidia{self.minor}"
        return f"/dev/dri/renderD{self.minor}"

    @property
    def number(self) -> tuple[int, int] | None:
        """(major, minor) of the device file, as the devices cgroup lists it."""
        return None if self.minor is None else (self.major, self.minor)

    @property
    def card(self) -> str:
        """The physical card: partitions of one card share its power and energy."""
        return self.bus_id.rsplit(".", 1)[0] if self.partition is not None else self.bus_id


@dataclass(frozen=True)
class GpuReading:
    index: int
    utilization_ratio: float | None  # None: the driver reports no activity (AMD "N/A")
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_watts: float | None  # None: the board does not report power


def parse_bus_id(text: str) -> str:
    """A PCI bus id in one canonical form, whatever the driver prints.

    ``00000000:00:1E.0`` (NVML) -> ``0000:00:1e.0``
    ``0000:05:00.0`` (amdsmi), ``05:00.0`` (no domain) -> ``0000:05:00.0``
    """
    match = _BUS_ID.match(text.strip())
    if match is None:
        raise ValueError(f"not a PCI bus id: {text[:40]!r}")
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def _natural(path: str) -> tuple:
    """strnatcmp's order, as Slurm sorts gres.conf files: renderD9 < renderD10."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(path))


def _pci_key(device: GpuDevice) -> tuple:
    return (device.bus_id, device.partition or 0)


def slurm_order(devices: Iterable[GpuDevice], order: str, quiet: bool = False
                ) -> list[GpuDevice]:
    """The node's GPUs in the order Slurm numbers them (see the module docstring)."""
    devices = list(devices)
    if order not in ORDERS:
        raise ValueError(f"unknown GPU order {order!r}")
    if order == "file" and all(d.path is not None for d in devices):
        return sorted(devices, key=lambda d: (_natural(d.path or ""), _pci_key(d)))
    if order == "file" and devices and not quiet:
        unknown = [d.bus_id for d in devices if d.path is None]
        log.info("GPU device files unknown for %s: numbering GPUs in PCI bus id order", unknown)
    return sorted(devices, key=_pci_key)


def describe(devices: dict[int, GpuDevice]) -> str:
    """``0=amd 0000:05:00.0 /dev/dri/renderD128, ...`` for a log line."""
    return ", ".join(f"{i}={d.vendor} {d.bus_id} {d.path or '(device file unknown)'}"
                     for i, d in devices.items())


def by_number(devices: Sequence[GpuDevice]) -> dict[tuple[int, int], int]:
    """(major, minor) of each known device file -> the device's position in ``devices``."""
    return {d.number: i for i, d in enumerate(devices) if d.number is not None}
