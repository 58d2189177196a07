"""A pynvml-compatible stand-in that replays recorded NVML readings.

For machines without an NVIDIA driver (the demo stack, tests): ``jobs-exporter
--nvml-replay FILE`` serves the readings in FILE (a JSON ``{"devices": [...]}`` such as
fixtures/exporter/nvml/replay.json, derived from real nvidia-smi captures) through the
same calls the exporter makes on the real module, with the same units (percent, bytes,
milliwatts), raising its own NVMLError like pynvml does. Readings are constant; the
energy counter (millijoules) is the recorded power times the time since ``nvmlInit``, as
a board drawing that power would count it, added to the device's recorded counter
(``energy_millijoules``, real recordings only; 0 when absent).
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from types import SimpleNamespace


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own spelling
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


class ReplayNvml:
    """Serves ``devices`` (dicts as in replay.json) in NVML index order."""

    NVMLError = NVMLError
    nvmlMemory_v2 = 0x02000028  # pynvml's value: the second form of the memory info

    def __init__(
        self,
        devices: list[dict],
        driver: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.devices = devices
        self.driver = driver
        self.calls: list[str] = []
        self.clock = clock
        self.started = clock()

    def nvmlInit(self) -> None:  # noqa: N802
        self.calls.append("nvmlInit")
        self.started = self.clock()
        if not self.driver:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict:  # noqa: N802
        return self.devices[index]

    def nvmlDeviceGetMinorNumber(self, handle: dict) -> int:  # noqa: N802
        if handle.get("minor_number") is None:
            raise NVMLError_NotSupported("Not Supported")
        return handle["minor_number"]

    def nvmlDeviceGetPciInfo(self, handle: dict) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(busId=handle["bus_id"].encode())

    def nvmlDeviceGetName(self, handle: dict) -> str:  # noqa: N802
        if not handle.get("name"):
            raise NVMLError_NotSupported("Not Supported")
        return handle["name"]

    def nvmlDeviceGetUUID(self, handle: dict) -> str:  # noqa: N802
        if not handle.get("uuid"):
            raise NVMLError_NotSupported("Not Supported")
        return handle["uuid"]

    def nvmlDeviceGetUtilizationRates(self, handle: dict) -> SimpleNamespace:  # noqa: N802
        self.calls.append("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=handle["utilization_gpu_percent"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: dict,  # noqa: N802
                                version: int | None = None) -> SimpleNamespace:
        """The first form: used = total - free. The second (``version``): the recorded
        driver reserve (``memory_reserved_bytes``) apart from used; a recording without
        one (nvidia-smi's memory.used, which already leaves it out) serves its figure."""
        used, total = handle["memory_used_bytes"], handle["memory_total_bytes"]
        if version is None:
            return SimpleNamespace(used=used, total=total, free=total - used)
        reserved = handle.get("memory_reserved_bytes", 0)
        return SimpleNamespace(used=used - reserved, total=total, free=total - used,
                               reserved=reserved)

    def nvmlDeviceGetPowerUsage(self, handle: dict) -> int:  # noqa: N802
        if handle.get("power_milliwatts") is None:
            raise NVMLError_NotSupported("Not Supported")
        return handle["power_milliwatts"]


    def nvmlDeviceGetTotalEnergyConsumption(self, handle: dict) -> int:  # noqa: N802
        # A device recorded with "energy_counter": false is a pre-Volta board without one.
        if handle.get("power_milliwatts") is None or handle.get("energy_counter") is False:
            raise NVMLError_NotSupported("Not Supported")
        counted = handle["power_milliwatts"] * (self.clock() - self.started)
        return round(handle.get("energy_millijoules", 0) + counted)


def load_replay(path: str | pathlib.Path) -> ReplayNvml:
    """A replaying NVML from a JSON file of recorded device readings."""
    return ReplayNvml(json.loads(pathlib.Path(path).read_text())["devices"])
