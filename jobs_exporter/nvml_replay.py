"""A pynvml-compatible stand-in that replays recorded NVML readings.

For machines without an NVIDIA driver (the demo stack, tests): ``jobs-exporter
--nvml-replay FILE`` serves the readings in FILE (a JSON ``{"devices": [...]}`` such as
fixtures/exporter/nvml/replay.json, derived from real nvidia-smi captures) through the
same calls the exporter makes on the real module, with the same units (percent, bytes,
milliwatts), raising its own NVMLError like pynvml does. Readings are constant; the
energy counter (millijoules) is the recorded power times the time since the machine booted
(``load_replay``; since ``nvmlInit`` for a replay built by hand), as a board drawing that
power would count it since its driver loaded, added to the device's recorded counter
(``energy_millijoules``, real recordings only; 0 when absent).

A card recorded in MIG mode has ``mig``: ``max_devices`` (nvmlDeviceGetMaxMigDeviceCount)
and its MIG devices (``index`` as nvmlDeviceGetMigDeviceHandleByIndex takes it, GPU and
compute instance, name, UUID, slice counts, memory, and ``gpm_graphics_util_percent``
where a recording has one: what nvmlGpmMetricsGet's NVML_GPM_METRIC_GRAPHICS_UTIL gives
between any two samples). ``ecc_volatile`` holds the card's volatile ECC totals
(nvmlDeviceGetTotalEccErrors). ``xid_events`` lists XIDs the card reports, each
``after_seconds`` past nvmlInit (with ``gpu_instance`` where one is named): served once
each by nvmlEventSetWait_v2. A call whose reading is not recorded raises
NVMLError_NotSupported, as a board without it does.
"""

from __future__ import annotations

import json
import pathlib
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from jobreport_common.units import MIB

# One recorded device (a handle) or reading, as the recording's JSON holds it.
Record = dict[str, Any]

NVML_ERROR_NOT_SUPPORTED = 3  # pynvml's values
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_TIMEOUT = 10
NO_INSTANCE = 0xFFFFFFFF


class NVMLError(Exception):
    value: int | None = None  # pynvml's NVMLError carries the NVML return code


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's own spelling
    value = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NotFound(NVMLError):  # noqa: N801
    value = NVML_ERROR_NOT_FOUND


class NVMLError_Timeout(NVMLError):  # noqa: N801
    value = NVML_ERROR_TIMEOUT


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


class c_nvmlGpmMetricsGet_t:  # noqa: N801 - the ctypes structure's fields, in Python
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)
                        for _ in range(8)]


# For annotations inside ReplayNvml, where the name is the class attribute below.
_GpmQuery = c_nvmlGpmMetricsGet_t


class ReplayNvml:
    """Serves ``devices`` (dicts as in replay.json) in NVML index order."""

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_Timeout = NVMLError_Timeout
    c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t
    nvmlMemory_v2 = 0x02000028  # pynvml's value: the second form of the memory info
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT
    nvmlEventTypeXidCriticalError = 0x8
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1
    NVML_GPM_METRICS_GET_VERSION = 1
    # What jobs_exporter_replay_info says (registry.py): the library stood in for, and the
    # recording's file name ("" for readings given by hand).
    replay_source = "nvml"
    recording = ""

    def __init__(
        self,
        devices: list[Record],
        driver: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.devices = devices
        self.driver = driver
        self.calls: list[str] = []
        self.clock = clock
        self.started = clock()
        # Where the energy counter counts from (None: nvmlInit). A real board counts from
        # the driver's load, so ``load_replay`` takes the boot (monotonic 0): a restarted
        # exporter reads the counter on, not from 0.
        self.energy_origin: float | None = None
        self.sleep = time.sleep  # how an event wait passes its time
        self._delivered: set[tuple[int, int]] = set()  # (card position, event position)
        self._lock = threading.Lock()

    def nvmlInit(self) -> None:  # noqa: N802
        self.calls.append("nvmlInit")
        self.started = self.clock()
        if not self.driver:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Record:  # noqa: N802
        return self.devices[index]

    def nvmlDeviceGetMinorNumber(self, handle: Record) -> int:  # noqa: N802
        if handle.get("minor_number") is None:
            raise NVMLError_NotSupported("Not Supported")
        return cast(int, handle["minor_number"])

    def nvmlDeviceGetPciInfo(self, handle: Record) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(busId=handle["bus_id"].encode())

    def nvmlDeviceGetName(self, handle: Record) -> str:  # noqa: N802
        if not handle.get("name"):
            raise NVMLError_NotSupported("Not Supported")
        return cast(str, handle["name"])

    def nvmlDeviceGetUUID(self, handle: Record) -> str:  # noqa: N802
        if not handle.get("uuid"):
            raise NVMLError_NotSupported("Not Supported")
        return cast(str, handle["uuid"])

    def nvmlDeviceGetUtilizationRates(self, handle: Record) -> SimpleNamespace:  # noqa: N802
        self.calls.append("nvmlDeviceGetUtilizationRates")
        if handle.get("utilization_gpu_percent") is None:  # a card in MIG mode: N/A
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(gpu=handle["utilization_gpu_percent"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: Record,  # noqa: N802
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

    def nvmlDeviceGetPowerUsage(self, handle: Record) -> int:  # noqa: N802
        if handle.get("power_milliwatts") is None:
            raise NVMLError_NotSupported("Not Supported")
        return cast(int, handle["power_milliwatts"])


    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Record) -> int:  # noqa: N802
        # A device recorded with "energy_counter": false is a pre-Volta board without one.
        if handle.get("power_milliwatts") is None or handle.get("energy_counter") is False:
            raise NVMLError_NotSupported("Not Supported")
        origin = self.started if self.energy_origin is None else self.energy_origin
        counted = handle["power_milliwatts"] * (self.clock() - origin)
        return cast(int, round(handle.get("energy_millijoules", 0) + counted))


    def nvmlDeviceGetTotalEccErrors(self, handle: Record, error_type: int,  # noqa: N802
                                    counter_type: int) -> int:
        ecc = handle.get("ecc_volatile")
        if ecc is None or counter_type != self.NVML_VOLATILE_ECC:
            raise NVMLError_NotSupported("Not Supported")
        return cast(int, ecc["corrected" if error_type == self.NVML_MEMORY_ERROR_TYPE_CORRECTED
                             else "uncorrected"])

    # MIG: a card recorded with "mig" is in MIG mode; its MIG devices are handles of
    # their own ({"mig_device": ..., "card": ...}).

    def nvmlDeviceGetMigMode(self, handle: Record) -> list[int]:  # noqa: N802
        if "mig" not in handle:
            raise NVMLError_NotSupported("Not Supported")
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Record) -> int:  # noqa: N802
        if "mig" not in handle:
            raise NVMLError_NotSupported("Not Supported")
        return cast(int, handle["mig"]["max_devices"])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Record, index: int) -> Record:  # noqa: N802
        for device in handle.get("mig", {}).get("devices", []):
            if device["index"] == index:
                return {**device, "card": handle}
        raise NVMLError_NotFound("Not Found")

    def nvmlDeviceGetGpuInstanceId(self, handle: Record) -> int:  # noqa: N802
        return cast(int, handle["gpu_instance"])

    def nvmlDeviceGetComputeInstanceId(self, handle: Record) -> int:  # noqa: N802
        return cast(int, handle["compute_instance"])

    def nvmlDeviceGetAttributes(self, handle: Record) -> SimpleNamespace:  # noqa: N802
        if "gpu_instance_slices" not in handle:
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(
            multiprocessorCount=handle.get("multiprocessors", 0),
            gpuInstanceSliceCount=handle["gpu_instance_slices"],
            computeInstanceSliceCount=handle["compute_instance_slices"],
            memorySizeMB=handle["memory_total_bytes"] // MIB,
        )

    # The performance monitor: a sample is where and when; the metric between two is the
    # recorded activity of that GPU instance.

    def nvmlGpmQueryDeviceSupport(self, handle: Record) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(version=1, isSupportedDevice=int(bool(handle.get("gpm"))))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(card=None, gpu_instance=None, at=None)

    def nvmlGpmSampleFree(self, sample: SimpleNamespace) -> None:  # noqa: N802
        sample.card = None

    def nvmlGpmMigSampleGet(self, handle: Record, gpu_instance: int,  # noqa: N802
                            sample: SimpleNamespace) -> SimpleNamespace:
        if not handle.get("gpm"):
            raise NVMLError_NotSupported("Not Supported")
        sample.card, sample.gpu_instance, sample.at = handle, gpu_instance, self.clock()
        return sample

    def nvmlGpmMetricsGet(self, query: _GpmQuery) -> _GpmQuery:  # noqa: N802
        first, second = query.sample1, query.sample2
        if first.card is not second.card or first.gpu_instance != second.gpu_instance:
            raise NVMLError("Invalid Argument")
        device: dict[str, Any] = next((d for d in first.card["mig"]["devices"]
                       if d["gpu_instance"] == first.gpu_instance), {})
        for metric in query.metrics[:query.numMetrics]:
            value = device.get("gpm_graphics_util_percent")
            if metric.metricId == self.NVML_GPM_METRIC_GRAPHICS_UTIL and value is not None:
                metric.value, metric.nvmlReturn = float(value), 0
            else:
                metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
        return query

    # XID events: each recorded event once, when its time has come.

    def nvmlEventSetCreate(self) -> list[Record]:  # noqa: N802
        return []

    def nvmlDeviceRegisterEvents(self, handle: Record, types: int,  # noqa: N802
                                 event_set: list[Record]) -> None:
        if types & self.nvmlEventTypeXidCriticalError:
            event_set.append(handle)

    def nvmlEventSetFree(self, event_set: list[Record]) -> None:  # noqa: N802
        event_set.clear()

    def nvmlEventSetWait_v2(self, event_set: list[Record], timeout_ms: int  # noqa: N802
                            ) -> SimpleNamespace:
        due = []
        for c, card in enumerate(event_set):
            for e, event in enumerate(card.get("xid_events", [])):
                if (c, e) not in self._delivered:
                    due.append((self.started + event["after_seconds"], c, e, card, event))
        due.sort(key=lambda d: d[:3])
        wait = timeout_ms / 1000
        if due and due[0][0] - self.clock() <= wait:
            at, c, e, card, event = due[0]
            self.sleep(max(at - self.clock(), 0.0))
            with self._lock:
                self._delivered.add((c, e))
            gi = event.get("gpu_instance")
            return SimpleNamespace(device=card, eventType=self.nvmlEventTypeXidCriticalError,
                                   eventData=event["xid"],
                                   gpuInstanceId=NO_INSTANCE if gi is None else gi,
                                   computeInstanceId=NO_INSTANCE)
        self.sleep(wait)
        raise NVMLError_Timeout("Timeout")


def load_replay(path: str | pathlib.Path) -> ReplayNvml:
    """A replaying NVML from a JSON file of recorded device readings."""
    replay = ReplayNvml(json.loads(pathlib.Path(path).read_text())["devices"])
    replay.energy_origin = 0.0  # Linux's monotonic clock counts from the boot
    replay.recording = pathlib.Path(path).name
    return replay
