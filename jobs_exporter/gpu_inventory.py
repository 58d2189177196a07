"""This node's GPUs of every vendor, numbered the way Slurm numbers them.

Each reader (jobs_exporter/gpu_nvidia.py ``Nvml``, jobs_exporter/gpu_amd.py ``AmdSmi``)
describes its devices; here they are put in one list in Slurm's order
(jobs_exporter/gpu_devices.py), so an index from Slurm and a device number from the devices
cgroup both lead to one device, whichever vendor's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from jobs_exporter.gpu_devices import (
    GpuDevice,
    GpuReading,
    by_number,
    describe,
    shared_numbers,
    slurm_order,
)

log = logging.getLogger(__name__)


class Reader(Protocol):
    vendor: str
    error: type[Exception]
    found: list[tuple[GpuDevice, Any]]

    def start(self) -> bool: ...
    def read_handle(self, index: int, handle: Any, device: GpuDevice) -> GpuReading: ...
    def energy_of(self, device: GpuDevice, handle: Any) -> float | None: ...
    def memory_errors(self, device: GpuDevice, handle: Any
                      ) -> tuple[int | None, int | None]: ...
    def xid_errors(self, device: GpuDevice) -> dict[int, int]: ...


class Gpus:
    """Every started reader's devices by Slurm's index; ``start()`` False: no GPU driver."""

    def __init__(self, readers: Sequence[Reader], order: str):
        self.readers = list(readers)
        self.order = order
        self.devices: dict[int, GpuDevice] = {}
        self.numbers: dict[tuple[int, int], int] = {}  # (major, minor) -> index
        # device files that are no GPU of their own: a MIG card's, shared capabilities
        self.shared: frozenset[tuple[int, int]] = frozenset()
        self.labels: dict[int, str] = {}  # index -> the gpu label of its series
        self._where: dict[int, tuple[Reader, Any]] = {}  # index -> (reader, handle)
        self.errors: tuple[type[Exception], ...] = ()

    def start(self) -> bool:
        started = [r for r in self.readers if r.start()]
        found = [(d, r, h) for r in started for d, h in r.found]
        ordered = slurm_order([d for d, _, _ in found], self.order)
        where = {id(d): (r, h) for d, r, h in found}
        self.devices = dict(enumerate(ordered))
        self._where = {i: where[id(d)] for i, d in self.devices.items()}
        self.numbers = by_number(ordered)
        self.shared = shared_numbers(ordered)
        self.labels = {i: d.label(i) for i, d in self.devices.items()}
        self.errors = tuple(r.error for r in started)
        if started:
            log.info("GPUs by Slurm's index (%s order): %s", self.order, describe(self.devices))
        return bool(started)

    def read(self, index: int) -> GpuReading | None:
        """Current readings of GPU ``index``; None when the node has no such GPU."""
        if index not in self._where:
            return None
        reader, handle = self._where[index]
        return reader.read_handle(index, handle, self.devices[index])

    def energy_joules(self, index: int) -> float | None:
        reader, handle = self._where[index]
        return reader.energy_of(self.devices[index], handle)

    def memory_errors(self, index: int) -> tuple[int | None, int | None]:
        """(corrected, uncorrected) memory errors of GPU ``index``'s card."""
        reader, handle = self._where[index]
        return reader.memory_errors(self.devices[index], handle)

    def xid_errors(self, index: int) -> dict[int, int]:
        """XID events of GPU ``index``'s card (or GPU instance) by code."""
        reader, _ = self._where[index]
        return reader.xid_errors(self.devices[index])

    @property
    def caps_majors(self) -> frozenset[int]:
        """Majors of MIG capability files, which a devices cgroup may list."""
        return frozenset(d.mig.caps_major for d in self.devices.values()
                         if d.mig is not None and d.mig.caps_major is not None)
