"""The ``sacct`` source: run the CLI through an injectable runner and parse ``--parsable2``.

Everything sacct prints is untrusted text. ``parse_sacct`` is pure and groups the records
(``webapp.sources.sacct_records``: whole whatever line breaks job text holds) into jobs
and steps, reading each field with the parsers of ``webapp.sources.sacct_values``
(re-exported here); only ``SacctSource`` runs a process (argv list, no shell, with a timeout).
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, tzinfo
from functools import lru_cache
from operator import itemgetter
from typing import Any, TypedDict

# The value parsers are re-exported: callers import them from here too.
from jobreport_common.slurm_values import gpus_from_tres, parse_tres
from webapp.model import JobId, JobNotFound, SacctJob, SourceUnavailable, Step, TimeLimitKind
from webapp.sources.sacct_records import (
    delimiter_argv,
    delimiter_of,
    glue_column,
    new_delimiter,
    split_records,
)
from webapp.sources.sacct_values import (
    parse_alloc_memory,
    parse_memory,
    parse_nodelist,
    parse_req_mem,
    parse_sacct_duration,
    parse_sacct_state,
    parse_time,
    parse_time_limit,
)

log = logging.getLogger(__name__)

# What SacctSource asks for. JobIDRaw finds an array task by its own numeric id;
# NNodes multiplies old per-node ReqMem ("100Gn"); NTasks scales per-task MaxRSS;
# MaxRSSNode names the node that held the largest task.
FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "ExitCode",
    "Elapsed", "Timelimit", "TotalCPU", "AllocCPUS", "NNodes", "NTasks", "ReqMem", "MaxRSS",
    "AllocTRES", "Start", "End", "NodeList", "WorkDir", "MaxRSSNode", "QOS",
)  # fmt: skip

# What the report asks when the accounting view answered: its tres_alloc holds what
# AllocTRES would add (GPUs, memory, billing), and asking for any TRES column costs sacct a
# second request to slurmdbd (the TRES names): ~190 ms instead of ~100 ms on the stack.
# The view's qos column holds what QOS would add, which costs sacct a request of its own
# (the QoS names: sacct's print.c, slurmdb_qos_get).
FIGURE_FIELDS = tuple(f for f in FIELDS if f not in ("AllocTRES", "QOS"))

# A job list's: no free text (the list takes names from the accounting view), no QoS.
LIST_FIELDS = tuple(f for f in FIELDS if f not in ("JobName", "WorkDir", "QOS"))

# Added to a report's sacct call under JOBREPORT_GPU_METRICS=tres (``SacctSource(gpu_tres=
# True)``): each step's usage TRES, where Slurm's gpu plugin records gres/gpuutil and
# gres/gpumem (webapp.report.gpu_from_tres). Asked for only then: like AllocTRES, a TRES column
# costs sacct its second request to slurmdbd. A capture without them reads as absent.
GPU_TRES_FIELDS: tuple[str, ...] = ("TRESUsageInAve", "TRESUsageInTot", "TRESUsageInMax")

Runner = Callable[[list[str]], str]

# sacct column aliases (case-insensitive): NCPUS is AllocCPUS under another name.
_ALIASES = {"ncpus": "alloccpus"}


def _columns(fields: Sequence[str]) -> dict[str, int]:
    cols: dict[str, int] = {}
    for i, f in enumerate(fields):
        key = f.strip().lower()
        cols.setdefault(_ALIASES.get(key, key), i)
    return cols


class _Columns:
    """Indexes of the columns a header named; -1 (a trailing "") when absent."""

    # Set by name in __init__; declared here for the type checker.
    jobid: int
    jobidraw: int
    jobname: int
    user: int
    account: int
    partition: int
    state: int
    exitcode: int
    elapsed: int
    timelimit: int
    timelimitraw: int
    totalcpu: int
    alloccpus: int
    nnodes: int
    ntasks: int
    reqmem: int
    maxrss: int
    alloctres: int
    start: int
    end: int
    nodelist: int
    workdir: int
    maxrssnode: int
    tresusageinave: int
    tresusageintot: int
    tresusageinmax: int
    qos: int

    def __init__(self, fields: Sequence[str]) -> None:
        cols = _columns(fields)
        self.n = len(fields)
        for name in (
            "jobid", "jobidraw", "jobname", "user", "account", "partition", "state",
            "exitcode", "elapsed", "timelimit", "timelimitraw", "totalcpu", "alloccpus",
            "nnodes", "ntasks", "reqmem", "maxrss", "alloctres", "start", "end", "nodelist",
            "workdir", "maxrssnode", "tresusageinave", "tresusageintot", "tresusageinmax",
            "qos",
        ):  # fmt: skip
            setattr(self, name, cols.get(name, -1))
        if self.jobid < 0:
            self.jobid = self.jobidraw  # `-o jobidraw,...` (jobstats) names jobs only that way
        # A job name may itself contain the delimiter; the extra pieces are glued back there.
        self.glue = glue_column(fields)
        # One C-level call per line fetches every column a job or a step line needs.
        self.job = itemgetter(
            self.jobid, self.jobname, self.user, self.account, self.partition, self.state,
            self.exitcode, self.elapsed, self.timelimit, self.alloccpus, self.nnodes,
            self.reqmem, self.alloctres, self.start, self.end, self.nodelist, self.workdir,
            self.timelimitraw, self.totalcpu, self.maxrss, self.qos,
        )  # fmt: skip
        self.step = itemgetter(
            self.jobname, self.state, self.exitcode, self.elapsed, self.totalcpu, self.maxrss,
            self.alloccpus, self.nodelist, self.ntasks, self.maxrssnode,
            self.tresusageinave, self.tresusageintot, self.tresusageinmax,
        )  # fmt: skip


@lru_cache(maxsize=1024)
def _tres_facts(text: str) -> tuple[int, int | None, float | None]:
    """(GPUs, memory bytes, billing) of an AllocTRES string; job shapes repeat, so this is
    cached."""
    if not text:
        return 0, None, None
    tres = parse_tres(text)
    billing = tres.get("billing")
    return (gpus_from_tres(tres), parse_alloc_memory(tres.get("mem", "")),
            float(billing) if billing else None)


# SacctJob's positional fields up to ``steps``, and the keyword fields a line gives.
_JobFields = tuple[
    str, str | None, str | None, str | None, str | None, str, str, float | None,
    float | None, int | None, int | None, int, datetime | None, datetime | None, str,
    str | None,
]  # fmt: skip


class _JobExtra(TypedDict, total=False):
    cancelled_by: int | None
    time_limit_kind: TimeLimitKind | None
    alloc_cpu_seconds: float | None
    alloc_max_rss_bytes: int | None
    billing: float | None
    qos: str | None


def _job(p: list[str], r: _Columns, tz: tzinfo | None) -> tuple[_JobFields, _JobExtra]:
    """SacctJob's positional fields in order, without ``steps`` (known only at the end),
    and its keyword fields."""
    (job_id, name, user, account, partition, state_text, exit_code, elapsed, timelimit,
     cpus_text, nodes_text, reqmem, tres, start, end, nodelist, workdir,
     limit_raw, total_cpu, rss, qos) = r.job(p)  # fmt: skip
    state, by = parse_sacct_state(state_text)
    cpus = int(cpus_text) if cpus_text else None
    gpus, tres_mem, billing = _tres_facts(tres)
    mem = parse_req_mem(reqmem, cpus, int(nodes_text) if nodes_text else None) if reqmem else None
    kind, limit = parse_time_limit(timelimit, limit_raw)
    return (
        job_id, name or None, user or None, account or None, partition or None, state,
        exit_code, parse_sacct_duration(elapsed), limit, cpus,
        tres_mem if mem is None else mem, gpus,
        parse_time(start, tz), parse_time(end, tz), nodelist, workdir or None,
    ), {
        "cancelled_by": by, "time_limit_kind": kind,
        "alloc_cpu_seconds": parse_sacct_duration(total_cpu),
        "alloc_max_rss_bytes": parse_memory(rss), "billing": billing, "qos": qos or None,
    }  # fmt: skip


def _step(step_id: str, p: list[str], r: _Columns) -> Step:
    (name, state, exit_code, elapsed, total_cpu, rss, cpus, nodelist, tasks, rss_node,
     tres_ave, tres_tot, tres_max) = r.step(p)  # fmt: skip
    return Step(
        step_id,
        name,
        parse_sacct_state(state)[0],
        exit_code,
        parse_sacct_duration(elapsed),
        parse_sacct_duration(total_cpu),
        parse_memory(rss),
        int(cpus) if cpus else None,
        parse_nodelist(nodelist),
        int(tasks) if tasks else None,
        rss_node or None,
        tres_usage_in_ave=tres_ave or None,
        tres_usage_in_tot=tres_tot or None,
        tres_usage_in_max=tres_max or None,
    )


def _group(
    text: str, fields: Sequence[str] | None, delimiter: str, tz: tzinfo | None
) -> list[tuple[str, SacctJob]]:
    """(JobIDRaw, job) pairs in output order; the raw id is "" when not requested."""
    first, _, rest = text.partition("\n")
    if fields is None:
        if not first:
            return []
        fields, text = first.rstrip(delimiter).split(delimiter), rest
    elif [f.lower() for f in first.rstrip(delimiter).split(delimiter)] == [
            f.lower() for f in fields]:
        text = rest  # the header sacct prints without -n
    r = _Columns(fields)
    # Big outputs allocate a few container objects a line and no cycles, yet every young-
    # generation pass would rescan them all (measured: 110k lines/s with, 250k without).
    # So: no collection while splitting and parsing, and the results go straight to the old
    # generation (freeze + unfreeze merges lists, scans nothing) unless someone else uses
    # gc.freeze.
    pause_gc = text.count("\n", 0, 2_000_000) > 5000 and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _group_records(split_records(text, r.n, delimiter, r.glue), r, tz)
    finally:
        if pause_gc:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _group_records(
    records: Iterable[list[str]], r: _Columns, tz: tzinfo | None
) -> list[tuple[str, SacctJob]]:
    jobid, jobidraw = r.jobid, r.jobidraw
    # job id -> [raw id, (fields, cancelled_by) of the allocation line or None, steps]
    groups: dict[str, list[Any]] = {}
    for p in records:
        p.append("")  # absent columns (index -1) read as empty
        job_id, dot, step_id = p[jobid].partition(".")
        try:
            entry = groups.get(job_id)
            if dot:
                step = _step(step_id, p, r)
                if entry is None:
                    # A step whose allocation line is missing still tells us the job exists.
                    entry = groups[job_id] = [p[jobidraw].partition(".")[0], None, []]
                entry[2].append(step)
            else:
                head = _job(p, r, tz)
                if entry is None:
                    groups[job_id] = [p[jobidraw], head, []]
                else:
                    entry[0], entry[1] = p[jobidraw], head
        except ValueError as e:
            log.warning("sacct line for %s skipped: %s", p[jobid], e)
    out = []
    for job_id, (rid, head, steps) in groups.items():
        line: tuple[_JobFields, _JobExtra] = head or _orphan(job_id, steps)
        fields_, extra = line
        out.append((rid, SacctJob(*fields_, tuple(steps), raw_id=rid or None, **extra)))
    return out


def _orphan(job_id: str, steps: list[Step]) -> tuple[_JobFields, _JobExtra]:
    """A job known only from its steps (seen in real captures): the first step speaks for it."""
    first = steps[0]
    fields = (job_id, None, None, None, None, first.state, first.exit_code,
              first.elapsed_seconds, None, first.cpus, None, 0, None, None, "", None)  # fmt: skip
    return fields, {}


def parse_sacct(
    text: str,
    fields: Sequence[str] | None = None,
    *,
    delimiter: str = "|",
    tz: tzinfo | None = None,
) -> tuple[SacctJob, ...]:
    """Jobs, each with its steps, from ``sacct --parsable2`` (or ``-p``) output.

        JobID|JobName|User|...|State|...
        1|busy|alice|...|COMPLETED|...

    ``fields=None`` reads the header from the first line; with ``fields`` a header line
    is optional. Steps (``123.batch``, ``123_4.0``, ``123+0.0``) are grouped under
    their allocation line; array tasks (``123_4``, pending ``123_[5-9]``) and het
    components (``123+1``) are jobs of their own. Unparseable lines are logged and skipped.
    """
    return tuple(job for _, job in _group(text, fields, delimiter, tz))


def run_sacct(argv: list[str], timeout: float = 30.0) -> str:
    """Run sacct (no shell); SourceUnavailable when it is missing, slow or failing."""
    # %s: Unix seconds, so timestamps never depend on this host's zone or DST.
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    try:
        # Bytes, decoded below: text mode would turn a \r in a job name into a line break.
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        raise SourceUnavailable("sacct", f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise SourceUnavailable("sacct", f"no answer within {timeout:g} s") from None
    except OSError as e:
        raise SourceUnavailable("sacct", str(e)) from None
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        why = lines[-1] if lines else "no message"
        raise SourceUnavailable("sacct", f"exit status {proc.returncode}: {why}")
    # Slurm stores job names and paths as the bytes it was given: one Latin-1 byte
    # must cost a replacement character, not the report.
    return proc.stdout.decode("utf-8", "replace")


class SacctSource:
    """Jobs and array tasks as ``sacct`` reports them."""

    name = "sacct"

    def __init__(
        self,
        sacct_path: str = "sacct",
        runner: Runner | None = None,
        timeout: float = 30.0,
        cluster: str | None = None,
        delimiter: str | None = None,
        gpu_tres: bool = False,
    ) -> None:
        self.sacct_path = sacct_path
        self.timeout = timeout
        self.cluster = cluster
        self._runner = runner or (lambda argv: run_sacct(argv, timeout))
        self._delimiter = delimiter
        # A report's columns: with ``gpu_tres`` (JOBREPORT_GPU_METRICS=tres) each step's
        # usage TRES too (GPU_TRES_FIELDS).
        extra = GPU_TRES_FIELDS if gpu_tres else ()
        self.fields: tuple[str, ...] = (*FIELDS, *extra)
        self.figure_fields: tuple[str, ...] = (*FIGURE_FIELDS, *extra)

    def delimiter(self) -> str:
        """The delimiter of the next call: fresh and random, unless the source was made with
        one (a runner replaying captures taken with it)."""
        return self._delimiter or new_delimiter()

    def parsable(self) -> list[str]:
        """Parsable output without a header, with a fresh delimiter (``delimiter_of`` reads
        it back from the argv)."""
        return [self.sacct_path, *delimiter_argv(self.delimiter())]

    def argv(self, job_id: str, fields: Sequence[str] | None = None) -> list[str]:
        # -j alone already widens the window to the epoch (sacct(1), DEFAULT TIME WINDOW);
        # --allusers keeps a non-root caller from being silently limited to its own jobs.
        fields = self.fields if fields is None else fields
        argv = [*self.parsable(), "--allusers", "--format", ",".join(fields), "--jobs", job_id]
        if self.cluster:
            argv += ["--clusters", self.cluster]
        return argv

    def recent_argv(self, since: datetime, user: str | None, account: str | None,
                    fields: Sequence[str] = LIST_FIELDS) -> list[str]:
        """Jobs (with their steps) of one user or account that ran at or after ``since``."""
        # sacct reads --starttime in the local zone, not as Unix seconds.
        start = since.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
        argv = [*self.parsable(), "--format", ",".join(fields), "--starttime", start]
        argv += ["--user", user] if user is not None else ["--allusers", "--accounts",
                                                             str(account)]
        if self.cluster:
            argv += ["--clusters", self.cluster]
        return argv

    def recent(self, since: datetime, user: str | None = None,
               account: str | None = None) -> tuple[SacctJob, ...]:
        """One user's (or one account's) jobs since ``since``: one sacct call for a list."""
        argv = self.recent_argv(since, user, account)
        return tuple(job for _, job in self._run(argv, LIST_FIELDS))

    def _query(self, job_id: str) -> list[tuple[str, SacctJob]]:
        return self._run(self.argv(job_id))

    def _run(self, argv: list[str],
             fields: Sequence[str] | None = None) -> list[tuple[str, SacctJob]]:
        fields = self.fields if fields is None else fields
        return _group(self.run(argv), fields, delimiter_of(argv), None)

    def run(self, argv: list[str]) -> str:
        """Run a sacct command line through this source's runner (its output text)."""
        try:
            return self._runner(argv)
        except SourceUnavailable:
            raise
        except (OSError, subprocess.SubprocessError) as e:
            raise SourceUnavailable("sacct", str(e)) from None

    def job(self, job_id: JobId | str) -> SacctJob:
        """The job ``123``, array task ``123_4`` or het component ``123+1``."""
        return self._one(job_id, self.fields)

    def job_figures(self, job_id: JobId | str) -> SacctJob:
        """``job`` without AllocTRES (FIGURE_FIELDS): for a report whose GPUs, memory and
        billing come from the accounting view; those three read 0 / ReqMem / None here."""
        return self._one(job_id, self.figure_fields)

    def _one(self, job_id: JobId | str, fields: Sequence[str]) -> SacctJob:
        jid = str(JobId.of(job_id))  # refuses anything else before running a command
        found = pick_record(jid, self._run(self.argv(jid, fields), fields), alone=True)
        if found is None:
            raise JobNotFound(jid)
        return found

    def admin_comment(self, job_id: JobId | str) -> str | None:
        """The job's AdminComment (where jobstats keeps its summary); None when sacct does
        not know the job."""
        jid = str(JobId.of(job_id))
        argv = [*self.parsable(), "--allusers", "-X", "--format", "JobID,AdminComment",
                "--jobs", jid] + (["--clusters", self.cluster] if self.cluster else [])
        for record in split_records(self.run(argv), 2, delimiter_of(argv)):
            if record[0] == jid:
                return record[1]
        return None

    def jobs(self, job_ids: Iterable[str], chunk: int = 500) -> dict[str, SacctJob]:
        """Many jobs from one ``sacct -j a,b,c`` per ``chunk`` ids (the sync's batches);
        an id sacct does not know is left out."""
        ids = [str(JobId.of(j)) for j in job_ids]
        out: dict[str, SacctJob] = {}
        for i in range(0, len(ids), chunk):
            part = ids[i : i + chunk]
            rows = self._query(",".join(part))
            for jid in part:
                found = pick_record(jid, rows, alone=len(part) == 1)
                if found is not None:
                    out[jid] = found
        return out

    def array(self, job_id: JobId | str) -> tuple[SacctJob, ...]:
        """Every task of the array job ``123`` (or of the array ``123_4`` belongs to)."""
        return find_array(job_id, lambda jid: (j for _, j in self._query(jid)))


def _with_components(job: SacctJob, rows: list[SacctJob]) -> SacctJob:
    """A het component with every component of its job attached, one line each."""
    head, plus, _ = job.job_id.partition("+")
    if not plus:
        return job
    parts = sorted((j for j in rows if j.job_id.startswith(head + "+")), key=_offset)
    return replace(job, components=tuple(component_line(j) for j in parts))


def _offset(job: SacctJob) -> int:
    offset = job.job_id.partition("+")[2]
    return int(offset) if offset.isdigit() else 2**31


def component_line(job: SacctJob) -> Step:
    """A het component as one line: its allocation, its steps' TotalCPU summed, and the
    largest task's MaxRSS of its steps (``Step`` fields, so every table reads it alike)."""
    cpu = job.total_cpu_seconds
    if cpu is None and not job.steps:
        cpu = job.alloc_cpu_seconds
    try:
        nodes = parse_nodelist(job.node_list) if job.node_list else ()
    except ValueError:
        nodes = ()
    busiest = max((s for s in job.steps if s.max_rss_bytes), default=None,
                  key=lambda s: s.max_rss_bytes or 0)
    return Step(
        job.job_id, job.job_name or "", job.state, job.exit_code, job.elapsed_seconds, cpu,
        busiest.max_rss_bytes if busiest else job.alloc_max_rss_bytes, job.cpus, nodes,
        busiest.tasks if busiest else None, busiest.max_rss_node if busiest else None,
        job.raw_id, job.memory_requested_bytes, job.gpus,
    )


def pick_record(jid: str, rows: list[tuple[str, SacctJob]], alone: bool) -> SacctJob | None:
    """The record ``jid`` names among sacct's rows (``alone``: the only id asked for)."""
    pick: Callable[[str, SacctJob], bool]
    for pick in (
        lambda rid, j: j.job_id == jid,  # as typed
        lambda rid, j: rid == jid,  # an array task's own numeric id (or the array's)
        lambda rid, j: j.job_id == f"{jid}+0",  # a het job is led by component 0
    ):
        found = [j for rid, j in rows if pick(rid, j)]
        if found:
            return _with_components(found[0], [j for _, j in rows])
    # An array whose tasks all have other raw ids: its first task speaks for it, as the
    # accounting source picks it (the lowest task id).
    tasks = sorted(array_tasks(jid, (j for _, j in rows)), key=task_number)
    if tasks:
        return tasks[0]
    return rows[0][1] if alone and len(rows) == 1 else None


def array_tasks(master: str, jobs: Iterable[SacctJob]) -> tuple[SacctJob, ...]:
    prefix = master + "_"
    return tuple(j for j in jobs if j.job_id.startswith(prefix))


def find_array(job_id: JobId | str,
               rows_of: Callable[[str], Iterable[SacctJob]]) -> tuple[SacctJob, ...]:
    """Every task of the array job ``123`` (or of the array ``123_4`` belongs to), in task
    order, from ``rows_of(id)``: a source's jobs for one id (sacct's, slurmrestd's).
    JobNotFound when there is none.

    An id that is a task's own numeric id (JobIDRaw) finds no ``<id>_`` task: it is asked
    again by the one array its rows name. The tasks are sorted, whatever the source's
    order: sacct lists them by index, slurmdbd's REST answer by numeric id (the array's
    own record, its last task, last), and a report must not show one array two ways.
    """
    master = str(JobId.of(job_id).job)
    rows = list(rows_of(master))
    tasks = array_tasks(master, rows)
    if not tasks:
        arrays = {j.job_id.partition("_")[0] for j in rows if "_" in j.job_id}
        if len(arrays) == 1:
            master = arrays.pop()
            tasks = array_tasks(master, rows_of(master))
    if not tasks:
        raise JobNotFound(str(job_id))
    return tuple(sorted(tasks, key=task_number))


def task_number(job: SacctJob) -> tuple[int, str]:
    """Sort key of an array task: ``123_4`` -> 4; pending ranges (``123_[5-9]``) last."""
    task = job.job_id.partition("_")[2]
    return (int(task), "") if task.isdigit() else (2**63, task)
