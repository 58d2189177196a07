"""slurmrestd's accounting answers (``/slurmdb/v0.0.38/job/{id}``, ``.../jobs``) as the
``SacctJob`` records ``sacct`` gives: pure, on the parsed JSON.

    {"jobs": [{"job_id": 30, "array": {"job_id": 12, "task_id": 1}, "name": "...",
               "state": {"current": "COMPLETED"}, "time": {"elapsed": 14, ...},
               "tres": {"allocated": [{"type": "cpu", "count": 1}, ...]}, "steps": [...]}]}

Each figure is read to equal what ``parse_sacct`` makes of sacct's columns for the same
job (the stack test compares them field by field): ExitCode ``rc:signal``, memory in
MiB as the TRES counts it, a time limit in minutes (none: UNLIMITED).
"""

from __future__ import annotations

import pwd
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from webapp.model import SacctJob, SourceUnavailable, Step, TimeLimitKind

MIB = 1024 * 1024


def _when(value: Any) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int) and value > 0 else None


def _micros(value: Mapping[str, Any] | None) -> int | None:
    if not value:
        return None
    return int(value.get("seconds") or 0) * 1_000_000 + int(value.get("microseconds") or 0)


def _seconds(micros: int | None) -> float | None:
    """CPU time cut to the millisecond: sacct prints TotalCPU so (``MM:SS.mmm``), and the
    two sources must give the same figure."""
    return None if micros is None else micros // 1000 / 1000


MEM_PER_CPU = 1 << 63  # slurm's flag bit on a per-CPU memory request


def _requested_memory(job: Mapping[str, Any], cpus: int | None) -> int | None:
    """The whole job's request, as sacct's ReqMem gives it: per CPU times the CPUs, per
    node times the nodes (MiB in the answer)."""
    mem = (job.get("required") or {}).get("memory")
    if not isinstance(mem, int) or mem <= 0:
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
    if state == "FAILED" and value.get("status") == "SUCCESS":
        return ""
    signal = (value.get("signal") or {}).get("signal_id") or 0
    return f"{value.get('return_code') or 0}:{signal}"


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
    if array.get("job_id") and array.get("task_id") is not None:
        return f"{array['job_id']}_{array['task_id']}"
    if array.get("job_id") and str(array.get("task") or "").startswith("0x"):
        return f"{array['job_id']}_[{task_ranges(array['task'])}]"
    if het.get("job_id") and het.get("job_offset") is not None:
        return f"{het['job_id']}+{het['job_offset']}"
    return str(job["job_id"])


def _step(step: Mapping[str, Any]) -> Step:
    usage_max = {t["type"]: t for t in (step.get("tres") or {}).get("requested", {}).get("max", ())}
    mem = usage_max.get("mem")
    allocated = _tres((step.get("tres") or {}).get("allocated"))
    time = step.get("time") or {}
    nodes = step.get("nodes") or {}
    return Step(
        str(step["step"]["id"]),
        str(step["step"].get("name") or ""),
        str(step.get("state") or ""),
        exit_code(step.get("exit_code"), str(step.get("state") or "")),
        float(time["elapsed"]) if time.get("elapsed") is not None else None,
        _seconds(_micros(time.get("total"))),
        int(mem["count"]) if mem and mem.get("count") is not None else None,
        allocated.get("cpu"),
        tuple(nodes.get("list") or ()),
        (step.get("tasks") or {}).get("count"),
        mem.get("node") if mem else None,
    )


def _limit(minutes: Any) -> tuple[TimeLimitKind, float | None]:
    if isinstance(minutes, int) and 0 < minutes < 4294967294:
        return TimeLimitKind.JOB, minutes * 60.0
    if minutes == 4294967294:
        return TimeLimitKind.PARTITION, None
    return TimeLimitKind.UNLIMITED, None


def parse_job(job: Mapping[str, Any]) -> SacctJob:
    """One job of a slurmdb answer as sacct's record of it."""
    tres = _tres((job.get("tres") or {}).get("allocated"))
    time = job.get("time") or {}
    state = (job.get("state") or {}).get("current") or ""
    killer = job.get("kill_request_user")
    kind, limit = _limit(time.get("limit"))
    steps = tuple(_step(s) for s in job.get("steps") or ())
    cpus = tres.get("cpu") or (job.get("required") or {}).get("CPUs")
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
        cancelled_by=_uid(killer) if state == "CANCELLED" and killer else None,
        raw_id=str(job["job_id"]),
        time_limit_kind=kind,
        alloc_cpu_seconds=_seconds(sum(step_cpu)) if step_cpu else own_cpu,
        billing=float(tres["billing"]) if tres.get("billing") else None,
    )


def parse_jobs(payload: Mapping[str, Any]) -> list[tuple[str, SacctJob]]:
    """(raw id, job) pairs of a slurmdb answer, in its order; SourceUnavailable for an
    error other than "nothing found"."""
    errors = [e for e in payload.get("errors") or () if e.get("error_number") != 9003]
    if errors:
        raise SourceUnavailable("slurmrestd", str(errors[0].get("error") or errors[0]))
    return [(str(j["job_id"]), parse_job(j)) for j in payload.get("jobs") or ()]
