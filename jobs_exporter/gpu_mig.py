"""NVIDIA MIG: a card in MIG mode is allocated by slice, so each MIG device is a GPU.

With ``nvmlDeviceGetMigMode`` current mode enabled, the card itself is no GPU of Slurm's:
its MIG devices are (Slurm's gres types ``1g.10gb``, ``3g.40gb``, ... by their profiles).
Each is found with ``nvmlDeviceGetMigDeviceHandleByIndex`` up to
``nvmlDeviceGetMaxMigDeviceCount`` (an empty position raises NOT_FOUND) and described by
``nvmlDeviceGetGpuInstanceId`` / ``nvmlDeviceGetComputeInstanceId``, its name
(``NVIDIA H100 80GB HBM3 MIG 1g.10gb``: the profile), UUID and ``nvmlDeviceGetAttributes``
(compute slices of the GPU and of the compute instance).

Readings: memory is the MIG device's own (``nvmlDeviceGetMemoryInfo`` of its handle).
NVML has no utilisation for a MIG device (``nvmlDeviceGetUtilizationRates`` is not
supported), so it comes from the GPU performance monitoring engine where the card has one
(Hopper and later: ``nvmlGpmMigSampleGet`` of the card and GPU instance, then
``nvmlGpmMetricsGet`` with ``NVML_GPM_METRIC_GRAPHICS_UTIL`` over the time between two
scrapes; none on a first scrape or on Ampere). Power and energy are the card's only: each
MIG device reports its compute share of them (slices / the card's
``nvmlDeviceGetMaxMigDeviceCount``), an estimate (``jobs_gpu_info{power_share}``).

Device files: ``/dev/nvidia-caps/nvidia-cap<N>`` of the GPU and compute instance, numbered
in ``/proc/driver/nvidia-caps/mig-minors`` (``gpu0/gi2/access 21``, ``gpu0/gi2/ci0/access
22``; ``gpu<N>`` is the card's minor number), major ``nvidia-caps`` in ``/proc/devices``,
as Slurm's AutoDetect reads them. Without those files (a replay, no permission) the MIG
devices have no device file and Slurm's index is mapped in PCI bus id order.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any

from jobs_exporter.gpu_devices import GpuDevice, MigSlice

log = logging.getLogger(__name__)

MIG_MINORS = "driver/nvidia-caps/mig-minors"
_MINOR_LINE = re.compile(r"^gpu(\d+)/gi(\d+)(?:/ci(\d+))?/access (\d+)$")
_PROFILE = re.compile(r"\bMIG ((?:\d+c\.)?\d+g\.\d+gb(?:\+\w+)*)$")
_MAX_TEXT = 1 << 20  # mig-minors lists 32 GPUs x 15 instances x 9 files in ~100 KiB
NVML_SUCCESS = 0


@dataclass(frozen=True)
class MigCaps:
    """The capability files' numbers: major, and (card minor, GI, CI or None) -> minor."""

    major: int | None = None
    minors: dict[tuple[int, int, int | None], int] = field(default_factory=dict)


def parse_mig_minors(text: str) -> dict[tuple[int, int, int | None], int]:
    """``/proc/driver/nvidia-caps/mig-minors`` as (card minor, GI, CI or None) -> minor.

    ``gpu0/gi2/access 21``
    ``gpu0/gi2/ci0/access 22``
    """
    out = {}
    for line in text.splitlines():
        match = _MINOR_LINE.match(line.strip())
        if match:
            card, gi, ci, minor = match.groups()
            out[(int(card), int(gi), None if ci is None else int(ci))] = int(minor)
    return out


def parse_caps_major(text: str) -> int | None:
    """The character device major of ``nvidia-caps`` in ``/proc/devices``.

    ``195 nvidia``
    ``508 nvidia-caps``
    """
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == "nvidia-caps" and fields[0].isdigit():
            return int(fields[0])
    return None


def read_mig_caps(proc_root: str) -> MigCaps:
    """The node's capability numbers; empty when the driver shows none (or no MIG)."""
    texts = []
    for name in ("devices", MIG_MINORS):
        try:
            with open(os.path.join(proc_root, name), encoding="ascii", errors="replace") as f:
                texts.append(f.read(_MAX_TEXT))
        except OSError:
            texts.append("")
    return MigCaps(parse_caps_major(texts[0]), parse_mig_minors(texts[1]))


def profile_of(name: str) -> str:
    """``NVIDIA H100 80GB HBM3 MIG 1g.10gb`` -> ``1g.10gb`` (``1c.3g.40gb``: one compute
    instance of a 3g.40gb GPU instance); "" when the name has none."""
    match = _PROFILE.search(name.strip())
    return match.group(1) if match else ""


def enabled(nv: Any, handle: Any) -> bool:
    """Whether the card is in MIG mode now (a card without MIG raises NotSupported)."""
    try:
        return bool(nv.nvmlDeviceGetMigMode(handle)[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
    except nv.NVMLError:
        return False


@dataclass(frozen=True)
class MigHandle:
    """What reading a MIG device needs: its handle and its card's."""

    handle: Any
    card: Any
    gpu_instance: int
    share: float


def slices(nv: Any, card: Any, device: GpuDevice, caps: MigCaps
           ) -> list[tuple[GpuDevice, MigHandle]]:
    """The MIG devices of a card in MIG mode (``device``: the card, as jobs_exporter/gpu_nvidia.py
    describes it)."""
    card_slices = nv.nvmlDeviceGetMaxMigDeviceCount(card)
    out = []
    for position in range(card_slices):
        try:
            handle = nv.nvmlDeviceGetMigDeviceHandleByIndex(card, position)
        except nv.NVMLError:
            continue  # NOT_FOUND: no MIG device there
        try:
            gi = nv.nvmlDeviceGetGpuInstanceId(handle)
            ci = nv.nvmlDeviceGetComputeInstanceId(handle)
            attributes = nv.nvmlDeviceGetAttributes(handle)
        except nv.NVMLError as exc:
            log.warning("MIG device %d of GPU %s unreadable (%s): left out", position,
                        device.bus_id, exc)
            continue
        minor = device.minor
        mig = MigSlice(
            parent_uuid=device.uuid,
            parent_minor=minor,
            gpu_instance=gi,
            compute_instance=ci,
            profile=profile_of(_optional(nv, nv.nvmlDeviceGetName, handle)),
            slices=attributes.computeInstanceSliceCount,
            gi_slices=attributes.gpuInstanceSliceCount,
            card_slices=card_slices,
            caps_major=caps.major,
            gi_minor=None if minor is None else caps.minors.get((minor, gi, None)),
            ci_minor=None if minor is None else caps.minors.get((minor, gi, ci)),
        )
        slice_device = GpuDevice(vendor=device.vendor, model=device.model,
                                 uuid=_optional(nv, nv.nvmlDeviceGetUUID, handle),
                                 bus_id=device.bus_id, minor=None, mig=mig)
        out.append((slice_device, MigHandle(handle, card, gi, mig.share)))
    return out


def _optional(nv: Any, call: Any, handle: Any) -> str:
    try:
        value = call(handle)
    except nv.NVMLError:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


class GpmUtilization:
    """Graphics engine activity of MIG devices from the card's performance monitor,
    over the time between two readings (the first reading of a device has none)."""

    def __init__(self, nv: Any):
        self.nv = nv
        self._samples: dict[tuple[int, int], Any] = {}  # (card id, GI) -> last sample
        self._supported: dict[int, bool] = {}

    def supported(self, card: Any) -> bool:
        key = id(card)
        if key not in self._supported:
            try:
                found = bool(self.nv.nvmlGpmQueryDeviceSupport(card).isSupportedDevice)
            except (self.nv.NVMLError, AttributeError):  # an older driver or binding
                found = False
            if not found:
                log.info("no GPU performance monitoring on this card: no MIG utilisation")
            self._supported[key] = found
        return self._supported[key]

    def ratio(self, mig: MigHandle) -> float | None:
        """Fraction of time the graphics/compute engine was busy since the last call."""
        nv = self.nv
        if not self.supported(mig.card):
            return None
        sample = nv.nvmlGpmSampleAlloc()
        try:
            nv.nvmlGpmMigSampleGet(mig.card, mig.gpu_instance, sample)
        except nv.NVMLError:
            nv.nvmlGpmSampleFree(sample)
            raise
        key = (id(mig.card), mig.gpu_instance)
        previous, self._samples[key] = self._samples.get(key), sample
        if previous is None:
            return None
        query = nv.c_nvmlGpmMetricsGet_t()
        query.version = nv.NVML_GPM_METRICS_GET_VERSION
        query.numMetrics = 1
        query.sample1, query.sample2 = previous, sample
        query.metrics[0].metricId = nv.NVML_GPM_METRIC_GRAPHICS_UTIL
        try:
            nv.nvmlGpmMetricsGet(query)
        finally:
            nv.nvmlGpmSampleFree(previous)
        metric = query.metrics[0]
        if metric.nvmlReturn != NVML_SUCCESS:
            return None
        return max(0.0, min(float(metric.value) / 100.0, 1.0))
