"""Princeton jobstats' job summary, as its slurmctld epilog stores it in ``AdminComment``.

The format (read from jobstats' published source; reportseff, Job Defense Shield and
jobscope decode the same): ``JS1:`` then base64 of gzip of compact JSON

    {"nodes": {"<node>": {"cpus": 4, "total_time": 812.3, "used_memory": 1.2e9,
               "total_memory": 4e9, "gpu_utilization": {"0": 65.7}, ...}},
     "total_time": 300, "gpus": 1}

``total_time`` per node is CPU seconds used there, at the top the job's run time;
``gpu_utilization`` is a percentage per GPU minor number; memory is in bytes.
``JS1:Short`` (run too short to sample) and ``JS1:None`` (no data) are also written.
Pure: ``encode_comment`` and ``parse_comment`` do no I/O.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "JS1:"
SHORT = "Short"
NONE = "None"


def encode_comment(summary: Mapping[str, Any] | str) -> str:
    """``JS1:`` + base64(gzip(compact JSON)); a marker (``Short``, ``None``) as it is."""
    if isinstance(summary, str):
        return PREFIX + summary
    text = json.dumps(summary, separators=(",", ":"))
    # mtime=0: the same summary always gives the same comment (a re-run is a no-op).
    return PREFIX + base64.b64encode(gzip.compress(text.encode("ascii"), mtime=0)).decode()


def is_jobstats(comment: str) -> bool:
    return comment.startswith(PREFIX)


def parse_comment(comment: str) -> dict[str, Any] | None:
    """The summary a ``JS1:`` comment holds; None for a marker (``JS1:Short``, ``JS1:None``)
    or any other comment. ValueError for a ``JS1:`` comment that does not decode.

        JS1:H4sIAAAAAAAC/6tWyiwoVrJSSs7PS8tMTkktVqoFAA...
    """
    if not is_jobstats(comment):
        return None
    body = comment[len(PREFIX):].strip()
    if body in (SHORT, NONE, ""):
        return None
    try:
        data = json.loads(gzip.decompress(base64.b64decode(body, validate=True)))
    except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError,
            json.JSONDecodeError) as exc:
        raise ValueError(f"undecodable jobstats comment: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise ValueError("jobstats comment without a nodes map")
    return data


@dataclass(frozen=True)
class JobstatsFigures:
    """The job's figures as jobstats computes them from a summary (fractions, 0..1)."""

    cpu_efficiency: float | None
    memory_efficiency: float | None  # used over allocated, all nodes together
    gpu_utilization: float | None  # mean over the GPUs
    gpu_memory_fraction: float | None  # used over total, all GPUs together
    memory_used_bytes: int | None
    cpu_seconds: float | None


def figures(summary: Mapping[str, Any]) -> JobstatsFigures:
    """Totals over nodes the way jobstats' own report adds them up."""
    nodes = summary.get("nodes") or {}
    elapsed = float(summary.get("total_time") or 0)
    cpu_used = cores = mem_used = mem_alloc = 0.0
    cpu_known = mem_known = True
    gpu_utils: list[float] = []
    gpu_used = gpu_total = 0.0
    for data in nodes.values():
        if "total_time" in data and "cpus" in data:
            cpu_used += float(data["total_time"])
            cores += float(data["cpus"])
        else:
            cpu_known = False
        if "used_memory" in data and "total_memory" in data:
            mem_used += float(data["used_memory"])
            mem_alloc += float(data["total_memory"])
        else:
            mem_known = False
        gpu_utils += [float(v) / 100 for v in (data.get("gpu_utilization") or {}).values()]
        used, total = data.get("gpu_used_memory") or {}, data.get("gpu_total_memory") or {}
        gpu_used += sum(float(used.get(g, 0)) for g in total)
        gpu_total += sum(float(v) for v in total.values())
    cpu_ok = cpu_known and nodes and cores and elapsed
    mem_ok = mem_known and nodes and mem_alloc
    return JobstatsFigures(
        cpu_efficiency=cpu_used / (elapsed * cores) if cpu_ok else None,
        memory_efficiency=mem_used / mem_alloc if mem_ok else None,
        gpu_utilization=sum(gpu_utils) / len(gpu_utils) if gpu_utils else None,
        gpu_memory_fraction=gpu_used / gpu_total if gpu_total else None,
        memory_used_bytes=int(mem_used) if mem_known and nodes else None,
        cpu_seconds=cpu_used if cpu_known and nodes else None,
    )
