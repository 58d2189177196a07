"""An amdsmi-compatible stand-in that replays recorded AMD GPU readings.

For machines without an AMD GPU (the demo stack, tests): ``jobs-exporter --amdsmi-replay
FILE`` serves the readings in FILE (a JSON ``{"devices": [...]}`` such as
fixtures/exporter/amdsmi/replay.json, derived from real amd-smi output) through the calls
the exporter makes on AMD's ``amdsmi`` binding, by the same names and with the same return
shapes (dicts as ``py-interface/amdsmi_interface.py`` builds them, ``"N/A"`` where the
library has no value), raising its own AmdSmiLibraryException as the binding does for
what the recording does not hold. Readings are constant; the energy accumulator is the
recorded power times the time since ``amdsmi_init``, counted in ticks of the recorded
``counter_resolution`` (µJ), as a board drawing that power would count it.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any, cast

# One recorded device (a handle) or reading, as the recording's JSON holds it.
Record = dict[str, Any]

AMDSMI_STATUS_NOT_SUPPORTED = 2  # amdsmi_status_t values the replay raises
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int, what: str = ""):
        self.err_code = err_code
        super().__init__(f"Error code:\n\t{err_code} {what}".rstrip())


class ReplayAmdSmi:
    """Serves ``devices`` (dicts as in replay.json) as processor handles, in their order."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    # What jobs_exporter_replay_info says (registry.py): the library stood in for, and the
    # recording's file name ("" for readings given by hand).
    replay_source = "amdsmi"
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
        # Where the accumulator counts from (None: amdsmi_init); ``load_replay`` takes the
        # boot, as the driver's counter does, so a restarted exporter reads it on.
        self.energy_origin: float | None = None

    def amdsmi_init(self, flag: Any = None) -> None:
        self.calls.append("amdsmi_init")
        self.started = self.clock()
        if not self.driver:
            raise AmdSmiLibraryException(AMDSMI_STATUS_DRIVER_NOT_LOADED, "driver not loaded")

    def amdsmi_shut_down(self) -> None:
        self.calls.append("amdsmi_shut_down")

    def amdsmi_get_processor_handles(self) -> list[Record]:
        return list(self.devices)

    @staticmethod
    def _recorded(handle: Record, key: str) -> Any:
        value = handle.get(key)
        if value is None:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED, f"{key} not recorded")
        return value

    def amdsmi_get_gpu_device_bdf(self, handle: Record) -> str:
        return cast(str, self._recorded(handle, "bdf"))

    def amdsmi_get_gpu_device_uuid(self, handle: Record) -> str:
        return cast(str, self._recorded(handle, "uuid"))

    def amdsmi_get_gpu_asic_info(self, handle: Record) -> Record:
        return dict(self._recorded(handle, "asic_info"))

    def amdsmi_get_gpu_enumeration_info(self, handle: Record) -> Record:
        return dict(self._recorded(handle, "enumeration_info"))

    def amdsmi_get_gpu_kfd_info(self, handle: Record) -> Record:
        return dict(self._recorded(handle, "kfd_info"))

    def amdsmi_get_gpu_compute_partition(self, handle: Record) -> str:
        return cast(str, self._recorded(handle, "compute_partition"))

    def amdsmi_get_gpu_activity(self, handle: Record) -> Record:
        self.calls.append("amdsmi_get_gpu_activity")
        return dict(self._recorded(handle, "activity"))

    def amdsmi_get_gpu_vram_usage(self, handle: Record) -> Record:
        return dict(self._recorded(handle, "vram_usage"))

    def amdsmi_get_power_info(self, handle: Record, sensor_ind: int = 0) -> Record:
        return dict(self._recorded(handle, "power_info"))

    def amdsmi_get_gpu_total_ecc_count(self, handle: Record) -> Record:
        """The RAS totals: ``correctable_count``, ``uncorrectable_count`` (and
        ``deferred_count`` in newer releases), as recorded."""
        return dict(self._recorded(handle, "total_ecc_count"))

    def amdsmi_get_gpu_process_list(self, handle: Record) -> list[Record]:
        return [dict(p) for p in handle.get("process_list", [])]

    def amdsmi_get_energy_count(self, handle: Record) -> Record:
        """The board's recorded power counted since ``amdsmi_init``, in ticks."""
        energy = self._recorded(handle, "energy_count")
        power = self._recorded(handle, "power_info")
        watts = next((power[k] for k in ("socket_power", "current_socket_power",
                                         "average_socket_power")
                      if isinstance(power.get(k), int | float)), None)
        if watts is None:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED, "no power recorded")
        resolution = energy["counter_resolution"]
        origin = self.started if self.energy_origin is None else self.energy_origin
        elapsed = self.clock() - origin
        ticks = round((energy.get("energy_microjoules", 0) + watts * elapsed * 1e6) / resolution)
        return {
            "power": ticks,  # the accumulator's name before ROCm 6.4, kept beside it
            "energy_accumulator": ticks,
            "counter_resolution": resolution,
            "timestamp": round(elapsed * 1e9),
        }


def load_replay(path: str | pathlib.Path) -> ReplayAmdSmi:
    """A replaying amdsmi from a JSON file of recorded device readings."""
    replay = ReplayAmdSmi(json.loads(pathlib.Path(path).read_text())["devices"])
    replay.energy_origin = 0.0  # Linux's monotonic clock counts from the boot
    replay.recording = pathlib.Path(path).name
    return replay
