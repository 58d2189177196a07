"""Which GPU is which: identity by PCI bus id, UUID and device file, and Slurm's numbering.

A GPU is never known by a driver's enumeration index. Each vendor's reader
(jobs_exporter/gpu_nvidia.py for NVML, jobs_exporter/gpu_amd.py for amdsmi) describes its
devices by what does not depend on enumeration: the PCI bus id, the UUID and the device file
Slurm's gres.conf names (``/dev/nvidia<minor>``, ``/dev/dri/renderD<minor>``, with its
major:minor for the devices cgroup). The index Slurm gives a job (``scontrol -d show job``'s
``IDX``, the prolog's ``SLURM_JOB_GPUS``) is a position in Slurm's own list of the node's GPUs,
so it is mapped through that list, never taken as a driver index:

- ``file``: gres.conf names the files (``File=/dev/nvidia[0-3]``): Slurm lists them in
  file-name order, so index N is the N-th device file (the minor number when the files
  are contiguous; not when one is missing);
- ``pci``: ``AutoDetect=nvml`` / ``rsmi``: Slurm sorts the detected GPUs by the driver's
  enumeration, which is PCI bus id order (gres_gpu.c ``_sort_gpu_by_links_order``).

When a device's file is unknown (a driver that does not report its minor number) the file
order cannot be told, and PCI bus id order is used for every device.

A card in MIG mode is not a GPU of Slurm's: each of its MIG devices is (gres.conf
``MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22``,
the card's file and its GPU and compute instance's capability files, jobs_exporter/gpu_mig.py).
In file order they follow their card's file, by capability number; in PCI order, their
card's bus id, then GPU and compute instance.
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
class MigSlice:
    """Where a MIG device sits on its card (jobs_exporter/gpu_mig.py)."""

    parent_uuid: str  # the card's UUID; "" when the driver does not tell
    parent_minor: int | None  # the card's /dev/nvidia<minor>
    gpu_instance: int
    compute_instance: int
    profile: str  # "1g.10gb"; "" when the driver does not name it
    slices: int  # compute slices of the compute instance
    gi_slices: int  # compute slices of its GPU instance
    card_slices: int  # compute slices of the whole card (7 on A100 and H100)
    caps_major: int | None = None  # major of /dev/nvidia-caps/*; None: unknown
    gi_minor: int | None = None  # /dev/nvidia-caps/nvidia-cap<gi_minor>
    ci_minor: int | None = None

    @property
    def share(self) -> float:
        """The card's compute the slice holds: its power and energy are this share."""
        return self.slices / self.card_slices

    @property
    def numbers(self) -> tuple[tuple[int, int], ...]:
        """(major, minor) of its capability files, compute instance first."""
        if self.caps_major is None:
            return ()
        return tuple((self.caps_major, m) for m in (self.ci_minor, self.gi_minor)
                     if m is not None)


@dataclass(frozen=True)
class GpuDevice:
    """One GPU (or one compute partition of a partitioned card) as the node sees it."""

    vendor: str  # "nvidia" | "amd"
    model: str  # the driver's product name; "" when it does not tell
    uuid: str  # "" when the driver does not tell
    bus_id: str  # canonical PCI bus id, "0000:05:00.0"
    minor: int | None  # minor number of the device file; None: unknown
    partition: int | None = None  # compute partition of a partitioned card (AMD CPX ...)
    mig: MigSlice | None = None  # a MIG device: its place on its card (bus_id is the card's)
    partitions: int | None = None  # a partition: how many its card has (sharing its power)

    @property
    def major(self) -> int:
        return NVIDIA_MAJOR if self.vendor == "nvidia" else DRM_MAJOR

    @property
    def path(self) -> str | None:
        """The device file Slurm's gres.conf names for this GPU (a MIG device: its files,
        as ``MultipleFiles=`` lists them)."""
        if self.mig is not None:
            m = self.mig
            if m.parent_minor is None or m.gi_minor is None or m.ci_minor is None:
                return None
            return (f"/dev/nvidia{m.parent_minor},/dev/nvidia-caps/nvidia-cap{m.gi_minor},"
                    f"/dev/nvidia-caps/nvidia-cap{m.ci_minor}")
        if self.minor is None:
            return None
        if self.vendor == "nvidia":
            return f"/dev/nvidia{self.minor}"
        return f"/dev/dri/renderD{self.minor}"

    @property
    def number(self) -> tuple[int, int] | None:
        """(major, minor) of the device file, as the devices cgroup lists it (a MIG
        device: its compute instance's capability file)."""
        if self.mig is not None:
            return next(iter(self.mig.numbers), None)
        return None if self.minor is None else (self.major, self.minor)

    @property
    def numbers(self) -> tuple[tuple[int, int], ...]:
        """Every device number that may name this GPU in a devices cgroup."""
        if self.mig is not None:
            return self.mig.numbers
        return () if self.number is None else (self.number,)

    def label(self, index: int) -> str:
        """The ``gpu`` label: Slurm's index; a MIG device ``<card minor>/<GPU instance>``
        (``/<compute instance>`` added where its GPU instance is split), as nvidia-smi
        names it, since its card has no index of Slurm's."""
        if self.mig is None:
            return str(index)
        m = self.mig
        card = str(m.parent_minor) if m.parent_minor is not None else self.bus_id
        whole = m.slices >= m.gi_slices
        return f"{card}/{m.gpu_instance}" + ("" if whole else f"/{m.compute_instance}")

    @property
    def power_share(self) -> str:
        """"" where power and energy are the device's own readings; ``3/7``, ``1/8``: the
        share of its card's readings it reports (an estimate)."""
        if self.mig is not None:
            return f"{self.mig.slices}/{self.mig.card_slices}"
        if self.partition is not None and self.partitions:
            return f"1/{self.partitions}"
        return ""

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


def _natural(path: str) -> tuple[int | str, ...]:
    """strnatcmp's order, as Slurm sorts gres.conf files: renderD9 < renderD10."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(path))


def _pci_key(device: GpuDevice) -> tuple[str, int, int, int]:
    mig = device.mig
    return (device.bus_id, device.partition or 0, -1 if mig is None else mig.gpu_instance,
            -1 if mig is None else mig.compute_instance)


def slurm_order(devices: Iterable[GpuDevice], order: str, quiet: bool = False
                ) -> list[GpuDevice]:
    """The node's GPUs in the order Slurm numbers them (see the module docstring)."""
    devices = list(devices)
    if order not in ORDERS:
        raise ValueError(f"unknown GPU order {order!r}")
    if order == "file" and all(d.path is not None for d in devices):
        return sorted(devices, key=lambda d: (_natural(d.path or ""), _pci_key(d)))
    if order == "file" and devices and not quiet:
        unknown = [d.bus_id + (f" GI {d.mig.gpu_instance}" if d.mig else "")
                   for d in devices if d.path is None]
        log.info("GPU device files unknown for %s: numbering GPUs in PCI bus id order", unknown)
    return sorted(devices, key=_pci_key)


def describe(devices: dict[int, GpuDevice]) -> str:
    """``0=amd 0000:05:00.0 /dev/dri/renderD128, ...`` for a log line."""
    return ", ".join(f"{i}={d.vendor} {d.bus_id}"
                     f"{f' MIG {d.mig.profile or d.label(i)}' if d.mig else ''}"
                     f" {d.path or '(device file unknown)'}" for i, d in devices.items())


def by_number(devices: Sequence[GpuDevice]) -> dict[tuple[int, int], int]:
    """(major, minor) of each known device file -> the device's position in ``devices``.
    A number that names several (a GPU instance's capability, shared by its compute
    instances) names none."""
    seen: dict[tuple[int, int], list[int]] = {}
    for i, d in enumerate(devices):
        for number in d.numbers:
            seen.setdefault(number, []).append(i)
    return {n: found[0] for n, found in seen.items() if len(found) == 1}


def shared_numbers(devices: Sequence[GpuDevice]) -> frozenset[tuple[int, int]]:
    """Device files every job on a card in MIG mode is allowed (the card's
    ``/dev/nvidia<minor>``) or that several MIG devices share: no GPU of their own."""
    out = {(NVIDIA_MAJOR, d.mig.parent_minor) for d in devices
           if d.mig is not None and d.mig.parent_minor is not None}
    return frozenset(out | (set().union(*(d.numbers for d in devices)) - set(by_number(devices))))
