"""The collectors that run, and JobsCollector: discovers jobs once per scrape, then times
each collector; one failing collector is logged and reported as success=0, never fails
the scrape.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import logging
import pwd
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from prometheus_client.core import GaugeMetricFamily, Metric

from jobs_exporter import cgroupfs
from jobs_exporter.cgroup_files import OpenFiles
from jobs_exporter.collectors.context import CollectorContext
from jobs_exporter.collectors.cpu import CpuCollector
from jobs_exporter.collectors.energy import EnergyCollector
from jobs_exporter.collectors.gpu import GpuCollector
from jobs_exporter.collectors.io import IoCollector
from jobs_exporter.collectors.memory import MemoryCollector
from jobs_exporter.collectors.pressure import PressureCollector
from jobs_exporter.collectors.processes import ProcessesCollector
from jobs_exporter.collectors.scratch import ScratchCollector
from jobs_exporter.collectors.steps import StepsCollector
from jobs_exporter.collectors.waits import WaitCollector
from jobs_exporter.proc_reader import ProcReader, fd_budget
from jobs_exporter.scrape import ScrapedJob
from jobs_exporter.settings import Settings
from jobs_exporter.state import StateFile, Stateful

log = logging.getLogger(__name__)

COLLECTORS = (
    CpuCollector,
    MemoryCollector,
    ProcessesCollector,
    IoCollector,
    ScratchCollector,
    GpuCollector,
    PressureCollector,
    StepsCollector,
    WaitCollector,
    EnergyCollector,  # after GpuCollector, whose GPU energy readings it splits
)

Discover = Callable[[str, str, str], list[cgroupfs.Job]]


@runtime_checkable
class Replay(Protocol):
    """Recorded readings played back in place of hardware the node lacks (nvml_replay,
    amdsmi_replay, powercap_replay): what they stand in for and the recording's file."""

    replay_source: str  # "nvml", "amdsmi" or "powercap"
    recording: str


class JobsCollector:
    """A prometheus_client collector producing every ``jobs_*`` family of one scrape."""

    def __init__(
        self,
        settings: Settings,
        collectors: Sequence[type] = COLLECTORS,
        nvml: Any = None,
        amdsmi: Any = None,
        discover: Discover | None = None,
        user_name: Callable[[int], str] | None = None,
        scontrol: Callable[[Sequence[str]], str] | None = None,
        replays: Sequence[Replay] = (),
    ):
        self.settings = settings
        # Readings played back, not measured, say so in every scrape (_replay_info): their
        # series are otherwise a real card's. ``replays``: those not given as a GPU library
        # (the powercap replay, a copied tree under settings.powercap_root).
        gpu_replays = [] if settings.gpus == "off" else [
            r for r in (nvml, amdsmi) if isinstance(r, Replay)]
        self.replays = [*gpu_replays, *replays]
        self.node_name = settings.effective_node_name
        processes, cgroup_files = fd_budget()
        self.procs = ProcReader(settings.proc_root, cache=settings.fd_cache, max_cached=processes)
        # Kept-open cgroup files, with the same switch as the /proc fd cache.
        self.cgroup_files = OpenFiles(cgroup_files) if settings.fd_cache else None
        context = CollectorContext(
            settings=settings, procs=self.procs, nvml=nvml, amdsmi=amdsmi, scontrol=scontrol
        )
        self.collectors = [cls(context) for cls in collectors]
        # SLUID directory -> job id, learnt once per job (cgroupfs.JobIds), for both steps.
        self.job_ids = cgroupfs.JobIds()
        self.discover = discover or functools.partial(
            cgroupfs.discover_jobs, job_ids=self.job_ids, walks=cgroupfs.Walks())
        self._lock = threading.Lock()  # the HTTP server is threaded; the fd cache is not
        self._user_name = user_name or _passwd_name
        self._users: dict[int, str] = {}
        self._unreadable_logged: set[str] = set()  # logged once while they exist
        self._unreadable_seen: set[str] = set()  # found by the previous scrape
        # The sums the exporter adds up itself, kept across its restart (jobs_exporter/state.py).
        self.state = StateFile(settings.state_file) if settings.state_file else None
        if self.state is not None:
            saved = self.state.load()
            for collector in self._stateful():
                if collector.name in saved:
                    try:
                        collector.restore(saved[collector.name])
                    except (KeyError, TypeError, ValueError) as exc:
                        log.error("state of %s not used (%s): its sums start now",
                                  collector.name, exc)

    def _stateful(self) -> list[Stateful]:
        return [c for c in self.collectors if isinstance(c, Stateful)]

    def save_state(self) -> None:
        """Write the collectors' sums now (a clean stop; the scrapes write them too)."""
        if self.state is not None:
            with self._lock:
                self.state.save({c.name: c.snapshot() for c in self._stateful()})

    def close(self) -> None:
        """Close every kept-open file (the collector keeps working, reopening them)."""
        with self._lock:
            self.procs.close()
            if self.cgroup_files is not None:
                self.cgroup_files.close()

    def describe(self) -> list[Metric]:
        return []  # families vary with the jobs present; don't scrape at registration

    def collect(self) -> Iterator[Metric]:
        with _cycle_collector_paused():
            with self._lock:
                families = self._scrape()
                if self.state is not None and self.state.due():
                    self.state.save({c.name: c.snapshot() for c in self._stateful()})
            # The exposition is written between these yields. Each family is let go
            # once written, so none is left when the collector runs again: one left,
            # its ~30,000 samples were traversed by a collection at every scrape
            # (0.4 ms a scrape on average, 2.6 ms at most: gc.callbacks on the 64 jobs
            # of bench/bench_exporter.py).
            while families:
                yield families.pop(0)

    def _scrape(self) -> list[Metric]:
        duration = GaugeMetricFamily(
            "jobs_scrape_collector_duration_seconds",
            "Time the collector took in the last scrape, in seconds.",
            labels=["collector"],
        )
        success = GaugeMetricFamily(
            "jobs_scrape_collector_success",
            "1 when the collector succeeded in the last scrape, 0 when it failed.",
            labels=["collector"],
        )
        out: list[Metric] = []

        def run(name: str, step: Callable[[], list[Metric]]) -> None:
            start = time.perf_counter()
            try:
                out.extend(step())
                ok = 1
            except Exception:
                log.exception("collector %s failed", name)
                ok = 0
            duration.add_metric([name], time.perf_counter() - start)
            success.add_metric([name], ok)

        jobs: list[ScrapedJob] = []

        def discovery() -> list[Metric]:
            found = self.discover(
                self.settings.cgroup_root, self.settings.proc_root, self.node_name
            )
            if self.cgroup_files is not None:
                found = [dataclasses.replace(j, files=self.cgroup_files) for j in found]
            jobs.extend(ScrapedJob(j, self.procs) for j in found)
            return [self._info(found), self._unreadable()]

        run("discovery", discovery)

        def proc() -> list[Metric]:
            pids = [pid for job in jobs for pid in job.pids]
            stale_count = self.procs.refresh(pids, self.settings.scrape_budget)
            stale = GaugeMetricFamily(
                "jobs_scrape_stale_processes",
                "Job processes not read in this scrape (time budget spent); "
                "their previous sample was reported.",
            )
            stale.add_metric([], stale_count)
            return [stale]

        run("procfs", proc)
        for collector in self.collectors:

            def collect(c: Any = collector) -> list[Metric]:
                return list(c.collect(jobs))

            run(collector.name, collect)
        gone = {job.job_id for job in jobs if job.gone}
        if gone:  # ended mid-scrape: drop what collectors read before, jobs_info included
            for family in out:
                family.samples = [s for s in family.samples if s.labels.get("jobid") not in gone]
        if self.cgroup_files is not None:  # close the files of jobs that ended
            self.cgroup_files.retain(self._file_dirs(jobs))
        if self.replays:
            out.append(self._replay_info())
        out.extend((duration, success))
        return out

    def _replay_info(self) -> GaugeMetricFamily:
        """One series per replay; none on a node measuring its hardware (no family)."""
        family = GaugeMetricFamily(
            "jobs_exporter_replay_info",
            "Readings this exporter plays back from a recording instead of measuring "
            "them (test and demo stacks), by the library or files they stand in for "
            "and the recording's file name; always 1.",
            labels=["source", "recording"],
        )
        for replay in sorted(self.replays, key=lambda r: (r.replay_source, r.recording)):
            family.add_metric([replay.replay_source, replay.recording], 1)
        return family

    def _unreadable(self) -> GaugeMetricFamily:
        """Job-level cgroup directories not read as jobs: an unknown layout, or a Slurm 26.05
        SLUID whose job id no slurmstepd tells."""
        family = GaugeMetricFamily(
            "jobs_exporter_unreadable_cgroups",
            "Directories in this node's Slurm cgroup root that the exporter cannot read as "
            "jobs (their jobs are missing from every series), by layout.",
            labels=["layout"],
        )
        found = cgroupfs.find_unreadable(
            self.settings.cgroup_root, self.settings.proc_root, self.node_name, self.job_ids
        )
        counts: dict[str, int] = {}
        logged = set()
        for item in found:
            counts[item.layout] = counts.get(item.layout, 0) + 1
            # A SLUID directory has no slurmstepd for a moment while its job starts or
            # ends: an error only when a second scrape in a row finds no id for it.
            if item.layout == "v2-sluid" and item.path not in self._unreadable_seen:
                log.debug("cgroup %s: no slurmstepd tells its job id yet", item.path)
                continue
            logged.add(item.path)
            if item.path not in self._unreadable_logged:
                hint = (" (a Slurm 26.05 SLUID: no slurmstepd in its step_*/slurm cgroups "
                        "tells its job id; CgroupJobIdPaths=yes in cgroup.conf names it "
                        "job_<id>)" if item.layout == "v2-sluid" else "")
                log.error("cannot read cgroup %s as a job%s", item.path, hint)
        self._unreadable_logged = logged
        self._unreadable_seen = {item.path for item in found}
        for layout, count in sorted(counts.items()):
            family.add_metric([layout], count)
        return family

    @staticmethod
    def _file_dirs(jobs: list[ScrapedJob]) -> set[str]:
        return {d for job in jobs if not job.gone for d in job.cgroup.dirs.values()}

    def _info(self, jobs: list[cgroupfs.Job]) -> GaugeMetricFamily:
        info = GaugeMetricFamily(
            "jobs_info",
            "Identity of a job running on this node; always 1.",
            labels=["jobid", "user", "uid"],
        )
        for job in jobs:
            uid = "" if job.uid is None else str(job.uid)
            info.add_metric([job.job_id, self._user(job.uid), uid], 1)
        return info

    def _user(self, uid: int | None) -> str:
        if uid is None:
            return ""
        if uid not in self._users:
            try:
                self._users[uid] = self._user_name(uid)
            except KeyError:  # no passwd entry (e.g. LDAP down): show the number, retry later
                return str(uid)
        return self._users[uid]


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one scrape and its exposition.

    A scrape of 2,000 processes allocates ~100,000 short-lived objects and no reference
    cycles (a profile: 636 objects found in 891 collections), so the collections it
    triggers free nothing and only add pauses: p95 67 -> 50 ms in bench/bench_exporter.py.
    Reference counting still frees everything; the collector runs again afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _passwd_name(uid: int) -> str:
    return pwd.getpwuid(uid).pw_name
