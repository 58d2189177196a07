"""Accounting source: the restricted ``jobreport.jobs`` view, through pymysql.

Only the view db-setup creates is read, only with bound parameters. Rows become
``AccountingJob`` records; decoding Slurm's integers lives in the pure ``parse_*``.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobreport_common.mysql_url import import_pymysql, mysql_params
from jobreport_common.slurm_values import gpus_from_tres
from jobreport_common.units import MIB
from webapp.model import (
    AccountingJob,
    JobId,
    JobNotFound,
    NodeEvent,
    SourceUnavailable,
    TimeLimitKind,
)
from webapp.sources.ended import EndedJob
from webapp.sources.sacct_values import parse_nodelist
from webapp.states import (
    BOOT_FAIL,
    CANCELLED,
    COMPLETED,
    DEADLINE,
    FAILED,
    NODE_FAIL,
    OUT_OF_MEMORY,
    PENDING,
    PREEMPTED,
    REQUEUED,
    RESIZING,
    RUNNING,
    SUSPENDED,
    TIMEOUT,
)

# enum job_states in slurm/slurm.h; the high bits are flags and are masked off.
JOB_STATES = dict(enumerate((PENDING, RUNNING, SUSPENDED, COMPLETED, CANCELLED, FAILED, TIMEOUT,
                             NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY)))
MEM_PER_CPU = 0x8000000000000000
LIST_LIMIT = 500  # rows of a job list: a page, not an export
# slurmdbd writes a stand-in job row when a job's end or one of its steps reaches it
# before the job's own start record (as_mysql_job.c: no name -> "allocation", the uid and
# account it was not sent: 0 and none). The start record, once it comes, fills it in.
STAND_IN_NAME = "allocation"
# timelimit: INFINITE is what sacct prints as UNLIMITED, NO_VAL as Partition_Limit.
TIME_LIMIT_KINDS = {0xFFFFFFFF: TimeLimitKind.UNLIMITED, 0xFFFFFFFE: TimeLimitKind.PARTITION}

log = logging.getLogger(__name__)

COLUMNS = (
    "cluster, job_id, array_job_id, array_task_id, het_job_id, het_job_offset, uid, user,"
    " account, `partition`, job_name, state, exit_code, submit_time, start_time, end_time,"
    " cpus, mem_req, timelimit, nodelist, work_dir, tres_alloc, tres_req, qos"
)
# A view created before it had the job's QoS (the package upgraded, `jobreport db-setup`
# not run again): its columns. Its rows read as jobs without a QoS, so reports still
# render; the log says what to run. Tried again after VIEW_RECHECK_SECONDS, so a db-setup
# run in the meantime takes effect without a restart.
OLD_VIEW_COLUMNS = COLUMNS.removesuffix(", qos")
VIEW_RECHECK_SECONDS = 600.0
ER_BAD_FIELD_ERROR = 1054  # MariaDB's "Unknown column"
OLD_VIEW = ("the accounting view predates this release (it has no qos column): run "
            "`jobreport db-setup` again; until then reports show no QoS and policy "
            "scopes `qos = ...` match no job")
# Node events one query returns at most (a batch's window on a large cluster may hold
# many: a reader that gets this many asks per job instead).
NODE_EVENTS_LIMIT = 5000
# Only fixed column lists are interpolated; every value is a bound %s parameter.
QUERIES = {
    "job": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND job_id = %s"  # noqa: S608
    " ORDER BY submit_time DESC LIMIT 1",
    "array_task": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND array_job_id = %s"  # noqa: S608
    " AND array_task_id = %s ORDER BY submit_time DESC LIMIT 1",
    # An array id that is no task's own id: its lowest task speaks for it (as in sacct).
    "array_first": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND array_job_id = %s"  # noqa: S608
    " ORDER BY array_task_id, submit_time DESC LIMIT 1",
    "het": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND het_job_id = %s"  # noqa: S608
    " AND het_job_offset = %s ORDER BY submit_time DESC LIMIT 1",
    # Node events that began within a window, oldest first (a job's run, filtered to its
    # nodes by the caller: a node list does not bind as one parameter).
    "node_events": "SELECT node, start_time, end_time, state, reason FROM node_events"
    " WHERE cluster = %s AND start_time >= %s AND start_time <= %s"
    " ORDER BY start_time, node LIMIT %s",
    "ended_since": "SELECT job_id, array_job_id, array_task_id, het_job_id, het_job_offset"
    " FROM jobs WHERE cluster = %s AND end_time >= %s ORDER BY end_time",
    "ended_between": "SELECT job_id, array_job_id, array_task_id, het_job_id,"
    " het_job_offset, submit_time, end_time FROM jobs WHERE cluster = %s"
    " AND end_time >= %s AND end_time <= %s"
    " ORDER BY end_time, job_id, array_task_id, het_job_offset LIMIT %s",
    # A user's (or an account's) jobs that ended since a time or have not ended: the job
    # lists. Bounded: the newest first, at most LIST_LIMIT.
    "user_jobs": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND user = %s"  # noqa: S608
    " AND (end_time = 0 OR end_time >= %s) ORDER BY submit_time DESC, job_id DESC LIMIT %s",
    "account_jobs": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND account = %s"  # noqa: S608
    " AND (end_time = 0 OR end_time >= %s) ORDER BY submit_time DESC, job_id DESC LIMIT %s",
    "tres": "SELECT id, type, name FROM tres",
    # Time limits (minutes) of a partition's jobs submitted since a time, counted: a few
    # distinct values, so the median is computed here without reading every row.
    "partition_time_limits": "SELECT timelimit, COUNT(*) AS n FROM jobs WHERE cluster = %s"
    " AND `partition` = %s AND submit_time >= %s GROUP BY timelimit",
    # Jobs holding an allocation now (state RUNNING, flags masked): what `watch` walks.
    "running": f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s AND end_time = 0"  # noqa: S608
    " AND (state & 255) = 1 ORDER BY job_id",
}


# slurmdbd records a requeued run, and the part of a job before a resize, with the flag
# alone as its state (as_mysql_job.c: job_state = JOB_REQUEUE / JOB_RESIZING), whose base
# reads PENDING; sacct names them by the flag, checking RESIZING first (job_state_string).
JOB_RESIZING, JOB_REQUEUE = 0x2000, 0x0400


def state_name(value: int) -> str:
    """Slurm's state integer, other flags masked: ``3`` -> ``COMPLETED``, ``1024`` ->
    ``REQUEUED`` (``webapp.states``: not ended, the job runs again)."""
    value = int(value)
    if value & JOB_RESIZING:
        return RESIZING
    if value & JOB_REQUEUE:
        return REQUEUED
    return JOB_STATES.get(value & 0xFF, f"UNKNOWN({value})")


def exit_code_text(status: int) -> str:
    """A wait(2) status as sacct shows it, ``code:signal``: ``768`` -> ``3:0``."""
    status = int(status)
    return f"{(status >> 8) & 0xFF}:{status & 0x7F}"


# slurm.h's node states: the base state in the low bits, flags above (22.05 to 26.05).
NODE_BASE_STATES = {0: "UNKNOWN", 1: "DOWN", 2: "IDLE", 3: "ALLOCATED", 4: "ERROR",
                    5: "MIXED", 6: "FUTURE"}
NODE_STATE_FLAGS = ((0x200, "DRAIN"), (0x800, "NOT_RESPONDING"), (0x2000, "FAIL"),
                    (0x8000, "MAINT"), (0x10000, "REBOOT_REQUESTED"),
                    (0x100000, "REBOOT_ISSUED"))


def node_state_name(value: int) -> str:
    """slurmdbd's numeric node state in Slurm's words.

    >>> node_state_name(514), node_state_name(1)
    ('IDLE+DRAIN', 'DOWN')
    """
    words = [NODE_BASE_STATES.get(value & 0xF, "UNKNOWN")]
    words += [name for bit, name in NODE_STATE_FLAGS if value & bit]
    return "+".join(words)


def parse_tres_ids(text: str | None, names: Mapping[int, str]) -> dict[str, float]:
    """``1=2,2=500,4=1,1001=1`` -> ``{"cpu": 2, "mem": 500, "node": 1, "gres/gpu": 1}``."""
    out: dict[str, float] = {}
    for part in filter(None, (text or "").split(",")):
        key, _, value = part.partition("=")
        try:
            out[names.get(int(key), key)] = float(value)
        except ValueError:
            continue
    return out


def mem_req_bytes(mem_req: int, cpus: int | None, nodes: int) -> int | None:
    """``mem_req`` (MB, per node or per CPU with the MEM_PER_CPU bit) -> bytes per job."""
    mem_req = int(mem_req or 0)
    if mem_req & MEM_PER_CPU:
        per_cpu = mem_req & ~MEM_PER_CPU
        return per_cpu * (cpus or 1) * MIB if per_cpu else None
    return mem_req * max(nodes, 1) * MIB if mem_req else None


def _limit_kind(minutes: int | None) -> TimeLimitKind | None:
    if minutes is None:
        return None
    return TIME_LIMIT_KINDS.get(int(minutes), TimeLimitKind.JOB)


def _limit_seconds(minutes: int | None) -> float | None:
    if minutes is None or _limit_kind(minutes) != TimeLimitKind.JOB:
        return None
    return int(minutes) * 60.0


def _time(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(int(value), UTC) if value else None


def parse_row(row: Mapping[str, Any], tres_names: Mapping[int, str]) -> AccountingJob:
    """One row of the ``jobs`` view -> ``AccountingJob``."""
    alloc = parse_tres_ids(row["tres_alloc"], tres_names)
    try:
        nodes = parse_nodelist(row["nodelist"] or "")
    except ValueError:
        nodes = ()  # a corrupt host list costs the node filter, not the report
    cpus = int(alloc["cpu"]) if "cpu" in alloc else (int(row["cpus"]) if row["cpus"] else None)
    mem: int | None
    if "mem" in alloc:
        mem = int(alloc["mem"] * MIB)
    else:
        mem = mem_req_bytes(row["mem_req"], cpus, len(nodes))
    limit = row["timelimit"]
    array_task, het = row["array_task_id"], row["het_job_offset"]
    if array_task is not None and row["array_job_id"]:
        job_id = f"{row['array_job_id']}_{array_task}"
    elif het is not None and row["het_job_id"]:
        job_id = f"{row['het_job_id']}+{het}"
    else:
        job_id = str(row["job_id"])
    return AccountingJob(
        cluster=row["cluster"],
        job_id=job_id,
        job=int(row["job_id"]),
        array_job=row["array_job_id"],
        array_task=array_task,
        het_job=row["het_job_id"],
        het_offset=het,
        uid=int(row["uid"]),
        user=row["user"] or None,
        account=row["account"] or None,
        partition=row["partition"] or None,
        job_name=row["job_name"],
        state=state_name(row["state"]),
        exit_code=exit_code_text(row["exit_code"] or 0),
        submit_time=_time(row["submit_time"]),
        start_time=_time(row["start_time"]),
        end_time=_time(row["end_time"]),
        cpus=cpus,
        memory_requested_bytes=mem,
        time_limit_seconds=_limit_seconds(limit),
        time_limit_kind=_limit_kind(limit),
        nodes=nodes,
        node_list=row["nodelist"] or "",
        work_dir=row["work_dir"] or None,
        gpus=gpus_from_tres(alloc),
        billing=alloc.get("billing"),
        qos=row.get("qos") or None,  # absent from a view older than the column
    )


def no_qos_column(exc: BaseException) -> bool:
    """Whether the database refused a query for want of the view's ``qos`` column:
    pymysql's ``(1054, "Unknown column 'qos' in 'field list'")``."""
    args: tuple[Any, ...] = exc.args
    return (len(args) >= 2 and args[0] == ER_BAD_FIELD_ERROR
            and "'qos'" in str(args[-1]).lower())


def connect_from_url(url: str, timeout: float = 5.0) -> Any:
    """``mysql://user:pass@host:port/db`` (or ``?unix_socket=/path``) -> a pymysql connection."""
    pymysql = import_pymysql()

    try:
        params = mysql_params(url, "jobreport")
    except ValueError as exc:
        raise ValueError(f"JOBREPORT_DB_URL: {exc}") from None
    return pymysql.connect(
        **params,
        connect_timeout=timeout,
        read_timeout=timeout,
        cursorclass=pymysql.cursors.DictCursor,
        # A reader holds no transaction open: an open one keeps the view's metadata lock,
        # and `jobreport db-setup` (CREATE OR REPLACE VIEW) would wait for it.
        autocommit=True,
    )


class AccountingSource:
    """Jobs from the restricted view. ``connect`` is injectable (tests, pools)."""

    name = "accounting"

    def __init__(self, db_url: str, cluster: str, connect: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self._connect = connect or (lambda: connect_from_url(db_url))
        self._tres: dict[int, str] | None = None
        self._clock = clock
        self._old_view_until: float | None = None  # read OLD_VIEW_COLUMNS until then

    def _query(self, name: str, *params: object) -> list[dict[str, Any]]:
        return self._run(QUERIES[name], params, name)

    def _run(self, sql: str, params: Sequence[object], name: str) -> list[dict[str, Any]]:
        try:  # an install without the mariadb extra: a visible gap, as an unreachable database
            pymysql = import_pymysql()
        except ImportError as exc:
            raise SourceUnavailable(self.name, "accounting database unreachable",
                                    str(exc)) from None
        if self._old_view_until is not None:
            if self._clock() < self._old_view_until:
                sql = sql.replace(COLUMNS, OLD_VIEW_COLUMNS)
            else:
                self._old_view_until = None
        # The driver's words (host, port, errno) go to ``detail``: logs and staff only.
        try:
            conn = self._connect()
        except pymysql.MySQLError as exc:
            raise SourceUnavailable(self.name, "accounting database unreachable",
                                    f"cannot connect: {exc.args[-1]}") from exc
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())
        except pymysql.MySQLError as exc:
            if not (COLUMNS in sql and no_qos_column(exc)):
                raise SourceUnavailable(self.name, "accounting database query failed",
                                        f"query {name} failed: {exc.args[-1]}") from exc
        finally:
            conn.close()
        log.warning("%s (cluster %s)", OLD_VIEW, self.cluster)
        self._old_view_until = self._clock() + VIEW_RECHECK_SECONDS
        return self._run(sql.replace(COLUMNS, OLD_VIEW_COLUMNS), params, name)

    def tres_names(self) -> dict[int, str]:
        if self._tres is None:
            names = {1: "cpu", 2: "mem", 3: "energy", 4: "node", 5: "billing"}
            for row in self._query("tres"):
                names[int(row["id"])] = (
                    f"{row['type']}/{row['name']}" if row["name"] else row["type"]
                )
            self._tres = names
        return self._tres

    def job(self, job_id: JobId | str) -> AccountingJob:
        """The job's latest record (a requeued job keeps its id); JobNotFound if none."""
        return parse_row(self._rows(JobId.of(job_id))[0], self.tres_names())

    def _rows(self, job_id: JobId) -> list[dict[str, Any]]:
        """The view's rows for the job (latest first); JobNotFound if none."""
        if job_id.array_task is not None:
            rows = self._query("array_task", self.cluster, job_id.job, job_id.array_task)
        elif job_id.het_offset is not None:
            rows = self._query("het", self.cluster, job_id.job, job_id.het_offset)
        else:
            rows = self._query("job", self.cluster, job_id.job) or self._query(
                "array_first", self.cluster, job_id.job
            )
        if not rows:
            raise JobNotFound(str(job_id))
        return rows

    def jobs(self, job_ids: Iterable[str], chunk: int = 500,
             submitted: Mapping[str, int] | None = None) -> dict[str, AccountingJob]:
        """Many jobs' records, one query per ``chunk`` ids (the sync's batches).

        A job whose submit time ``submitted`` gives (the sync's key: ids repeat after a
        controller reset) gets the record submitted then; any other, as ``job()``, its
        latest."""
        ids = [JobId.of(j) for j in job_ids]
        submitted = submitted or {}
        out: dict[str, AccountingJob] = {}
        for i in range(0, len(ids), chunk):
            part = ids[i : i + chunk]
            sql, params = jobs_query(self.cluster, part)
            # As job() reads them: a task or component by its own key, a plain id by
            # job_id (whatever record holds it); every record of each.
            named: dict[str, list[dict[str, Any]]] = defaultdict(list)
            plain: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for row in self._run(sql, params, "jobs"):
                named[_job_id(row)].append(row)
                plain[str(row["job_id"])].append(row)
            for jid in part:
                key = str(jid)
                rows = plain if jid.array_task is None and jid.het_offset is None else named
                record = pick_record(rows.get(key, []), submitted.get(key))
                if record is not None:
                    out[key] = parse_row(record, self.tres_names())
        return out

    def node_events(self, nodes: Iterable[str] | None, start: datetime, end: datetime
                    ) -> tuple[NodeEvent, ...]:
        """The events of ``nodes`` (None: every node) that began between ``start`` and
        ``end``."""
        wanted = None if nodes is None else set(nodes)
        rows = self._query("node_events", self.cluster, int(start.timestamp()),
                           int(end.timestamp()), NODE_EVENTS_LIMIT)
        return tuple(
            NodeEvent(str(r["node"]), _time(r["start_time"]) or start, _time(r["end_time"]),
                      node_state_name(int(r["state"] or 0)), str(r["reason"] or ""))
            for r in rows if wanted is None or r["node"] in wanted
        )

    def ended_since(self, since: datetime) -> list[str]:
        """Ids of jobs that ended at or after ``since``, oldest first."""
        return [_job_id(r) for r in self._query("ended_since", self.cluster,
                                                int(since.timestamp()))]

    def ended_between(self, since: int, until: int, limit: int) -> list[EndedJob]:
        """At most ``limit`` jobs whose end lies in [since, until] (Unix s), oldest end first."""
        rows = self._query("ended_between", self.cluster, since, until, limit)
        return [EndedJob(int(r["end_time"]), _job_id(r), int(r["submit_time"] or 0),
                         self.cluster) for r in rows]


    # Queue history (QueueHistoryReader): what the queue context compares a job with.
    def requested_gpu_types(self, job_id: JobId | str) -> tuple[str, ...]:
        """GPU types the job asked for (TRES ``gres/gpu:<type>``); () when untyped."""
        rows = self._rows(JobId.of(job_id))
        return gpu_types(parse_tres_ids(rows[0]["tres_req"], self.tres_names()))

    def time_limits(self, partition: str, since: datetime) -> dict[float, int]:
        """Time limit (seconds) -> number of the partition's jobs submitted since ``since``."""
        out: dict[float, int] = {}
        for r in self._query("partition_time_limits", self.cluster, partition,
                             int(since.timestamp())):
            limit = r["timelimit"]
            if limit is not None and int(limit) not in TIME_LIMIT_KINDS:
                out[int(limit) * 60.0] = out.get(int(limit) * 60.0, 0) + int(r["n"])
        return out

    def recent(self, since: datetime, user: str | None = None, account: str | None = None,
               limit: int = LIST_LIMIT) -> list[AccountingJob]:
        """One user's (or one account's) jobs that ended at or after ``since`` or have not
        ended yet, newest submission first, at most ``limit``."""
        if (user is None) == (account is None):
            raise ValueError("give a user or an account")
        names = self.tres_names()
        query, who = ("user_jobs", user) if user is not None else ("account_jobs", account)
        rows = self._query(query, self.cluster, who, int(since.timestamp()), int(limit))
        return [parse_row(r, names) for r in rows]

    def running(self) -> list[AccountingJob]:
        """Every job running now, oldest id first."""
        names = self.tres_names()
        return [parse_row(r, names) for r in self._query("running", self.cluster)]


def jobs_query(cluster: str, ids: Sequence[JobId]) -> tuple[str, list[object]]:
    """One SELECT for many ids, every value a bound parameter (only "%s" is repeated)."""
    where: list[str] = []
    params: list[object] = [cluster]
    for jid in ids:
        if jid.array_task is not None:
            where.append("(array_job_id = %s AND array_task_id = %s)")
            params += [jid.job, jid.array_task]
        elif jid.het_offset is not None:
            where.append("(het_job_id = %s AND het_job_offset = %s)")
            params += [jid.job, jid.het_offset]
        else:
            where.append("job_id = %s")
            params.append(jid.job)
    sql = (f"SELECT {COLUMNS} FROM jobs WHERE cluster = %s"  # noqa: S608 - placeholders only
           f" AND ({' OR '.join(where) or 'FALSE'})")
    return sql, params


def pick_record(rows: Sequence[Mapping[str, Any]],
                submit_time: int | None = None) -> Mapping[str, Any] | None:
    """The record of one job id submitted at ``submit_time`` (Unix s), else its latest
    (what ``job()`` reads: ``ORDER BY submit_time DESC``); None when there is none."""
    if submit_time:
        for row in rows:
            if int(row["submit_time"] or 0) == submit_time:
                return row
    return max(rows, key=lambda r: int(r["submit_time"] or 0), default=None)


def is_stand_in(uid: int | None, account: str | None, job_name: str | None,
                partition: str | None = None) -> bool:
    """Whether a record is slurmdbd's stand-in (see STAND_IN_NAME): no owner known yet.

    The view's stand-in has no account; joined with sacct's placeholder line a report may
    show one (its association's) but then no partition. A job of root's named
    "allocation" has both."""
    return job_name == STAND_IN_NAME and not uid and (not account or not partition)


def gpu_types(tres: Mapping[str, float]) -> tuple[str, ...]:
    """``{"gres/gpu": 2, "gres/gpu:a100": 2}`` -> ``("a100",)``: the typed GPU TRES."""
    return tuple(sorted(k.split(":", 1)[1] for k, v in tres.items()
                        if k.startswith("gres/gpu:") and v > 0))


def _job_id(r: Mapping[str, Any]) -> str:
    """An array task as ``123_4``, a het component as ``123+1``, else the job id."""
    if r["array_task_id"] is not None and r["array_job_id"]:
        return f"{r['array_job_id']}_{r['array_task_id']}"
    if r["het_job_offset"] is not None and r["het_job_id"]:
        return f"{r['het_job_id']}+{r['het_job_offset']}"
    return str(r["job_id"])
