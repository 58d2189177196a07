"""NVIDIA GPUs through NVML (nvidia-ml-py's ``pynvml``), known by PCI bus id and minor number.

GPUs are attributed to jobs by ALLOCATION (jobs_exporter/gpu_alloc.py), never by the processes
running on them: an allocated, idle GPU is reported at 0 %, which is the point.

Identity: NVML's enumeration index is only how handles are fetched. Each handle is
described by nvmlDeviceGetPciInfo (bus id), nvmlDeviceGetMinorNumber (``/dev/nvidia<minor>``,
what gres.conf and the devices cgroup name) and nvmlDeviceGetUUID, and numbered the way
Slurm numbers the node's GPUs (jobs_exporter/gpu_devices.py: device-file order, or PCI bus id
order under AutoDetect or where a driver cannot report a minor number). On a node whose
minor numbers differ from NVML's order each job still gets its own cards.

A card in MIG mode is its MIG devices (jobs_exporter/gpu_mig.py). Faults are the card's: its
XID events (jobs_exporter/gpu_faults.py) and its volatile ECC counts
(``nvmlDeviceGetTotalEccErrors``, since the driver loaded).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jobs_exporter import gpu_faults, gpu_mig
from jobs_exporter.gpu_devices import GpuDevice, GpuReading, parse_bus_id, slurm_order
from jobs_exporter.gpu_mig import MigHandle

__all__ = ["GpuReading", "Nvml", "load_nvml"]

log = logging.getLogger(__name__)


def load_nvml() -> ModuleType | None:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class Nvml:
    """This node's NVIDIA GPUs. ``start()`` returns False when there is no driver.

    After ``start()``: ``found`` lists (device, handle) in NVML's order; ``devices`` and
    ``handles`` are keyed by Slurm's index among these GPUs alone
    (jobs_exporter/gpu_inventory.py numbers the GPUs of every vendor together).
    """

    vendor = "nvidia"

    def __init__(
        self, nvml: Any, clock: Callable[[], float] = time.monotonic, order: str = "file",
        proc_root: str = "/proc",
    ):
        self.nvml = nvml
        self.proc_root = proc_root
        self.error: type[Exception] = nvml.NVMLError
        self.order = order
        self.found: list[tuple[GpuDevice, Any]] = []
        self.devices: dict[int, GpuDevice] = {}
        self.handles: dict[int, Any] = {}
        self.clock = clock
        # bus id -> (joules, time) integrated from power on boards without an energy counter
        self._integrated: dict[str, tuple[float, float]] = {}
        self._memory_v2 = True  # until the driver or binding refuses the second form
        self.xids = gpu_faults.XidCounts()
        self.xid_thread: threading.Thread | None = None
        self.gpm = gpu_mig.GpmUtilization(nvml)

    def start(self) -> bool:
        nv = self.nvml
        try:
            nv.nvmlInit()
            count = nv.nvmlDeviceGetCount()
            cards = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self.found = []
            caps = None
            for card in cards:
                device = self._identify(card)
                if not gpu_mig.enabled(nv, card):
                    self.found.append((device, card))
                    continue
                caps = caps or gpu_mig.read_mig_caps(self.proc_root)
                try:
                    self.found.extend(gpu_mig.slices(nv, card, device, caps))
                except nv.NVMLError as exc:  # the card stays no GPU: Slurm has its slices
                    log.warning("GPU %s is in MIG mode but its MIG devices are unreadable "
                                "(%s): none reported", device.bus_id, exc)
        except nv.NVMLError as exc:
            log.info("NVIDIA GPUs not read: NVML unavailable (%s)", exc)
            return False
        self.xid_thread = gpu_faults.watch(nv, cards, self.xids, self)
        by_device = {id(d): h for d, h in self.found}
        ordered = slurm_order([d for d, _ in self.found], self.order, quiet=True)
        self.devices = dict(enumerate(ordered))
        self.handles = {i: by_device[id(d)] for i, d in self.devices.items()}
        return True

    def _identify(self, handle: Any) -> GpuDevice:
        nv = self.nvml
        bus_id = parse_bus_id(_text(nv.nvmlDeviceGetPciInfo(handle).busId))
        return GpuDevice(
            vendor=self.vendor,
            model=self._optional(nv.nvmlDeviceGetName, handle, ""),
            uuid=self._optional(nv.nvmlDeviceGetUUID, handle, ""),
            bus_id=bus_id,
            minor=self._optional(nv.nvmlDeviceGetMinorNumber, handle, None),
        )

    def _optional(self, call: Callable[[Any], Any], handle: Any, default: Any) -> Any:
        try:
            value = call(handle)
        except self.nvml.NVMLError:
            return default
        return _text(value) if isinstance(value, bytes) else value

    def read(self, index: int) -> GpuReading | None:
        """Current readings of GPU ``index``; None when there is no such GPU."""
        handle = self.handles.get(index)
        return None if handle is None else self.read_handle(index, handle, self.devices[index])

    def read_handle(self, index: int, handle: Any, device: GpuDevice | None = None) -> GpuReading:
        if isinstance(handle, MigHandle):
            return self._read_mig(index, handle)
        util = self.nvml.nvmlDeviceGetUtilizationRates(handle)
        mem = self._memory(handle)
        return GpuReading(
            index=index,
            utilization_ratio=util.gpu / 100.0,
            memory_used_bytes=int(mem.used),
            memory_total_bytes=int(mem.total),
            power_watts=self._power(handle),
        )

    def _read_mig(self, index: int, mig: MigHandle) -> GpuReading:
        """A MIG device: its memory, its engine activity from the card's performance
        monitor, its share of the card's power (an estimate)."""
        mem = self._memory(mig.handle)
        try:
            util = self.gpm.ratio(mig)
        except self.nvml.NVMLError as exc:
            log.debug("MIG utilisation unreadable: %s", exc)
            util = None
        watts = self._power(mig.card)
        return GpuReading(
            index=index,
            utilization_ratio=util,
            memory_used_bytes=int(mem.used),
            memory_total_bytes=int(mem.total),
            power_watts=None if watts is None else watts * mig.share,
        )

    def _power(self, handle: Any) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0  # mW
        except self.nvml.NVMLError:
            return None

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
        """GPU ``index``'s energy counter in joules (see ``energy_of``)."""
        handle = self.handles.get(index)
        return None if handle is None else self.energy_of(self.devices[index], handle)

    def energy_of(self, device: GpuDevice, handle: Any) -> float | None:
        """The energy counter in joules (nvmlDeviceGetTotalEnergyConsumption: millijoules
        since the driver loaded, Volta and later). Older boards: the power reading
        integrated over the time between calls. None: neither is available. A MIG
        device: its share of its card's."""
        if isinstance(handle, MigHandle):
            joules = self.energy_of(dataclasses.replace(device, mig=None), handle.card)
            return None if joules is None else joules * handle.share
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0
        except self.nvml.NVMLError:
            pass
        try:
            watts = float(self.nvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0
        except self.nvml.NVMLError:
            return None
        now = self.clock()
        joules, then = self._integrated.get(device.bus_id, (0.0, now))
        joules += watts * (now - then)
        self._integrated[device.bus_id] = (joules, now)
        return joules

    def memory_errors(self, device: GpuDevice, handle: Any) -> tuple[int | None, int | None]:
        """(corrected, uncorrected) volatile ECC errors of the card since the driver
        loaded; None where the board has no ECC or it is off."""
        nv = self.nvml
        card = handle.card if isinstance(handle, MigHandle) else handle
        volatile = getattr(nv, "NVML_VOLATILE_ECC", 0)
        out: list[int | None] = []
        for kind in ("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"):
            try:
                out.append(int(nv.nvmlDeviceGetTotalEccErrors(card, getattr(nv, kind),
                                                              volatile)))
            except nv.NVMLError:
                out.append(None)
        return out[0], out[1]

    def xid_errors(self, device: GpuDevice) -> dict[int, int]:
        """XID events of the device's card since the exporter started, by code (a MIG
        device: the card's and its GPU instance's)."""
        return self.xids.of(device.bus_id, None if device.mig is None
                            else device.mig.gpu_instance)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
