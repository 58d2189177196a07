"""Slurm job cgroups: discovery and reading. The ONLY module that knows cgroup v1 from v2.

v1 (Debian builds with multiple-slurmd):
    <root>/<controller>/slurm_<NodeName>/uid_<uid>/job_<id>/step_<s>/task_<n>
  falling back to <root>/<controller>/slurm/...; other nodes' slurm_<other> are ignored.
v2 (Slurm >= 22.05, through systemd or, with IgnoreSystemd=yes, made by slurmd itself
at the same place):
    <root>/system.slice/<NodeName>_slurmstepd.scope/<job>/step_<s>/{slurm,user/task_<n>}
  falling back to <root>/system.slice/slurmstepd.scope/...; ``<job>`` is ``job_<id>``
  (Slurm < 26.05, or 26.05 with ``CgroupJobIdPaths=yes``) or the job's SLUID (``s`` + 13
  base-32 characters, 26.05's default), which does not hold the job id: ``JobIds`` takes
  it from the process title of a slurmstepd in one of the job's ``step_<s>/slurm`` leaves
  (``slurmstepd: [<id>.<step>]``) and keeps it while the directory exists. A SLUID whose
  id cannot be found (no slurmstepd there yet, or none readable) is skipped by discovery
  and reported by ``find_unreadable``, as is any other name there.

PIDs are only in leaf cgroups; job-level counters include all children. Job directories
vanish the moment a job ends, so every reader may raise FileNotFoundError (see GONE);
``exists()`` tells that apart from a file missing in a live cgroup, and callers skip a job
that ended. Optional files (absent on some kernels) come back as None. The file reading
is in jobs_exporter/cgroup_files.py, the pure parsers in jobs_exporter/cgroup_parsers.py and
jobs_exporter/procfs.py (the slurmstepd title).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobs_exporter import procfs
from jobs_exporter.cgroup_files import OpenFiles, read, read_optional
from jobs_exporter.cgroup_parsers import (
    parse_cpu_list,
    parse_flat_keyed,
    parse_percpu,
    parse_pids,
    parse_pressure_total,
)

log = logging.getLogger(__name__)

GONE = procfs.GONE
V1_CONTROLLERS = ("cpuacct", "memory", "cpuset", "devices")
PRESSURE_RESOURCES = ("cpu", "memory", "io")
MEMORY_EVENTS = ("oom", "oom_kill", "max", "high")
# v1 reports "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 with 4 KiB pages).
_V1_UNLIMITED = 1 << 62
_NS = 1e-9
_US = 1e-6
_USER_HZ = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Job:
    job_id: str
    uid: int | None
    version: int  # 1 or 2
    dirs: Mapping[str, str]  # v1: controller -> job dir; v2: {"unified": job dir}
    pids: tuple[int, ...]
    # Set by the scrape: the readers below re-read kept-open files through it.
    files: OpenFiles | None = field(default=None, compare=False, repr=False)
    # The ``step_*`` suffixes discovery listed in the job directory it walked (v1: the
    # main controller's); None: not listed, ``read_steps`` lists them itself.
    steps: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Unreadable:
    """A directory where a job's cgroup should be whose layout the exporter cannot read."""

    path: str
    layout: str  # "v2-sluid" | "unknown"


# Slurm 26.05's SLUID ("s" + 13 Crockford base-32 characters, e.g. s4A1M8HY8Z7700)
_SLUID = re.compile(r"s[0-9A-HJKMNP-TV-Z]{13}")
# Directories Slurm itself keeps beside the jobs (v1 slurm_<node>/system, v2 scope/system).
_NOT_JOBS = frozenset({"system"})


@dataclass(frozen=True)
class CpuUsage:
    user_seconds: float
    system_seconds: float
    per_core_seconds: Mapping[int, float] | None  # v1 only
    cpuset: frozenset[int] | None
    throttled_seconds: float | None  # v2 only (needs the cpu controller)


@dataclass(frozen=True)
class MemoryUsage:
    rss: int
    cache: int  # includes shmem (tmpfs, /dev/shm, shared anonymous mappings)
    # None where the kernel's memory.stat has no such line (v1 on 3.10, RHEL 7's)
    shmem: int | None
    mapped_file: int | None
    usage: int
    max_usage: int | None  # v2: memory.peak exists only on kernels >= 6.8
    limit: int | None  # None: unlimited
    events: Mapping[str, int] | None  # v2 only


@dataclass(frozen=True)
class StepUsage:
    """One user step's own cgroup counters (``step_<n>``)."""

    step: str
    user_seconds: float
    system_seconds: float
    rss: int | None  # v1 total_rss, v2 anon; None without the memory controller


# ---------------------------------------------------------------- discovery


class JobIds:
    """The job id of each v2 job directory, by its name.

    ``job_<id>`` says it. A SLUID does not: the id is read from the title of a slurmstepd
    in one of the job's ``step_<s>/slurm`` leaves (any step's: batch, extern or an srun
    step) the first time the directory is seen, and kept, since a SLUID names one job for
    good; ``retain`` drops the names of directories gone. A failed lookup is not kept (the
    next scrape tries again). Anything else has no id.
    """

    def __init__(self) -> None:
        self._by_sluid: dict[str, str] = {}

    @property
    def known(self) -> dict[str, str]:
        """SLUID -> job id of the directories mapped so far (a copy)."""
        return dict(self._by_sluid)

    def job_id(self, name: str, job_dir: str, proc_root: str) -> str | None:
        """The id of the job in ``job_dir`` (named ``name``); None: unknown for now."""
        if name.startswith("job_"):
            return name[4:]
        if not _SLUID.fullmatch(name):
            return None
        found = self._by_sluid.get(name)
        if found is None:
            found = _stepd_job_id(job_dir, proc_root)
            if found is not None:
                self._by_sluid[name] = found
        return found

    def retain(self, names: Iterable[str]) -> None:
        """Forget every SLUID not among ``names`` (its directory is gone: the job ended)."""
        keep = set(names)
        for name in [n for n in self._by_sluid if n not in keep]:
            del self._by_sluid[name]


def _stepd_job_id(job_dir: str, proc_root: str) -> str | None:
    """The job id in the title of a slurmstepd of the job (``step_*/slurm/cgroup.procs``)."""
    for _, step_dir in _scan(job_dir, "step_"):
        try:
            pids = parse_pids(read(f"{step_dir}/slurm/cgroup.procs"))
        except GONE:
            continue  # the step ended, or its slurmstepd has not made its leaf yet
        for pid in pids:
            job_id = procfs.read_stepd_job_id(proc_root, pid)
            if job_id is not None:
                return job_id
    return None


def discover_jobs(
    cgroup_root: str,
    proc_root: str,
    node_name: str,
    job_ids: JobIds | None = None,
    walks: Walks | None = None,
) -> list[Job]:
    """Every running job of this node, with its PIDs. Empty when no Slurm root exists.

    ``job_ids`` keeps the SLUID -> job id mapping between scrapes, ``walks`` each job
    directory's walk (fresh ones: none kept).
    """
    walks = walks if walks is not None else Walks()
    v1_roots = _v1_roots(cgroup_root, node_name)
    if v1_roots:
        return _discover_v1(v1_roots, proc_root, walks)
    scope = _v2_scope(cgroup_root, node_name)
    if scope is None:
        walks.retain(())
        return []
    return _discover_v2(scope, proc_root, job_ids if job_ids is not None else JobIds(), walks)


def find_unreadable(
    cgroup_root: str, proc_root: str, node_name: str, job_ids: JobIds | None = None
) -> list[Unreadable]:
    """Directories in this node's Slurm root that are not a layout ``discover_jobs`` reads,
    or a SLUID whose job id no slurmstepd tells: a job there would otherwise be missing
    from every series without a word."""
    v1_roots = _v1_roots(cgroup_root, node_name)
    if v1_roots:
        main = next(c for c in ("cpuacct", "memory", "cpuset") if c in v1_roots)
        out = []
        for name, path in _scan(v1_roots[main], ""):
            if name in _NOT_JOBS:
                continue
            if not (name.startswith("uid_") and name[4:].isdigit()):
                out.append(Unreadable(path, "unknown"))
                continue
            try:
                out.extend(Unreadable(p, _layout(n)) for n, p in _scan(path, "")
                           if not _is_job_dir(n))
            except GONE:
                continue
        return sorted(out, key=lambda u: u.path)
    scope = _v2_scope(cgroup_root, node_name)
    if scope is None:
        return []
    ids = job_ids if job_ids is not None else JobIds()
    found = []
    for name, path in _scan(scope, ""):
        try:
            if name in _NOT_JOBS or ids.job_id(name, path, proc_root) is not None:
                continue
        except GONE:
            continue  # the job ended
        found.append(Unreadable(path, _layout(name)))
    return sorted(found, key=lambda u: u.path)


def _is_job_dir(name: str) -> bool:
    return name.startswith("job_")


def _layout(name: str) -> str:
    return "v2-sluid" if _SLUID.fullmatch(name) else "unknown"


def _v2_scope(cgroup_root: str, node_name: str) -> str | None:
    for scope in (f"{node_name}_slurmstepd.scope", "slurmstepd.scope"):
        path = f"{cgroup_root}/system.slice/{scope}"
        if os.path.isdir(path):
            return path
    return None


def _v1_roots(cgroup_root: str, node_name: str) -> dict[str, str]:
    for name in (f"slurm_{node_name}", "slurm"):
        roots = {c: f"{cgroup_root}/{c}/{name}" for c in V1_CONTROLLERS}
        roots = {c: p for c, p in roots.items() if os.path.isdir(p)}
        if roots:
            return roots
    return {}


def _scan(path: str, prefix: str) -> list[tuple[str, str]]:
    """(suffix, path) of the subdirectories named ``<prefix><suffix>``."""
    with os.scandir(path) as it:
        return [
            (e.name[len(prefix) :], e.path)
            for e in it
            if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)
        ]


def _discover_v1(roots: dict[str, str], proc_root: str, walks: Walks) -> list[Job]:
    # cpuacct and memory go down to task_N (where the PIDs are); cpuset stops at step_*.
    main = next(c for c in ("cpuacct", "memory", "cpuset") if c in roots)
    jobs = []
    seen = []
    for uid_text, uid_dir in _scan(roots[main], "uid_"):
        try:
            job_dirs = _scan(uid_dir, "job_")
        except GONE:
            continue
        uid = int(uid_text) if uid_text.isdigit() else None
        for job_id, job_dir in job_dirs:
            rel = job_dir[len(roots[main]) + 1 :]
            seen.append(job_dir)
            try:
                pids, steps = walks.leaf_pids(job_dir, proc_root, skip=())
            except GONE:
                continue
            dirs = walks.controllers.get(job_dir)
            if dirs is None or len(dirs) != len(roots):
                # A controller Slurm does not use here (e.g. no cpuset) has no job
                # directory. Found in every controller, they stay till the job ends: not
                # looked for again (a stat each, 0.4 ms a scrape for 64 jobs).
                dirs = {c: f"{root}/{rel}" for c, root in roots.items()}
                dirs = {c: p for c, p in dirs.items() if c == main or os.path.isdir(p)}
                if len(dirs) == len(roots):
                    walks.controllers[job_dir] = dirs
            # read_steps lists the cpuacct directory: reuse this listing only if it was it.
            jobs.append(Job(job_id, uid, 1, dirs, pids, steps=steps if main == "cpuacct" else None))
    walks.retain(seen)
    return sorted(jobs, key=_job_order)


def _discover_v2(scope: str, proc_root: str, job_ids: JobIds, walks: Walks) -> list[Job]:
    entries = [(name, path) for name, path in _scan(scope, "") if name not in _NOT_JOBS]
    job_ids.retain(name for name, _ in entries)
    walks.retain(path for _, path in entries)
    jobs = []
    for name, job_dir in entries:
        try:
            job_id = job_ids.job_id(name, job_dir, proc_root)
            if job_id is None:  # find_unreadable reports it
                log.debug("cgroup %s: no job id (not a job's, or no slurmstepd title read "
                          "yet), skipped in this scrape", job_dir)
                continue
            # step_*/slurm holds slurmstepd itself (root), not the user's processes.
            pids, steps = walks.leaf_pids(job_dir, proc_root, skip=("slurm",))
            uid = _v2_uid(job_dir, proc_root, pids)
        except GONE:
            continue
        jobs.append(Job(job_id, uid, 2, {"unified": job_dir}, pids, steps=steps))
    return sorted(jobs, key=_job_order)


def _v2_uid(job_dir: str, proc_root: str, pids: tuple[int, ...]) -> int | None:
    # The uid is not in a v2 path: take the owner of the job's processes ...
    for pid in pids:
        uid = procfs.read_uid(proc_root, pid)
        if uid is not None:
            return uid
    # ... or, with no readable process, the directory's owner (Slurm may chown it).
    return os.stat(job_dir).st_uid


class Walks:
    """Each job directory's walk (its leaf cgroups and ``step_*`` names), kept between
    scrapes while none of its directories changes.

    A cgroup directory's link count is 2 + its subdirectories (kernfs, as ext4 and tmpfs
    count theirs): a walk is kept only where every directory's count said so when it was
    walked, and used again only while every count is unchanged and every leaf still reads.
    A directory added raises its parent's count; one removed takes its leaves with it (an
    intermediate directory has at least one), so their ``cgroup.procs`` fail and the job is
    walked again. One ``stat`` per directory instead of a listing (a v1 directory lists
    20-30 control files): discovering 64 jobs took 4.4 ms, now 2.6 (median, the tree of
    bench/bench_exporter.py).
    """

    def __init__(self) -> None:
        # job dir -> ((directory, link count) for each, leaves, step suffixes)
        self._walks: dict[str, tuple[tuple[tuple[str, int], ...], tuple[str, ...],
                                     tuple[str, ...]]] = {}
        # v1 job dir (the main controller's) -> controller -> the job's directory in it,
        # once found in every controller in use
        self.controllers: dict[str, dict[str, str]] = {}

    def leaf_pids(
        self, job_dir: str, proc_root: str, skip: tuple[str, ...]
    ) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """(the PIDs of the job's leaf cgroups, the suffixes of its ``step_*``
        directories), from the kept walk where it still holds."""
        walk = self._walks.get(job_dir)
        if walk is not None:
            dirs, leaves, steps = walk
            try:
                if all(os.stat(path).st_nlink == links for path, links in dirs):
                    pids: set[int] = set()
                    for leaf in leaves:
                        pids.update(_read_leaf(leaf, proc_root))
                    return tuple(sorted(pids)), steps
            except GONE:
                pass  # a directory of the walk is gone: walk it again (GONE if the job is)
            del self._walks[job_dir]
        found, kept = _walk(job_dir, proc_root, skip)
        if kept is not None:
            self._walks[job_dir] = kept
        return found

    def __contains__(self, job_dir: object) -> bool:
        return job_dir in self._walks

    def retain(self, job_dirs: Iterable[str]) -> None:
        """Forget the walks of job directories not among ``job_dirs`` (the jobs ended)."""
        keep = set(job_dirs)
        for path in [p for p in self._walks if p not in keep]:
            del self._walks[path]
        for path in [p for p in self.controllers if p not in keep]:
            del self.controllers[path]


def _walk(
    job_dir: str, proc_root: str, skip: tuple[str, ...]
) -> tuple[tuple[tuple[int, ...], tuple[str, ...]],
           tuple[tuple[tuple[str, int], ...], tuple[str, ...], tuple[str, ...]] | None]:
    """((PIDs, step suffixes), the walk to keep: None where a directory's link count is
    not 2 + its subdirectories, a file system that does not count them or a change
    during the walk).

    A directory below the job's that is gone before the walk reaches it (a step ending
    under the walk, what sends a kept walk here) is passed over: its processes have
    exited. Only the job's own directory gone is GONE (the job ended); a job dropped for
    a step's end lost its I/O sums of exited steps with it (seen: 24 MiB read back as 8
    in the middle of a job, on two nodes at once)."""
    pids: set[int] = set()
    steps: tuple[str, ...] = ()
    dirs: list[tuple[str, int]] = []
    leaves: list[str] = []
    counted = True
    stack = [job_dir]
    while stack:
        path = stack.pop()
        try:
            links = os.stat(path).st_nlink
            with os.scandir(path) as it:
                found = [e for e in it if e.is_dir(follow_symlinks=False)]
            subdirs = [e for e in found if e.name not in skip]
            if not subdirs:
                pids.update(_read_leaf(path, proc_root))
        except GONE:
            if path is job_dir:
                raise
            counted = False  # changed under the walk: walked afresh next time
            continue
        counted = counted and links == 2 + len(found)
        dirs.append((path, links))
        if path is job_dir:
            steps = tuple(e.name[5:] for e in subdirs if e.name.startswith("step_"))
        if subdirs:
            stack.extend(e.path for e in subdirs)
        else:
            leaves.append(path)
    result = (tuple(sorted(pids)), steps)
    return result, (tuple(dirs), tuple(leaves), steps) if counted else None


def _read_leaf(path: str, proc_root: str) -> list[int]:
    try:
        return parse_pids(read(f"{path}/cgroup.procs"))
    except FileNotFoundError:
        if not os.path.exists(f"{path}/tasks"):
            raise
    # Only a `tasks` file (some captures): it lists thread ids; fold them into processes.
    out = []
    for tid in parse_pids(read(f"{path}/tasks")):
        tgid = procfs.read_status_field(proc_root, tid, "Tgid")
        if tgid is not None:
            out.append(int(tgid))
    return out


def _job_order(job: Job) -> tuple[int, str]:
    return (int(job.job_id) if job.job_id.isdigit() else 0, job.job_id)


def exists(job: Job) -> bool:
    """Whether every directory of the job's cgroup is still there (False: the job ended)."""
    return all(os.path.isdir(path) for path in job.dirs.values())


# ---------------------------------------------------------------- readers


def read_cpu(job: Job) -> CpuUsage:
    if job.version == 1:
        acct, cpuset = job.dirs.get("cpuacct"), job.dirs.get("cpuset")
        if acct is None:
            raise FileNotFoundError(f"job {job.job_id}: no cpuacct cgroup")
        user_ns = read_optional(f"{acct}/cpuacct.usage_user", job.files)
        if user_ns is not None:
            user = int(user_ns) * _NS
            system = int(read(f"{acct}/cpuacct.usage_sys", job.files)) * _NS
        else:  # kernels before 4.16: only USER_HZ ticks in cpuacct.stat
            ticks = parse_flat_keyed(read(f"{acct}/cpuacct.stat", job.files))
            user, system = ticks["user"] / _USER_HZ, ticks["system"] / _USER_HZ
        percpu = read_optional(f"{acct}/cpuacct.usage_percpu", job.files)
        cpus = read_optional(f"{cpuset}/cpuset.cpus", job.files) if cpuset else None
        return CpuUsage(
            user_seconds=user,
            system_seconds=system,
            per_core_seconds=parse_percpu(percpu) if percpu is not None else None,
            cpuset=parse_cpu_list(cpus) if cpus else None,
            throttled_seconds=None,
        )
    path = job.dirs["unified"]
    stat = parse_flat_keyed(read(f"{path}/cpu.stat", job.files))
    cpus = read_optional(f"{path}/cpuset.cpus.effective", job.files)
    throttled = stat.get("throttled_usec")
    return CpuUsage(
        user_seconds=stat["user_usec"] * _US,
        system_seconds=stat["system_usec"] * _US,
        per_core_seconds=None,  # v2 has no per-core accounting; never estimated
        cpuset=parse_cpu_list(cpus) if cpus else None,
        throttled_seconds=throttled * _US if throttled is not None else None,
    )


def read_memory(job: Job) -> MemoryUsage:
    if job.version == 1:
        path = job.dirs.get("memory")
        if path is None:
            raise FileNotFoundError(f"job {job.job_id}: no memory cgroup")
        stat = parse_flat_keyed(read(f"{path}/memory.stat", job.files))
        limit = int(read(f"{path}/memory.limit_in_bytes", job.files))
        return MemoryUsage(
            rss=stat["total_rss"],  # what sacct reports as MaxRSS; includes children
            cache=stat["total_cache"],
            shmem=stat.get("total_shmem"),
            mapped_file=stat.get("total_mapped_file"),
            usage=int(read(f"{path}/memory.usage_in_bytes", job.files)),
            max_usage=int(read(f"{path}/memory.max_usage_in_bytes", job.files)),
            limit=limit if limit < _V1_UNLIMITED else None,
            events=None,
        )
    path = job.dirs["unified"]
    stat = parse_flat_keyed(read(f"{path}/memory.stat", job.files))
    limit_text = read(f"{path}/memory.max", job.files).strip()
    peak = read_optional(f"{path}/memory.peak", job.files)
    events = parse_flat_keyed(read(f"{path}/memory.events", job.files))
    return MemoryUsage(
        rss=stat["anon"],
        cache=stat["file"],
        shmem=stat.get("shmem"),
        mapped_file=stat.get("file_mapped"),
        usage=int(read(f"{path}/memory.current", job.files)),
        max_usage=int(peak) if peak is not None else None,
        limit=None if limit_text == "max" else int(limit_text),
        events={k: events[k] for k in MEMORY_EVENTS if k in events},
    )


def read_devices_list(job: Job) -> str | None:
    """The job's v1 ``devices.list`` (what Slurm lets it open); None on v2 or without it.

    v2 enforces devices with an eBPF program, which cannot be read back as a list.
    """
    path = job.dirs.get("devices") if job.version == 1 else None
    return read_optional(f"{path}/devices.list", job.files) if path else None


def read_pressure(job: Job) -> dict[str, float] | None:
    """Seconds tasks waited per resource (PSI ``some``); None on v1 or without PSI."""
    if job.version == 1:
        return None
    path = job.dirs["unified"]
    out = {}
    for resource in PRESSURE_RESOURCES:
        text = read_optional(f"{path}/{resource}.pressure", job.files)
        if text is not None:
            out[resource] = parse_pressure_total(text)
    return out or None


def user_step_names(names: Iterable[str]) -> list[str]:
    """The user's srun steps among a job's ``step_*`` suffixes, when labelling pays.

    Slurm's own steps (batch, extern, interactive) are left out: the job's series already
    hold them. A job with a single user step gets none (its step series would repeat the
    job's); it has more than one when two exist at once or when one is numbered 1 or up
    (step 0 came before it): steps usually run one after another and a step's cgroup goes
    when it ends, so this tells it without remembering earlier scrapes.

        ["batch", "extern", "0"] -> []
        ["batch", "extern", "3"] -> ["3"]
    """
    steps = sorted((n for n in names if n.isdigit()), key=int)
    if len(steps) > 1 or (steps and int(steps[0]) > 0):
        return steps
    return []


def read_steps(job: Job) -> list[StepUsage]:
    """The job's user steps (see ``user_step_names``) with their own CPU and memory."""
    if job.version == 1:
        acct, mem = job.dirs.get("cpuacct"), job.dirs.get("memory")
        if acct is None:
            return []
    else:
        acct = mem = job.dirs["unified"]
    listed = job.steps if job.steps is not None else (name for name, _ in _scan(acct, "step_"))
    names = user_step_names(listed)
    out = []
    for name in names:
        try:
            out.append(_read_step(job, name, acct, mem))
        except FileNotFoundError:
            if os.path.isdir(job.dirs.get("cpuacct", acct) if job.version == 1 else acct):
                continue  # the step ended between listing and reading; the job runs on
            raise
    return out


def _read_step(job: Job, name: str, acct: str, mem: str | None) -> StepUsage:
    step = f"step_{name}"
    if job.version == 1:
        user = int(read(f"{acct}/{step}/cpuacct.usage_user", job.files)) * _NS
        system = int(read(f"{acct}/{step}/cpuacct.usage_sys", job.files)) * _NS
        rss = None
        if mem is not None:
            rss = parse_flat_keyed(read(f"{mem}/{step}/memory.stat", job.files))["total_rss"]
        return StepUsage(name, user, system, rss)
    stat = parse_flat_keyed(read(f"{acct}/{step}/cpu.stat", job.files))
    memory = read_optional(f"{acct}/{step}/memory.stat", job.files)
    return StepUsage(name, stat["user_usec"] * _US, stat["system_usec"] * _US,
                     parse_flat_keyed(memory)["anon"] if memory is not None else None)
