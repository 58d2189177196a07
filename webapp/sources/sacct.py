"""The ``sacct`` source: run the CLI through an injectable runner and parse ``--parsable2``.

Everything sacct prints is untrusted text. The parsers below are pure; only
``SacctSource`` runs a process (argv list, no shell, with a timeout).

Times: sacct prints local wall-clock time without a zone (``2024-04-04T19:29:45``), or
Unix seconds when ``SLURM_TIME_FORMAT=%s``. The default runner sets ``%s`` so no
daylight-saving guess is ever needed; text in ISO form is read as local time (or the
``tz`` given) and converted to UTC.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from operator import itemgetter

from webapp.model import JobId, JobNotFound, SacctJob, SourceUnavailable, Step

log = logging.getLogger(__name__)

# What SacctSource asks for. JobIDRaw finds an array task by its own numeric id;
# NNodes multiplies old per-node ReqMem ("100Gn"); NTasks scales per-task MaxRSS.
FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "State", "ExitCode",
    "Elapsed", "Timelimit", "TotalCPU", "AllocCPUS", "NNodes", "NTasks", "ReqMem", "MaxRSS",
    "AllocTRES", "Start", "End", "NodeList", "WorkDir",
)  # fmt: skip

Runner = Callable[[list[str]], str]

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_NO_LIMIT = frozenset({"", "UNLIMITED", "PARTITION_LIMIT", "INVALID", "NONE", "N/A"})
_NO_TIME = frozenset({"", "UNKNOWN", "NONE", "N/A", "0"})
# sacct column aliases (case-insensitive): NCPUS is AllocCPUS under another name.
_ALIASES = {"ncpus": "alloccpus"}
_MEMORY_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?)([KMGTP]?)$")


@lru_cache(maxsize=8192)
def parse_duration(text: str) -> float | None:
    """Seconds from a Slurm duration; None for no limit or no value.

        02:03.640        (MM:SS.mmm, the CPU fields)
        762-08:11:49     (D-HH:MM:SS)

    Also ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and a bare number of minutes
    (Slurm's own input syntax, and what TimelimitRaw prints).
    """
    t = text.strip()
    if t.upper() in _NO_LIMIT:
        return None
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        days = int(d)
    parts = t.split(":")
    try:
        if len(parts) == 3:
            h, m, s = int(parts[0]), int(parts[1]), float(parts[2])
        elif len(parts) == 2:
            # After "D-" the pair is HH:MM; alone it is MM:SS (sacct's short CPU times).
            if days:
                h, m, s = int(parts[0]), int(parts[1]), 0.0
            else:
                h, m, s = 0, int(parts[0]), float(parts[1])
        elif days:
            h, m, s = int(parts[0]), 0, 0.0
        else:
            h, m, s = 0, int(parts[0]), 0.0
    except ValueError:
        raise ValueError(f"not a Slurm duration: {text!r}") from None
    return days * 86400 + h * 3600 + m * 60 + s


@lru_cache(maxsize=8192)
def parse_memory(text: str) -> int | None:
    """Bytes from a sacct memory value (1024-based suffixes); None when empty.

        1294440K
        0

    A bare number is bytes: sacct only shortens a value to K/M/G when it divides exactly.
    """
    t = text.strip().upper()
    if not t:
        return None
    m = _MEMORY_RE.match(t)
    if not m:
        raise ValueError(f"not a memory size: {text!r}")
    return round(float(m.group(1)) * _UNITS[m.group(2)])


def parse_req_mem(text: str, cpus: int | None = None, nodes: int | None = None) -> int | None:
    """Requested memory of the whole job in bytes.

        4000Mc      (Slurm < 21.08: per CPU, times ``cpus``)
        100Gn       (per node, times ``nodes``)

    Newer Slurm prints the job total (``10G``). None when the multiplier is unknown.
    """
    t = text.strip()
    if not t:
        return None
    suffix = t[-1]
    if suffix in "cn":
        per = parse_memory(t[:-1])
        count = cpus if suffix == "c" else nodes
        if per is None or not count:
            return None
        return per * count
    return parse_memory(t)


def parse_tres(text: str) -> dict[str, str]:
    """A TRES string as a dict; values stay text (``500M``, ``2``, ``00:00:02``).

        billing=1,cpu=1,mem=500M,node=1
        billing=8,cpu=8,gres/gpu:v100=1,gres/gpu=1,mem=10G,node=1
    """
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def gpus_from_tres(tres: dict[str, str]) -> int:
    """GPU count: ``gres/gpu`` if present, else the sum of typed ``gres/gpu:<type>``."""
    if "gres/gpu" in tres:
        return int(tres["gres/gpu"])
    # gres/gpumem and gres/gpuutil (usage TRES) share the prefix but have no ':'.
    return sum(int(v) for k, v in tres.items() if k.startswith("gres/gpu:"))


@lru_cache(maxsize=1024)
def parse_state(text: str) -> tuple[str, int | None]:
    """The state name and, for a cancellation, the uid that cancelled.

        CANCELLED by 223988
        OUT_OF_MEMORY
    """
    t = text.strip()
    name, sep, who = t.partition(" by ")
    if sep:
        try:
            return name.upper(), int(who)
        except ValueError:
            return name.upper(), None
    return t.rstrip("+").upper(), None


@lru_cache(maxsize=4096)
def parse_time(text: str, tz: tzinfo | None = None) -> datetime | None:
    """A UTC-aware datetime from a sacct timestamp; None for Unknown/None.

        2024-04-04T19:29:45     (local time of the sacct host, or ``tz``)
        1681342706              (SLURM_TIME_FORMAT=%s)
    """
    t = text.strip()
    if t.upper() in _NO_TIME:
        return None
    if t.isdigit():
        return datetime.fromtimestamp(int(t), UTC)
    naive = datetime.fromisoformat(t)
    if tz is None:
        return naive.astimezone(UTC)  # naive astimezone() means "this host's local time"
    if tz is UTC:
        return naive.replace(tzinfo=UTC)
    return naive.replace(tzinfo=tz).astimezone(UTC)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _expand_range(body: str) -> list[str]:
    out = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not sep:
            out.append(lo)
            continue
        width = len(lo)  # node[022-023] keeps its zero padding
        out.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return out


@lru_cache(maxsize=4096)
def parse_nodelist(text: str) -> tuple[str, ...]:
    """Host names from a Slurm host list; () when none was assigned.

        omni[1,10-12]
        mycluster2-node[022-023,057-058]
    """
    t = text.strip()
    if not t or t in ("None assigned", "(null)"):
        return ()
    hosts: list[str] = []
    for item in _split_top(t):
        open_ = item.find("[")
        if open_ < 0:
            hosts.append(item)
            continue
        close = item.index("]", open_)
        prefix, body, rest = item[:open_], item[open_ + 1 : close], item[close + 1 :]
        tails = parse_nodelist(rest) if rest else ("",)
        hosts.extend(prefix + n + tail for n in _expand_range(body) for tail in tails)
    return tuple(hosts)


def _columns(fields: Sequence[str]) -> dict[str, int]:
    cols: dict[str, int] = {}
    for i, f in enumerate(fields):
        key = f.strip().lower()
        cols.setdefault(_ALIASES.get(key, key), i)
    return cols


class _Row:
    """Indexes of the columns a header named; -1 (a trailing "") when absent."""

    def __init__(self, fields: Sequence[str]) -> None:
        cols = _columns(fields)
        self.n = len(fields)
        for name in (
            "jobid", "jobidraw", "jobname", "user", "account", "partition", "state",
            "exitcode", "elapsed", "timelimit", "timelimitraw", "totalcpu", "alloccpus",
            "nnodes", "ntasks", "reqmem", "maxrss", "alloctres", "start", "end", "nodelist",
            "workdir",
        ):  # fmt: skip
            setattr(self, name, cols.get(name, -1))
        if self.jobid < 0:
            self.jobid = self.jobidraw  # `-o jobidraw,...` (jobstats) names jobs only that way
        # A job name may itself contain the delimiter; the extra pieces are glued back there.
        self.glue = cols.get("jobname", cols.get("workdir", -1))
        # One C-level call per line fetches every column a job or a step line needs.
        self.job = itemgetter(
            self.jobid, self.jobname, self.user, self.account, self.partition, self.state,
            self.exitcode, self.elapsed, self.timelimit, self.alloccpus, self.nnodes,
            self.reqmem, self.alloctres, self.start, self.end, self.nodelist, self.workdir,
            self.timelimitraw,
        )  # fmt: skip
        self.step = itemgetter(
            self.jobname, self.state, self.exitcode, self.elapsed, self.totalcpu, self.maxrss,
            self.alloccpus, self.nodelist, self.ntasks,
        )  # fmt: skip


def _fix_split(parts: list[str], delimiter: str, row: _Row) -> list[str] | None:
    """Parts of a line whose field count is off: `-p`'s trailing delimiter, or a name with |."""
    if len(parts) == row.n + 1 and parts[-1] == "":
        parts.pop()  # `sacct -p` ends every line with the delimiter
    extra = len(parts) - row.n
    if extra > 0 and row.glue >= 0:
        g = row.glue
        parts[g : g + extra + 1] = [delimiter.join(parts[g : g + extra + 1])]
    elif extra:
        return None
    return parts


@lru_cache(maxsize=1024)
def _tres_facts(text: str) -> tuple[int, int | None]:
    """(GPUs, memory bytes) of an AllocTRES string; job shapes repeat, so this is cached."""
    if not text:
        return 0, None
    tres = parse_tres(text)
    return gpus_from_tres(tres), parse_memory(tres["mem"]) if "mem" in tres else None


def _job(p: list[str], r: _Row, tz: tzinfo | None) -> tuple:
    """SacctJob's fields in order, without ``steps`` (known only at the end)."""
    (job_id, name, user, account, partition, state_text, exit_code, elapsed, timelimit,
     cpus_text, nodes_text, reqmem, tres, start, end, nodelist, workdir,
     limit_raw) = r.job(p)  # fmt: skip
    state, by = parse_state(state_text)
    cpus = int(cpus_text) if cpus_text else None
    gpus, tres_mem = _tres_facts(tres)
    mem = parse_req_mem(reqmem, cpus, int(nodes_text) if nodes_text else None) if reqmem else None
    limit = parse_duration(timelimit)
    if limit is None and limit_raw.isdigit():
        limit = int(limit_raw) * 60.0  # TimelimitRaw is minutes
    return (
        job_id, name or None, user or None, account or None, partition or None, state,
        exit_code, parse_duration(elapsed), limit, cpus, tres_mem if mem is None else mem, gpus,
        parse_time(start, tz), parse_time(end, tz), nodelist, workdir or None,
    ), by  # fmt: skip


def _step(step_id: str, p: list[str], r: _Row) -> Step:
    name, state, exit_code, elapsed, total_cpu, rss, cpus, nodelist, tasks = r.step(p)
    return Step(
        step_id,
        name,
        parse_state(state)[0],
        exit_code,
        parse_duration(elapsed),
        parse_duration(total_cpu),
        parse_memory(rss),
        int(cpus) if cpus else None,
        parse_nodelist(nodelist),
        int(tasks) if tasks else None,
    )


def _group(
    text: str, fields: Sequence[str] | None, delimiter: str, tz: tzinfo | None
) -> list[tuple[str, SacctJob]]:
    """(JobIDRaw, job) pairs in output order; the raw id is "" when not requested."""
    lines = text.splitlines()
    if fields is None:
        if not lines:
            return []
        fields = lines.pop(0).rstrip(delimiter).split(delimiter)
    elif lines:
        first = lines[0].rstrip(delimiter).split(delimiter)
        if [f.lower() for f in first] == [f.lower() for f in fields]:
            lines.pop(0)  # the header sacct prints without -n
    # Big outputs allocate a few container objects a line and no cycles, yet every young-
    # generation pass would rescan them all (measured: 110k lines/s with, 250k without).
    # So: no collection while parsing, and the results go straight to the old generation
    # (freeze + unfreeze merges lists, scans nothing) unless someone else uses gc.freeze.
    pause_gc = len(lines) > 5000 and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _group_lines(lines, fields, delimiter, tz)
    finally:
        if pause_gc:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _group_lines(
    lines: list[str], fields: Sequence[str], delimiter: str, tz: tzinfo | None
) -> list[tuple[str, SacctJob]]:
    r = _Row(fields)
    n, jobid, jobidraw = r.n, r.jobid, r.jobidraw
    # job id -> [raw id, (fields, cancelled_by) of the allocation line or None, steps]
    groups: dict[str, list] = {}
    for line in lines:
        if not line:
            continue
        p = line.split(delimiter)
        if len(p) != n:
            p = _fix_split(p, delimiter, r)
            if p is None:
                count = line.count(delimiter) + 1
                log.warning("sacct line with %d fields, expected %d: skipped", count, n)
                continue
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
        fields_, by = head or _orphan(job_id, steps)
        out.append((rid, SacctJob(*fields_, tuple(steps), by)))
    return out


def _orphan(job_id: str, steps: list[Step]) -> tuple:
    """A job known only from its steps (seen in real captures): the first step speaks for it."""
    first = steps[0]
    fields = (job_id, None, None, None, None, first.state, first.exit_code,
              first.elapsed_seconds, None, first.cpus, None, 0, None, None, "", None)  # fmt: skip
    return fields, None


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
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except FileNotFoundError:
        raise SourceUnavailable("sacct", f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise SourceUnavailable("sacct", f"no answer within {timeout:g} s") from None
    except OSError as e:
        raise SourceUnavailable("sacct", str(e)) from None
    if proc.returncode != 0:
        lines = (proc.stderr or "").strip().splitlines()
        why = lines[-1] if lines else "no message"
        raise SourceUnavailable("sacct", f"exit status {proc.returncode}: {why}")
    return proc.stdout


class SacctSource:
    """Jobs and array tasks as ``sacct`` reports them."""

    name = "sacct"

    def __init__(
        self,
        sacct_path: str = "sacct",
        runner: Runner | None = None,
        timeout: float = 30.0,
        cluster: str | None = None,
    ) -> None:
        self.sacct_path = sacct_path
        self.timeout = timeout
        self.cluster = cluster
        self._runner = runner or (lambda argv: run_sacct(argv, timeout))

    @classmethod
    def from_settings(cls, settings) -> SacctSource:  # settings: webapp.settings.Settings
        return cls(settings.sacct, timeout=settings.sacct_timeout, cluster=settings.cluster)

    def argv(self, job_id: str) -> list[str]:
        # -j alone already widens the window to the epoch (sacct(1), DEFAULT TIME WINDOW);
        # --allusers keeps a non-root caller from being silently limited to its own jobs.
        argv = [self.sacct_path, "--parsable2", "--noheader", "--allusers",
                "--format", ",".join(FIELDS), "--jobs", job_id]  # fmt: skip
        if self.cluster:
            argv += ["--clusters", self.cluster]
        return argv

    def _query(self, job_id: str) -> list[tuple[str, SacctJob]]:
        argv = self.argv(job_id)
        try:
            out = self._runner(argv)
        except SourceUnavailable:
            raise
        except (OSError, subprocess.SubprocessError) as e:
            raise SourceUnavailable("sacct", str(e)) from None
        return _group(out, FIELDS, "|", None)

    def job(self, job_id: str) -> SacctJob:
        """The job ``123``, array task ``123_4`` or het component ``123+1``."""
        jid = str(JobId.parse(job_id))  # refuses anything else before running a command
        rows = self._query(jid)
        for pick in (
            lambda rid, j: j.job_id == jid,  # as typed
            lambda rid, j: rid == jid,  # an array task's own numeric id
            lambda rid, j: j.job_id == f"{jid}+0",  # a het job is led by component 0
        ):
            found = [j for rid, j in rows if pick(rid, j)]
            if found:
                return found[0]
        if len(rows) == 1:
            return rows[0][1]
        raise JobNotFound(jid)

    def array(self, job_id: str) -> tuple[SacctJob, ...]:
        """Every task of the array job ``123`` (or of the array ``123_4`` belongs to)."""
        master = str(JobId.parse(job_id).job)
        rows = [j for _, j in self._query(master)]
        tasks = _array_tasks(master, rows)
        if not tasks:
            # The id was a task's own numeric id (JobIDRaw): ask again by its array's id.
            arrays = {j.job_id.partition("_")[0] for j in rows if "_" in j.job_id}
            if len(arrays) == 1:
                master = arrays.pop()
                tasks = _array_tasks(master, (j for _, j in self._query(master)))
        if not tasks:
            raise JobNotFound(job_id)
        return tasks


def _array_tasks(master: str, jobs: Iterable[SacctJob]) -> tuple[SacctJob, ...]:
    prefix = master + "_"
    return tuple(j for j in jobs if j.job_id.startswith(prefix))
