"""NVIDIA GPUs through NVML (nvidia-ml-py's ``pynvml``), keyed by Slurm's GPU index.

GPUs are attributed to jobs by ALLOCATION (exporter/gpu_alloc.py), never by the processes
running on them: an allocated, idle GPU is reported at 0 %, which is the point.

Indexes: SLURM_JOB_GPUS holds the index of the gres.conf entry, which for
``File=/dev/nvidia[0-N]`` is the device minor number. That is neither CUDA's default
order (fastest first) nor necessarily NVML's enumeration, so each NVML handle is keyed by
nvmlDeviceGetMinorNumber; where a driver cannot report it, by its position in PCI bus id
order (nvmlDeviceGetPciInfo), which is what nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuReading:
    index: int
    utilization_ratio: float
    memory_used_bytes: int
    memory_total_bytes: int
    power_watts: float | None  # None: the board does not report power


def load_nvml() -> ModuleType | None:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class Nvml:
    """This node's GPUs by physical index. ``start()`` returns False when there is no driver."""

    def __init__(self, nvml: Any, clock: Callable[[], float] = time.monotonic):
        self.nvml = nvml
        self.handles: dict[int, Any] = {}
        self.clock = clock
        # index -> (joules, time) integrated from power on boards without an energy counter
        self._integrated: dict[int, tuple[float, float]] = {}
        self._memory_v2 = True  # until the driver or binding refuses the second form

    def start(self) -> bool:
        try:
            self.nvml.nvmlInit()
            count = self.nvml.nvmlDeviceGetCount()
            handles = [self.nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except self.nvml.NVMLError as exc:
            log.info("GPU collector disabled: NVML unavailable (%s)", exc)
            return False
        self.handles = self._by_physical_index(handles)
        log.info("GPU collector enabled: %d GPU(s), indexes %s", count, sorted(self.handles))
        return True

    def _by_physical_index(self, handles: list[Any]) -> dict[int, Any]:
        try:
            by_minor = {self.nvml.nvmlDeviceGetMinorNumber(h): h for h in handles}
            if len(by_minor) == len(handles):
                return by_minor
        except self.nvml.NVMLError:
            pass
        bus_ids = [_text(self.nvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
        ordered = sorted(zip(bus_ids, range(len(handles)), strict=True))
        return {pos: handles[i] for pos, (_bus, i) in enumerate(ordered)}

    def read(self, index: int) -> GpuReading | None:
        """Current readings of GPU ``index``; None when there is no such GPU."""
        handle = self.handles.get(index)
        if handle is None:
            return None
        util = self.nvml.nvmlDeviceGetUtilizationRates(handle)
        mem = self._memory(handle)
        try:
            power: float | None = self.nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0  # mW
        except self.nvml.NVMLError:
            power = None
        return GpuReading(
            index=index,
            utilization_ratio=util.gpu / 100.0,
            memory_used_bytes=int(mem.used),
            memory_total_bytes=int(mem.total),
            power_watts=power,
        )


    def _memory(self, handle: Any) -> Any:
        """``nvmlDeviceGetMemoryInfo`` in its second form where the driver has it (R510+):
        its ``used`` leaves out the driver's own reserve, as nvidia-smi's memory.used
        does. The first form's ``used`` is total - free, the reserve included: 615 MiB on
        an idle H200 (recorded: fixtures/exporter/nvml/real_h200_*_memory_v1_v2.json),
        which no job used."""
        version = getattr(self.nvml, "nvmlMemory_v2", None)
        if version is not None and self._memory_v2:
            try:
                return self.nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except (self.nvml.NVMLError, TypeError):  # an older driver or binding
                self._memory_v2 = False
        return self.nvml.nvmlDeviceGetMemoryInfo(handle)

    def energy_joules(self, index: int) -> float | None:
        """GPU ``index``'s energy counter in joules (nvmlDeviceGetTotalEnergyConsumption:
        millijoules since the driver loaded, Volta and later). Older boards: the power
        reading integrated over the time between calls. None: neither is available."""
        handle = self.handles.get(index)
        if handle is None:
            return None
        try:
            return self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0
        except self.nvml.NVMLError:
            pass
        try:
            watts = self.nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        except self.nvml.NVMLError:
            return None
        now = self.clock()
        joules, then = self._integrated.get(index, (0.0, now))
        joules += watts * (now - then)
        self._integrated[index] = (joules, now)
        return joules


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
