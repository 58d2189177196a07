"""GPU readings of the GPUs Slurm allocated to each job (allocation, not running processes).

Allocation comes only from what Slurm wrote (jobs_exporter/gpu_alloc.py: the prolog's file, the
v1 devices cgroup, then scontrol, once per job), never from the job's own environment. Slurm's
indexes and the cgroup's device numbers both lead to devices known by PCI bus id and device
file (jobs_exporter/gpu_inventory.py), NVIDIA (NVML) and AMD (amdsmi) alike; each allocated
GPU's identity is ``jobs_gpu_info``. A card in MIG mode is its MIG devices, each a GPU of its
own (``gpu="<card minor>/<GPU instance>"``). Bad allocation data drops that job's GPU series
and nothing else. Without a GPU driver the collector disables itself with one log line and
reports nothing.

Faults are the card's, shown on every job holding it (or a MIG device of it): its memory
error counts and its XID events by code. A code the exporter sees on a GPU for the first
time is shown at 0 in that scrape and at its count from the next: Prometheus' increase()
takes a series that is born at 1 for no increase, which would hide the job's first XID.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from jobs_exporter import cgroupfs, gpu_alloc, gpu_amd, gpu_nvidia
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.gpu_inventory import Gpus, Reader
from jobs_exporter.scrape import ScrapedJob

log = logging.getLogger(__name__)

_FAMILIES = (
    (
        "jobs_gpu_utilization_ratio",
        "Fraction of time the GPU was busy over the last sample period.",
    ),
    ("jobs_gpu_memory_used_bytes", "GPU memory in use on the allocated GPU, in bytes."),
    ("jobs_gpu_memory_total_bytes", "Total memory of the allocated GPU, in bytes."),
    ("jobs_gpu_power_watts", "Power drawn by the allocated GPU, in watts; a MIG device's "
     "or AMD partition's is an estimate, its share of its card's (jobs_gpu_info power_share)."),
)
_INFO_LABELS = ["jobid", "gpu", "vendor", "model", "uuid", "pci_bus_id", "device", "profile",
                "parent_uuid", "power_share"]


# scontrol talks to slurmctld: a few new jobs per scrape, and a pause after a failure, so
# a burst of job starts or a controller outage cannot stall scrapes.
SCONTROL_PER_SCRAPE = 4
SCONTROL_RETRY_SECONDS = 60.0


class GpuCollector:
    name = "gpu"

    def __init__(self, context: CollectorContext):
        self.context = context
        self._gpus: Gpus | None = None
        self._started = False
        # job id -> allocated GPU indexes; fixed for a job's lifetime, so each job is
        # resolved once. A job not here is resolved again at the next scrape.
        self._allocations: dict[str, tuple[int, ...]] = {}
        self._run_scontrol = context.scontrol or gpu_alloc.run_scontrol
        self._scontrol_after = 0.0  # monotonic time before which scontrol is not retried
        self._scontrol_left = 0
        self._xid_shown: set[tuple[int, int]] = set()  # (GPU index, code) shown at 0

    def _start(self) -> Gpus | None:
        self._started = True
        settings = self.context.settings
        if settings.gpus == "off":
            return None
        readers: list[Reader] = []
        nvml = self.context.nvml or gpu_nvidia.load_nvml()
        if nvml is not None:
            readers.append(gpu_nvidia.Nvml(nvml, order=settings.gpu_order,
                                           proc_root=settings.proc_root))
        smi = self.context.amdsmi or gpu_amd.load_amdsmi()
        if smi is not None:
            readers.append(gpu_amd.AmdSmi(smi, order=settings.gpu_order))
        gpus = Gpus(readers, settings.gpu_order)
        if not gpus.start():
            log.info("GPU collector disabled: no NVIDIA (NVML) or AMD (amdsmi) GPU driver")
            return None
        return gpus

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        if not self._started:
            self._gpus = self._start()
        if self._gpus is None:
            return
        gpus = self._gpus
        jobs = [j for j in jobs if not j.gone]  # found ended by an earlier collector
        families = [GaugeMetricFamily(n, h, labels=["jobid", "gpu"]) for n, h in _FAMILIES]
        info = GaugeMetricFamily(
            "jobs_gpu_info",
            "The allocated GPU's identity (1): vendor, model, UUID, PCI bus id and the "
            "device file Slurm names; gpu is Slurm's index of it on the node (a MIG "
            "device: card minor/GPU instance, with its profile and its card's UUID); "
            "power_share: the share of its card's power and energy it reports, an "
            "estimate (empty: its own readings).",
            labels=_INFO_LABELS,
        )
        ecc = CounterMetricFamily(
            "jobs_gpu_ecc_errors",
            "Memory errors the allocated GPU's card counted since its driver loaded "
            "(NVIDIA volatile ECC, AMD RAS), by type: corrected or uncorrected.",
            labels=["jobid", "gpu", "type"],
        )
        xid = CounterMetricFamily(
            "jobs_gpu_xid_errors",
            "XID events the allocated GPU's card (or its MIG GPU instance) reported since "
            "the exporter started, by XID code; a code new to the GPU is 0 for one scrape.",
            labels=["jobid", "gpu", "xid"],
        )
        self._scontrol_left = SCONTROL_PER_SCRAPE
        allocations = {}
        for job in jobs:
            found = self._allocations.get(job.job_id)
            if found is None:
                found = self._allocation(job)
            if found is not None:
                allocations[job.job_id] = found
        self._allocations = allocations  # forgets jobs no longer discovered
        energy = self._energy()
        shown: set[tuple[int, int]] = set()
        energy_family = CounterMetricFamily(
            "jobs_gpu_energy_joules",
            "Energy counter of the allocated GPU (since the driver loaded; or its power "
            "integrated over time; a MIG device's or AMD partition's share of its "
            "card's, an estimate), in joules.",
            labels=["jobid", "gpu"],
        )
        for job in jobs:
            for index in allocations.get(job.job_id, ()):
                try:
                    reading = gpus.read(index)
                except gpus.errors as exc:  # e.g. GPU fell off the bus
                    log.warning("GPU %d of job %s unreadable: %s", index, job.job_id, exc)
                    continue
                if reading is None:
                    continue  # not a GPU of this node
                labels = [job.job_id, gpus.labels[index]]
                device = gpus.devices[index]
                mig = device.mig
                info.add_metric(labels + [device.vendor, device.model, device.uuid,
                                          device.bus_id, device.path or "",
                                          mig.profile if mig else "",
                                          mig.parent_uuid if mig else "",
                                          device.power_share], 1)
                self._faults(index, labels, ecc, xid, shown)
                values = (
                    reading.utilization_ratio,
                    reading.memory_used_bytes,
                    reading.memory_total_bytes,
                    reading.power_watts,
                )
                for family, value in zip(families, values, strict=True):
                    if value is not None:
                        family.add_metric(labels, value)
                if index in energy:
                    energy_family.add_metric(labels, energy[index])
        self._xid_shown |= shown
        yield from families
        yield energy_family
        yield info
        yield ecc
        yield xid

    def _faults(self, index: int, labels: list[str], ecc: CounterMetricFamily,
                xid: CounterMetricFamily,
                shown: set[tuple[int, int]]) -> None:
        """The card's memory errors and XIDs on one job's series of GPU ``index``."""
        assert self._gpus is not None
        gpus = self._gpus
        try:
            corrected, uncorrected = gpus.memory_errors(index)
        except gpus.errors as exc:
            log.warning("GPU %d memory errors unreadable: %s", index, exc)
            corrected = uncorrected = None
        for kind, count in (("corrected", corrected), ("uncorrected", uncorrected)):
            if count is not None:
                ecc.add_metric(labels + [kind], count)
        for code, count in sorted(gpus.xid_errors(index).items()):
            first = (index, code) not in self._xid_shown
            if first:
                shown.add((index, code))
            xid.add_metric(labels + [str(code)], 0 if first else count)

    def _energy(self) -> dict[int, float]:
        """Every GPU's energy in joules, shared with the energy collector (it splits the
        node's meter, which includes unallocated GPUs too)."""
        assert self._gpus is not None
        energy = {}
        for index in self._gpus.devices:
            try:
                joules = self._gpus.energy_joules(index)
            except self._gpus.errors as exc:
                log.warning("GPU %d energy unreadable: %s", index, exc)
                continue
            if joules is not None:
                energy[index] = joules
        self.context.gpu_energy = energy
        self.context.gpu_allocations = dict(self._allocations)
        self.context.gpu_labels = dict(self._gpus.labels)
        return energy

    def _allocation(self, job: ScrapedJob) -> tuple[int, ...] | None:
        """The job's GPUs by Slurm's index; None when no source could tell yet (asked
        again next scrape)."""
        assert self._gpus is not None
        settings = self.context.settings
        try:
            found = gpu_alloc.read_allocation_file(settings.gpu_alloc_dir, job.job_id)
            if found is None:
                text = cgroupfs.read_devices_list(job.cgroup)
                numbers = (None if text is None else
                           gpu_alloc.parse_devices_list(text, self._gpus.caps_majors))
                if numbers is not None:
                    return self._indexes_of(job.job_id, numbers)
            if found is None:
                found = self._ask_scontrol(job.job_id)
        except ValueError as exc:  # bad data stays bad: remembered as no GPUs
            log.warning(
                "job %s: GPU allocation not understood (%s); no GPU series", job.job_id, exc
            )
            return ()
        except cgroupfs.GONE:
            return None  # the job ended meanwhile
        return found

    def _indexes_of(self, job_id: str, numbers: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
        """The GPUs whose device files the job's devices cgroup allows. A file no GPU's
        driver reports (a minor number NVML cannot tell) is no GPU: never a position; a
        MIG card's own file, which all its MIG devices' jobs are allowed, is none either."""
        assert self._gpus is not None
        known, shared = self._gpus.numbers, self._gpus.shared
        unknown = [f"{major}:{minor}" for major, minor in numbers
                   if (major, minor) not in known and (major, minor) not in shared]
        if unknown:
            log.warning("job %s: devices %s match no GPU's device file", job_id, unknown)
        return tuple(sorted(known[n] for n in numbers if n in known))

    def _ask_scontrol(self, job_id: str) -> tuple[int, ...] | None:
        settings = self.context.settings
        now = time.monotonic()
        if not settings.scontrol or self._scontrol_left <= 0 or now < self._scontrol_after:
            return None
        self._scontrol_left -= 1
        argv = [settings.scontrol, "-d", "show", "job", job_id]
        try:
            text = self._run_scontrol(argv)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning(
                "scontrol for job %s failed (%s); retrying in %.0f s",
                job_id,
                exc,
                SCONTROL_RETRY_SECONDS,
            )
            self._scontrol_after = now + SCONTROL_RETRY_SECONDS
            return None
        return gpu_alloc.parse_scontrol_gpus(text, job_id, settings.effective_node_name)
