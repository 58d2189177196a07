"""AMD GPUs through AMD's ``amdsmi`` Python binding, known by PCI bus id and render node.

The same design as jobs_exporter/gpu_nvidia.py for NVML: attribution by allocation only, each device
described by what does not depend on enumeration (``amdsmi_get_gpu_device_bdf``,
``amdsmi_get_gpu_device_uuid``, and the render node ``/dev/dri/renderD<N>`` Slurm's
gres.conf names, from ``amdsmi_get_gpu_enumeration_info()['drm_render']``).

A partitioned card (compute partition DPX, TPX, QPX or CPX, as
``amdsmi_get_gpu_compute_partition`` reports) is one amdsmi handle per partition, each
with its own render node: each is a device of its own that Slurm allocates alone. Power
and energy are the card's (the card does not meter its partitions): they are read from the
card's first partition and each partition reports an equal share, so the node's total
counts the card once.

Memory errors are the card's RAS counts (``amdsmi_get_gpu_total_ecc_count``:
``correctable_count``, ``uncorrectable_count``), read from its first partition; amdsmi has
no XID events.

Units as the binding returns them: activity in percent (``"N/A"`` where unsupported), VRAM
in MB (MiB: the library divides bytes by 1024²), power in W, the energy accumulator in
ticks of ``counter_resolution`` µJ.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

from jobreport_common.units import MIB
from jobs_exporter.gpu_devices import GpuDevice, GpuReading, parse_bus_id, slurm_order

log = logging.getLogger(__name__)

PARTITIONED = frozenset({"DPX", "TPX", "QPX", "CPX"})
# Power fields of amdsmi_get_power_info, newest first: socket_power (ROCm 7),
# current_socket_power (MI300 and later), average_socket_power (MI200 and earlier).
_POWER_FIELDS = ("socket_power", "current_socket_power", "average_socket_power")


def load_amdsmi() -> ModuleType | None:
    """The amdsmi module, or None when it is not installed (or its library is missing)."""
    try:
        return importlib.import_module("amdsmi")
    except (ImportError, OSError) as exc:  # the binding loads libamd_smi.so when imported
        log.debug("amdsmi not importable: %s", exc)
        return None


def _number(value: Any) -> float | None:
    """A reading, or None for the binding's ``"N/A"``."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class AmdSmi:
    """This node's AMD GPUs (and partitions). ``start()`` returns False without a driver."""

    vendor = "amd"

    def __init__(
        self, smi: Any, clock: Callable[[], float] = time.monotonic, order: str = "file"
    ):
        self.smi = smi
        self.error: type[Exception] = smi.AmdSmiException
        self.order = order
        self.found: list[tuple[GpuDevice, Any]] = []
        self.devices: dict[int, GpuDevice] = {}
        self.handles: dict[int, Any] = {}
        self.clock = clock
        self._primary: dict[str, Any] = {}  # card -> the handle its power is read from
        self._shares: dict[str, int] = {}  # card -> number of partitions sharing it
        self._integrated: dict[str, tuple[float, float]] = {}  # card -> (joules, time)

    def start(self) -> bool:
        try:
            self.smi.amdsmi_init()
            handles = list(self.smi.amdsmi_get_processor_handles())
            self.found = [(self._identify(h), h) for h in handles]
        except self.smi.AmdSmiException as exc:
            log.info("AMD GPUs not read: amdsmi unavailable (%s)", exc)
            return False
        self._shares = dict(Counter(d.card for d, _ in self.found))
        self.found = [(d if d.partition is None else
                       dataclasses.replace(d, partitions=self._shares[d.card]), h)
                      for d, h in self.found]
        for device, handle in sorted(self.found, key=lambda f: f[0].partition or 0,
                                     reverse=True):
            self._primary[device.card] = handle  # the lowest partition is kept
        by_device = {id(d): h for d, h in self.found}
        ordered = slurm_order([d for d, _ in self.found], self.order, quiet=True)
        self.devices = dict(enumerate(ordered))
        self.handles = {i: by_device[id(d)] for i, d in self.devices.items()}
        return True

    def _identify(self, handle: Any) -> GpuDevice:
        bus_id = parse_bus_id(self.smi.amdsmi_get_gpu_device_bdf(handle))
        asic = self._optional("amdsmi_get_gpu_asic_info", handle) or {}
        model = asic.get("market_name", "")
        enumeration = self._optional("amdsmi_get_gpu_enumeration_info", handle) or {}
        render = enumeration.get("drm_render")
        mode = self._optional("amdsmi_get_gpu_compute_partition", handle)
        partition = None
        if mode in PARTITIONED:
            kfd = self._optional("amdsmi_get_gpu_kfd_info", handle) or {}
            partition = kfd.get("current_partition_id")
            partition = partition if isinstance(partition, int) else 0
        return GpuDevice(
            vendor=self.vendor,
            model="" if model == "N/A" else str(model),
            uuid=str(self._optional("amdsmi_get_gpu_device_uuid", handle) or ""),
            bus_id=bus_id,
            minor=render if isinstance(render, int) else None,
            partition=partition,
        )

    def _optional(self, name: str, handle: Any) -> Any:
        """A call the binding may lack (older releases) or the device may not support."""
        call = getattr(self.smi, name, None)
        if call is None:
            return None
        try:
            return call(handle)
        except self.smi.AmdSmiException:
            return None

    def read(self, index: int) -> GpuReading | None:
        """Current readings of GPU ``index``; None when there is no such GPU."""
        handle = self.handles.get(index)
        return None if handle is None else self.read_handle(index, handle, self.devices[index])

    def read_handle(self, index: int, handle: Any, device: GpuDevice) -> GpuReading:
        activity = self._optional("amdsmi_get_gpu_activity", handle) or {}
        util = _number(activity.get("gfx_activity"))
        vram = self._optional("amdsmi_get_gpu_vram_usage", handle) or {}
        used, total = _number(vram.get("vram_used")), _number(vram.get("vram_total"))
        watts = self._card_power(device)
        return GpuReading(
            index=index,
            utilization_ratio=None if util is None else util / 100.0,
            memory_used_bytes=None if used is None else int(used) * MIB,
            memory_total_bytes=None if total is None else int(total) * MIB,
            power_watts=None if watts is None else watts / self._shares.get(device.card, 1),
        )

    def _card_power(self, device: GpuDevice) -> float | None:
        info = self._optional("amdsmi_get_power_info", self._primary[device.card]) or {}
        for field in _POWER_FIELDS:
            watts = _number(info.get(field))
            if watts is not None:
                return watts
        return None

    def energy_joules(self, index: int) -> float | None:
        handle = self.handles.get(index)
        return None if handle is None else self.energy_of(self.devices[index], handle)

    def energy_of(self, device: GpuDevice, handle: Any) -> float | None:
        """The partition's share of its card's energy counter, in joules:
        ``energy_accumulator`` (``power`` before ROCm 6.4) × ``counter_resolution`` µJ,
        since the driver loaded. Without a counter, the power integrated between calls."""
        card = device.card
        count = self._optional("amdsmi_get_energy_count", self._primary[card]) or {}
        ticks = _number(count.get("energy_accumulator", count.get("power")))
        resolution = _number(count.get("counter_resolution"))
        if ticks is not None and resolution is not None:
            joules = ticks * resolution / 1e6
        else:
            watts = self._card_power(device)
            if watts is None:
                return None
            now = self.clock()
            joules, then = self._integrated.get(card, (0.0, now))
            joules += watts * (now - then)
            self._integrated[card] = (joules, now)
        return joules / self._shares.get(card, 1)

    def memory_errors(self, device: GpuDevice, handle: Any) -> tuple[int | None, int | None]:
        """(correctable, uncorrectable) errors of the card's memory (RAS); None where
        the binding or the board has no count."""
        count = self._optional("amdsmi_get_gpu_total_ecc_count", self._primary[device.card])
        count = count or {}
        found = (_number(count.get("correctable_count")),
                 _number(count.get("uncorrectable_count")))
        corrected, uncorrected = found
        return (None if corrected is None else int(corrected),
                None if uncorrected is None else int(uncorrected))

    def xid_errors(self, device: GpuDevice) -> dict[int, int]:
        return {}  # an NVIDIA driver's reports; AMD's errors are its RAS counts
