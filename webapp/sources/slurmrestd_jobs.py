"""slurmrestd's accounting answers (``/slurmdb/v0.0.NN/job/{id}``, ``.../jobs``) as the
``SacctJob`` records ``sacct`` gives: pure, on the parsed JSON.

    {"jobs": [{"job_id": 30, "array": {"job_id": 12, "task_id": 1}, "name": "...",
               "state": {"current": "COMPLETED"}, "time": {"elapsed": 14, ...},
               "tres": {"allocated": [{"type": "cpu", "count": 1}, ...]}, "steps": [...]}]}

One parser reads every version the source speaks (``webapp.sources.slurmrestd.APIS``):
they name the same fields and differ in shape only. From v0.0.40 on a number is an object
(``{"set": true, "infinite": false, "number": 5}``), a state or exit status a list
(``["COMPLETED"]``) and a step id the whole ``5.batch``; v0.0.38 has plain numbers and
strings. Where the sacct of Slurm 22.05 (v0.0.38's) and later ones print a column
differently (ReqMem, AllocCPUS of a job never allocated), ``legacy`` tells which.

Each figure is read to equal what ``parse_sacct`` makes of sacct's columns for the same
job (tests/test_slurmrestd*.py on captures of both): ExitCode ``rc:signal``, memory in
MiB as the TRES counts it, a time limit in minutes (none: UNLIMITED).
"""

from __future__ import annotations

import pwd
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from jobreport_common.units import MIB
from webapp.model import SacctJob, SourceUnavailable, Step, TimeLimitKind
from webapp.states import CANCELLED, FAILED

MEM_PER_CPU = 1 << 63  # v0.0.38: slurm's flag bit on a per-CPU memory request
NO_VAL = 4294967294  # v0.0.38's time limit when the partition's applies (sacct's NO_VAL)


def number(value: Any) -> int | None:
    """An integer of either shape: ``5``, or ``{"set": true, "infinite": false, "number":
    5}`` (None unless set and finite)."""
    if isinstance(value, Mapping):
        if value.get("set") and not value.get("infinite"):
            return int(value.get("number") or 0)
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def flag(value: Any) -> str:
    """A state or status of either shape: ``"COMPLETED"`` or ``["COMPLETED"]`` (its first)."""
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value or "")


def _when(value: Any) -> datetime | None:
    """A Unix time; None for 0 and NO_VAL (never started: sacct's ``None``)."""
    seconds = number(value)
    return datetime.fromtimestamp(seconds, UTC) if seconds and 0 < seconds < NO_VAL else None


def _micros(value: Mapping[str, Any] | None) -> int | None:
    if not value:
        return None
    return int(value.get("seconds") or 0) * 1_000_000 + int(value.get("microseconds") or 0)


def _seconds(micros: int | None) -> float | None:
    """CPU time cut to the millisecond: sacct prints TotalCPU so (``MM:SS.mmm``), and the
    two sources must give the same figure."""
    return None if micros is None else micros // 1000 / 1000


def legacy(job: Mapping[str, Any]) -> bool:
    """Whether ``job`` is v0.0.38's (Slurm 22.05, whose sacct figured two columns otherwise);
    its one ``required.memory`` field became two in v0.0.40."""
    return "memory" in (job.get("required") or {})


def _requested_memory(job: Mapping[str, Any], cpus: int | None) -> int | None:
    """The whole job's request, as sacct's ReqMem gives it. 22.05's sacct: per CPU times
    the CPUs, per node times the nodes; later ones print the requested TRES' memory."""
    if not legacy(job):
        mem = _tres((job.get("tres") or {}).get("requested")).get("mem")
        return mem * MIB if mem is not None else None
    mem = number((job.get("required") or {}).get("memory"))
    if mem is None or mem <= 0:
        return None
    if mem & MEM_PER_CPU:
        return (mem & ~MEM_PER_CPU) * MIB * cpus if cpus else None
    return mem * MIB * max(1, int(job.get("allocation_nodes") or 1))


def exit_code(value: Mapping[str, Any] | None, state: str = "") -> str:
    """sacct's ``return code:signal`` from ``{"status": "SIGNALED", "signal": {...}}``;
    unknown ("") for a FAILED job or step said to have succeeded: slurmrestd 22.05 reports
    a non-zero return code as ``SUCCESS``, 0 (sacct shows ``3:0`` where it says ``0``)."""
    if not value:
        return ""
    if state == FAILED and flag(value.get("status")) == "SUCCESS":
        return ""
    signal = value.get("signal") or {}
    signal_id = number(signal.get("id", signal.get("signal_id"))) or 0
    return f"{number(value.get('return_code')) or 0}:{signal_id}"


def _tres(items: Sequence[Mapping[str, Any]] | None) -> dict[str, int]:
    """``[{"type": "gres", "name": "gpu", "count": 1}]`` -> ``{"gres/gpu": 1}``."""
    out: dict[str, int] = {}
    for t in items or ():
        if t.get("count") is None:
            continue
        key = f"{t['type']}/{t['name']}" if t.get("name") else str(t["type"])
        out[key] = int(t["count"])
    return out


@lru_cache(maxsize=256)
def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def task_ranges(bitmap: str) -> str:
    """A pending array's tasks, ``0x6`` (bits 1 and 2) -> ``1-2``, as sacct prints them."""
    bits = int(bitmap, 16)
    tasks = [i for i in range(bits.bit_length()) if bits >> i & 1]
    runs: list[list[int]] = []
    for t in tasks:
        if runs and runs[-1][1] == t - 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def display_id(job: Mapping[str, Any]) -> str:
    """``123``, array task ``123_4``, pending tasks ``123_[5-9]``, het component ``123+1``,
    as sacct's JobID."""
    array, het = job.get("array") or {}, job.get("het") or {}
    task, offset = number(array.get("task_id")), number(het.get("job_offset"))
    if array.get("job_id") and task is not None:
        return f"{array['job_id']}_{task}"
    if array.get("job_id") and str(array.get("task") or "").startswith("0x"):
        return f"{array['job_id']}_[{task_ranges(array['task'])}]"
    if het.get("job_id") and offset is not None:
        return f"{het['job_id']}+{offset}"
    return str(job["job_id"])


def step_id(step: Mapping[str, Any]) -> str:
    """``batch``, ``0``, ...: v0.0.38's id, or what follows the job in v0.0.40's
    ``5.batch``."""
    text = str(step["step"]["id"])
    return text.partition(".")[2] if "." in text else text


def usage_tres(items: Sequence[Mapping[str, Any]] | None) -> str | None:
    """A step's usage TRES list as sacct prints it (``TRESUsageInMax`` and the like; bare
    numbers, which sacct's parsers read as bytes for memory), None when empty:

        [{"type": "mem", "count": 212688896}, {"type": "fs", "name": "disk", ...}]
        -> "mem=212688896,fs/disk=4311"
    """
    text = ",".join(f"{key}={count}" for key, count in _tres(items).items())
    return text or None


def _step(step: Mapping[str, Any], gpu_tres: bool = False) -> Step:
    """One step as sacct's line of it; with ``gpu_tres`` (JOBREPORT_GPU_METRICS=tres) its
    usage TRES too, as sacct gives them only when asked (``SacctSource(gpu_tres=...)``)."""
    usage = (step.get("tres") or {}).get("requested") or {}
    usage_max = {t["type"]: t for t in usage.get("max", ())}
    mem = usage_max.get("mem")
    allocated = _tres((step.get("tres") or {}).get("allocated"))
    time = step.get("time") or {}
    nodes = step.get("nodes") or {}
    state = flag(step.get("state"))
    return Step(
        step_id(step),
        str(step["step"].get("name") or ""),
        state,
        exit_code(step.get("exit_code"), state),
        float(time["elapsed"]) if time.get("elapsed") is not None else None,
        _seconds(_micros(time.get("total"))),
        int(mem["count"]) if mem and mem.get("count") is not None else None,
        allocated.get("cpu"),
        tuple(nodes.get("list") or ()),
        (step.get("tasks") or {}).get("count"),
        mem.get("node") if mem else None,
        # slurmdb's "requested" usage is sacct's TRESUsageIn* (gres/gpuutil, gres/gpumem)
        tres_usage_in_ave=usage_tres(usage.get("average")) if gpu_tres else None,
        tres_usage_in_tot=usage_tres(usage.get("total")) if gpu_tres else None,
        tres_usage_in_max=usage_tres(usage.get("max")) if gpu_tres else None,
    )


def _limit(value: Any) -> tuple[TimeLimitKind, float | None]:
    """Minutes, or v0.0.40's object: infinite is UNLIMITED, unset (NO_VAL) the partition's."""
    if isinstance(value, Mapping) and not value.get("set") and not value.get("infinite"):
        return TimeLimitKind.PARTITION, None
    minutes = number(value)
    if minutes is not None and 0 < minutes < NO_VAL:
        return TimeLimitKind.JOB, minutes * 60.0
    if minutes == NO_VAL:
        return TimeLimitKind.PARTITION, None
    return TimeLimitKind.UNLIMITED, None


def parse_job(job: Mapping[str, Any], gpu_tres: bool = False) -> SacctJob:
    """One job of a slurmdb answer as sacct's record of it."""
    tres = _tres((job.get("tres") or {}).get("allocated"))
    time = job.get("time") or {}
    state = flag((job.get("state") or {}).get("current"))
    killer = job.get("kill_request_user")
    kind, limit = _limit(time.get("limit"))
    steps = tuple(_step(s, gpu_tres) for s in job.get("steps") or ())
    cpus = tres.get("cpu")
    if cpus is None:  # never allocated: 22.05's sacct shows the CPUs asked for, later ones 0
        cpus = (job.get("required") or {}).get("CPUs") if legacy(job) else 0
    # sacct's allocation line sums its steps' TotalCPU, then cuts to the millisecond (the
    # job's own total reads 0 here)
    step_cpu = [m for st in job.get("steps") or () if (m := _micros((st.get("time") or {})
                                                                      .get("total"))) is not None]
    own_cpu = _seconds(_micros(time.get("total")))
    requested = _requested_memory(job, cpus)
    return SacctJob(
        job_id=display_id(job),
        job_name=job.get("name") or None,
        user=job.get("user") or None,
        account=job.get("account") or None,
        partition=job.get("partition") or None,
        state=state,
        exit_code=exit_code(job.get("exit_code"), state),
        elapsed_seconds=float(time["elapsed"]) if time.get("elapsed") is not None else None,
        time_limit_seconds=limit,
        cpus=cpus,
        memory_requested_bytes=requested if requested is not None else (
            tres["mem"] * MIB if "mem" in tres else None),
        gpus=tres.get("gres/gpu", 0),
        start_time=_when(time.get("start")),
        end_time=_when(time.get("end")),
        node_list=job.get("nodes") or "",
        work_dir=job.get("working_directory") or None,
        steps=steps,
        cancelled_by=_uid(killer) if state == CANCELLED and killer else None,
        raw_id=str(job["job_id"]),
        time_limit_kind=kind,
        alloc_cpu_seconds=_seconds(sum(step_cpu)) if step_cpu else own_cpu,
        billing=float(tres["billing"]) if tres.get("billing") else None,
        qos=job.get("qos") or None,
    )


def admin_comment(job: Mapping[str, Any]) -> str:
    """The job's AdminComment (``comment.administrator``; null in v0.0.38 when unset)."""
    return (job.get("comment") or {}).get("administrator") or ""


def error_text(error: Mapping[str, Any]) -> str:
    """An error entry as one line: ``Unable to connect to database (Failed to open
    slurmdbd connection, authentication error)``, what 24.11 answers a refused token."""
    text, why = str(error.get("error") or ""), str(error.get("description") or "")
    if text and why and why != text:
        return f"{text} ({why})"
    return text or why or str(error)


def parse_jobs(payload: Mapping[str, Any], gpu_tres: bool = False
               ) -> list[tuple[str, SacctJob]]:
    """(raw id, job) pairs of a slurmdb answer, in its order; SourceUnavailable for an
    error other than "nothing found" (v0.0.38's error 9003; later versions warn).
    ``gpu_tres``: each step's usage TRES too (``_step``)."""
    errors = [e for e in payload.get("errors") or () if e.get("error_number") != 9003]
    if errors:
        raise SourceUnavailable("slurmrestd", error_text(errors[0]))
    return [(str(j["job_id"]), parse_job(j, gpu_tres)) for j in payload.get("jobs") or ()]
