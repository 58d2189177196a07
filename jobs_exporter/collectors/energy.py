"""Node energy (RAPL, hwmon, BMC, GPUs) and its split among the jobs (jobs_exporter/energy.py).

Sources are detected once, at the first scrape; none found: no energy series at all (a
missing source is absent, never 0). Counters are read once per scrape; the BMC is asked
by its own thread (jobs_exporter/bmc.py) and the last reading is used with its age. The split
needs the previous scrape, so the first one only takes the baseline.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from jobs_exporter import bmc, cgroupfs, energy, hwmon, powercap
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.scrape import ScrapedJob, each
from jobs_exporter.settings import Settings

log = logging.getLogger(__name__)
_USER_HZ = os.sysconf("SC_CLK_TCK")
# A restored snapshot older than this starts a new baseline: RAPL's package counter wraps
# every ~20 min at 200 W (max_energy_range_uj: 262 kJ), and twice is undetectable.
MAX_GAP = 600.0


@dataclass
class _Sample:
    """Cumulative readings of one scrape."""

    at: float
    zones: dict[str, int]  # zone path -> energy_uj
    meter_uj: int | None  # hwmon power_meter energy counter
    meter_watts: float | None  # hwmon power_meter or BMC power
    gpus: dict[int, float]  # GPU index -> joules
    busy_ticks: int
    jobs_cpu: dict[str, float] = field(default_factory=dict)


class EnergyCollector:
    name = "energy"

    def __init__(self, context: CollectorContext):
        self.context = context
        self.clock = time.monotonic
        self.bmc: bmc.BmcPoller | None = None
        self._started = False
        self._zones: list[powercap.Zone] = []
        self._meter: list[hwmon.Sensor] = []
        self._previous: _Sample | None = None
        self._node: dict[str, float] = {}  # source -> joules since the exporter started
        # job id -> (source, GPU index or "") -> joules: a job's GPU joules are kept per
        # GPU, so the report reads one figure per card and their sum is the job's "gpu"
        self._jobs: dict[str, dict[tuple[str, str], float]] = {}
        self._unattributed = 0.0
        self._restored: dict[str, Any] | None = None  # the previous sample of a snapshot
        self._cores = 0
        self._used_memory = 0

    def _start(self) -> None:
        self._started = True
        settings = self.context.settings
        if settings.energy == "off":
            return
        self._zones = powercap.discover_zones(settings.powercap_root)
        sensors = hwmon.discover_sensors(settings.hwmon_root)
        self._meter = [s for s in sensors if s.chip == hwmon.NODE_METER_CHIP][:1]
        if self.bmc is None and settings.bmc != "off":
            self.bmc = _make_poller(settings)
            self.bmc.start()
        log.info(
            "energy sources: %d RAPL zone(s) %s, node meter %s",
            len(self._zones),
            sorted({z.kind for z in self._zones}),
            "BMC " + settings.bmc if self.bmc else (self._meter[0].path if self._meter else "none"),
        )

    def _has_meter(self) -> bool:
        return self.bmc is not None or bool(self._meter)

    def collect(self, jobs: Iterable[ScrapedJob]) -> Iterator[Metric]:
        if not self._started:
            self._start()
        gpus = dict(self.context.gpu_energy)
        if not (self._zones or self._has_meter() or gpus):
            return
        jobs = [j for j in jobs if not j.gone]
        sample = self._read_node(gpus)
        shares: list[energy.JobInterval] = []
        if self._restored is not None:
            self._previous = self._restored_sample()
        previous = self._previous
        for job, (cpu, memory) in each(jobs, self._read_job):
            seconds = cpu.user_seconds + cpu.system_seconds
            sample.jobs_cpu[job.job_id] = seconds
            if previous is None:
                continue
            before = previous.jobs_cpu.get(job.job_id, 0.0)  # new job: started in the interval
            shares.append(
                energy.JobInterval(
                    job_id=job.job_id,
                    cpu_seconds=max(seconds - before, 0.0),
                    memory_bytes=float(memory.rss),
                    cores=len(cpu.cpuset) if cpu.cpuset else 1,
                    gpus=self.context.gpu_allocations.get(job.job_id, ()),
                )
            )
        if previous is not None:
            self._account(previous, sample, shares)
        self._previous = sample
        self._jobs = {j: v for j, v in self._jobs.items() if j in sample.jobs_cpu}
        yield from self._families()

    def snapshot(self) -> dict[str, Any]:
        """The sums and the readings they were last taken from (jobs_exporter/state.py): zones
        by their path under the powercap root (a replay's copy moves), the time as wall
        clock (the monotonic one restarts with the process)."""
        previous = self._previous
        root = self.context.settings.powercap_root
        return {
            "node": self._node,
            "unattributed": self._unattributed,
            "jobs": {job_id: [[source, gpu, joules] for (source, gpu), joules in parts.items()]
                     for job_id, parts in self._jobs.items()},
            "previous": None if previous is None else {
                "at": time.time() - (self.clock() - previous.at),
                "zones": {os.path.relpath(path, root): uj for path, uj in previous.zones.items()},
                "meter_uj": previous.meter_uj, "meter_watts": previous.meter_watts,
                "gpus": {str(i): j for i, j in previous.gpus.items()},
                "busy_ticks": previous.busy_ticks, "jobs_cpu": previous.jobs_cpu,
            },
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """The state of ``snapshot``. The first scrape then splits everything the counters
        counted since among the jobs (by their CPU time since, as over any interval),
        unless the snapshot is older than ``MAX_GAP``: a RAPL counter may have wrapped more
        than once since, so the sums go on from a new baseline."""
        self._node = {k: float(v) for k, v in data["node"].items()}
        self._unattributed = float(data["unattributed"])
        self._jobs = {job_id: {(source, gpu): float(j) for source, gpu, j in parts}
                      for job_id, parts in data["jobs"].items()}
        self._restored = data.get("previous")  # a _Sample at the first scrape

    def _restored_sample(self) -> _Sample | None:
        p, self._restored = self._restored, None
        if p is None or time.time() - p["at"] > MAX_GAP:
            return None
        root = self.context.settings.powercap_root
        return _Sample(
            at=self.clock() - (time.time() - p["at"]),
            zones={os.path.join(root, rel): int(uj) for rel, uj in p["zones"].items()},
            meter_uj=p["meter_uj"], meter_watts=p["meter_watts"],
            gpus={int(i): float(j) for i, j in p["gpus"].items()},
            busy_ticks=int(p["busy_ticks"]), jobs_cpu=dict(p["jobs_cpu"]),
        )

    def _read_job(self, job: ScrapedJob) -> tuple[cgroupfs.CpuUsage, cgroupfs.MemoryUsage]:
        """What the cpu and memory collectors read this scrape, else read here."""
        cpu = self.context.cpu_usage.get(job.job_id) or cgroupfs.read_cpu(job.cgroup)
        memory = self.context.memory_usage.get(job.job_id) or cgroupfs.read_memory(job.cgroup)
        return cpu, memory

    def _read_node(self, gpus: dict[int, float]) -> _Sample:
        root = self.context.settings.proc_root
        try:
            with open(os.path.join(root, "stat")) as f:
                busy, self._cores = energy.parse_proc_stat(f.read())
            with open(os.path.join(root, "meminfo")) as f:
                self._used_memory = energy.parse_meminfo_used(f.read())
        except FileNotFoundError:  # a captured tree without them: shares among jobs only
            busy, self._cores, self._used_memory = 0, 0, 0
        meter_uj = meter_watts = None
        if self.bmc is not None:
            reading = self.bmc.latest()
            meter_watts = reading.watts if reading else None
        elif self._meter:
            value = hwmon.read_micro(self._meter[0].path)
            if self._meter[0].kind == "energy":
                meter_uj = value
            else:
                meter_watts = value / 1e6
        zones = {z.path: powercap.read_energy_uj(z.path) for z in self._zones}
        return _Sample(self.clock(), zones, meter_uj, meter_watts, gpus, busy)

    def _account(
        self, before: _Sample, now: _Sample, shares: list[energy.JobInterval]
    ) -> None:
        joules = {"package": 0.0, "dram": 0.0}
        for zone in self._zones:
            if zone.path not in before.zones:  # a snapshot of a node with other zones
                continue
            delta = energy.counter_delta(
                before.zones[zone.path], now.zones[zone.path], zone.max_range_uj
            )
            joules[zone.kind] += delta / 1e6
        gpu = {i: max(j - before.gpus.get(i, j), 0.0) for i, j in now.gpus.items()}
        meter = self._meter_joules(before, now)
        node = energy.NodeInterval(
            package_joules=joules["package"],
            dram_joules=joules["dram"],
            meter_joules=meter,
            gpu_joules=gpu,
            busy_cpu_seconds=(now.busy_ticks - before.busy_ticks) / _USER_HZ,
            used_memory_bytes=self._used_memory,
            cores=self._cores,
        )
        result = energy.attribute(node, shares)
        present = self._present()
        totals = {"package": node.package_joules, "dram": node.dram_joules,
                  "gpu": sum(gpu.values()), "meter": meter or 0.0}
        for source in present["node"]:
            self._node[source] = self._node.get(source, 0.0) + totals[source]
        gpus_of = {j.job_id: j.gpus for j in shares if j.gpus}
        for job_id, by_source in result.jobs.items():
            # A job without GPUs has no GPU energy, not 0 J of it: on a node whose only
            # source is its GPUs, such a job's energy is unknown and its series absent.
            sources = [s for s in present["job"] if s != "gpu" or job_id in gpus_of]
            if not sources:
                continue
            mine = self._jobs.setdefault(job_id, {})
            for source in sources:
                labels = self.context.gpu_labels
                parts = ({("gpu", labels.get(i, str(i))): gpu.get(i, 0.0)
                          for i in gpus_of[job_id]}
                         if source == "gpu" else {(source, ""): by_source[source]})
                for key, part in parts.items():
                    mine[key] = mine.get(key, 0.0) + part
        self._unattributed += result.unattributed_joules

    def _meter_joules(self, before: _Sample, now: _Sample) -> float | None:
        if not self._has_meter():
            return None
        if now.meter_uj is not None and before.meter_uj is not None:
            return max(now.meter_uj - before.meter_uj, 0) / 1e6
        if now.meter_watts is None:
            return None  # no BMC answer yet: the parts stand for the node
        watts = now.meter_watts
        if before.meter_watts is not None and self.bmc is None:
            watts = (watts + before.meter_watts) / 2  # trapezoid between two hwmon samples
        return watts * (now.at - before.at)

    def _present(self) -> dict[str, list[str]]:
        kinds = {z.kind for z in self._zones}
        node: list[str] = [k for k in ("package", "dram") if k in kinds]
        job = (["cpu"] if "package" in kinds else []) + (["dram"] if "dram" in kinds else [])
        if self.context.gpu_energy:
            node.append("gpu")
            job.append("gpu")
        if self._has_meter():
            node.append("meter")
            job.append("other")
        return {"node": node, "job": job}

    def _families(self) -> Iterator[Metric]:
        jobs = CounterMetricFamily(
            "jobs_energy_joules",
            "Energy attributed to the job on this node by source (cpu: RAPL package by CPU "
            "time share, dram: by memory share, gpu: its GPUs, other: the rest of the node "
            "meter by allocated cores), in joules; gpu per GPU (its gpu label, as jobs_gpu_*).",
            labels=["jobid", "source"],
        )
        for job_id, by_source in sorted(self._jobs.items()):
            for (source, gpu), value in sorted(by_source.items()):
                # a gpu label on the GPU series only (add_metric would give every series one)
                labels = {"jobid": job_id, "source": source} | ({"gpu": gpu} if gpu else {})
                jobs.samples.append(Sample("jobs_energy_joules_total", labels, value))
        node = CounterMetricFamily(
            "jobs_node_energy_joules",
            "Energy the node measured since the exporter started, by source (package, dram: "
            "RAPL; gpu: all GPUs; meter: BMC or ACPI power meter), in joules.",
            labels=["source"],
        )
        for source, value in sorted(self._node.items()):
            node.add_metric([source], value)
        idle = CounterMetricFamily(
            "jobs_node_unattributed_energy_joules",
            "Share of the node meter's energy falling to cores no job was allocated, in joules.",
        )
        if self._has_meter():
            idle.add_metric([], self._unattributed)
        yield from (jobs, node, idle)
        if self.bmc is not None:
            reading = self.bmc.latest()
            power = GaugeMetricFamily(
                "jobs_node_power_watts", "Last node power reading of the BMC, in watts.",
                labels=["source"],
            )
            age = GaugeMetricFamily(
                "jobs_node_power_reading_age_seconds",
                "Seconds since the BMC gave the power reading served.",
                labels=["source"],
            )
            if reading is not None:
                power.add_metric(["bmc"], reading.watts)
                age.add_metric(["bmc"], max(self.clock() - reading.at, 0.0))
            yield from (power, age)




def _make_poller(settings: Settings) -> bmc.BmcPoller:
    if settings.bmc == "redfish":
        auth = ""
        if settings.redfish_auth_file:
            with open(settings.redfish_auth_file) as f:
                auth = f.read().strip()
        url = settings.redfish_url

        def ask() -> str:
            return bmc.fetch_redfish(url, auth)
    else:
        argv = bmc.COMMANDS[settings.bmc]

        def ask() -> str:
            return bmc.run_command(argv)

    return bmc.BmcPoller(ask, bmc.PARSERS[settings.bmc], settings.bmc_interval)
