"""Allocated and not used: the one computation of waste, per resource.

The report page (``webapp.report.waste`` prices it), the job lists, the weekly digest and
the staff report all call ``unused``; each only gathers a ``Held`` from what it reads.

- CPU: allocated core-hours (AllocCPUS x elapsed) minus used (TotalCPU, the report's
  ``cpu_seconds``), never below zero.
- GPU: allocated GPU-hours minus the GPUs' mean utilisation x elapsed (Prometheus); no
  figure without GPU samples.
- Memory: requested GiB-hours minus what was used x elapsed: memory held idle, node by
  node. Where each node's own request and peak are known (``Held.memory_by_node``: a
  het job's components ask for different amounts), the sum over nodes of (its request -
  its peak), never below zero on any node, a node whose peak is unknown counted at the
  busiest node's peak; without them (``--mem`` is per node, the request the whole job's),
  (per node - busiest peak) x nodes. Bytes in GiB (2**30): Slurm's memory weights are
  per MB of 1024 KiB, so GiB = Slurm's G.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jobreport_common.units import GIB

HOUR = 3600.0


@dataclass(frozen=True)
class Held:
    """What a job held and what it used: everything a waste figure is computed from.

    ``gpus_busy`` is the GPUs' mean utilisations summed (GPUs busy on average; a GPU with
    no samples adds nothing); ``memory_requested_bytes`` is the whole job's request and
    ``memory_peak_bytes`` the busiest node's peak (``webapp.report.peak``)."""

    elapsed_seconds: float | None
    cpus: int | None
    cpu_seconds: float | None = None
    gpus: int = 0
    gpus_busy: float | None = None
    memory_requested_bytes: int | None = None
    memory_peak_bytes: int | None = None
    nodes: int = 1
    # Each node's own (request, peak) in bytes, the peak None where not known there
    # (``JobReport.memory_by_node``); () where only the whole job's figures are known.
    memory_by_node: tuple[tuple[int, int | None], ...] = ()
    # ``memory_used_bytes`` as computed when the job was archived (an archived staff row
    # keeps that figure, not each node's pair); None: compute it here.
    memory_used: int | None = None


@dataclass(frozen=True)
class Unused:
    """One resource: allocated x hours, and how much of it went unused (None: not known)."""

    resource: str
    unit: str
    requested: float
    unused: float | None


def unused(held: Held) -> dict[str, Unused]:
    """The one computation of waste (the module's docstring has the formulas): "cpu",
    always when the job ran with CPUs; "gpu" with GPUs; "memory" with a memory request."""
    if not held.elapsed_seconds or not held.cpus:
        return {}
    hours = held.elapsed_seconds / HOUR
    out: dict[str, tuple[str, float, float | None]] = {
        "cpu": ("core-hours", held.cpus * hours,
                None if held.cpu_seconds is None else held.cpu_seconds / HOUR)}
    if held.gpus:
        out["gpu"] = ("GPU-hours", held.gpus * hours,
                      None if held.gpus_busy is None else held.gpus_busy * hours)
    if held.memory_requested_bytes:
        used = memory_used_bytes(held)
        out["memory"] = ("GiB-hours", held.memory_requested_bytes / GIB * hours,
                         None if used is None else used / GIB * hours)
    return {r: Unused(r, unit, asked, None if used is None else max(0.0, asked - used))
            for r, (unit, asked, used) in out.items()}


def memory_used_bytes(held: Held) -> int | None:
    """The bytes of the request the job used (the module's docstring): node by node where
    ``memory_by_node`` has every node's request, else the busiest peak x nodes; None
    without a peak; the archived figure where ``memory_used`` holds it."""
    if held.memory_used is not None:
        return held.memory_used
    busiest = held.memory_peak_bytes
    pairs = held.memory_by_node
    if pairs and all(asked for asked, _ in pairs):
        known = [peak if peak is not None else busiest for _, peak in pairs]
        if all(p is None for p in known):
            return None
        return sum(min(asked, p or 0) for (asked, _), p in zip(pairs, known, strict=True))
    return None if busiest is None else busiest * max(1, held.nodes)


def memory_unused_bytes(held: Held) -> int | None:
    """The whole request's bytes not used (``memory_used_bytes``), never below zero."""
    used = memory_used_bytes(held)
    if used is None or not held.memory_requested_bytes:
        return None
    return max(0, held.memory_requested_bytes - used)


def gpus_busy(means: Iterable[float | None]) -> float | None:
    """Each GPU's mean utilisation (None: no samples), summed: the GPUs busy on average."""
    known = [m for m in means if m is not None]
    return sum(known) if known else None


def idle_nodes(cores_by_node: Mapping[str, float], below: float) -> tuple[str, ...]:
    """The nodes of a multi-node job that did nothing: mean busy cores under ``below``
    (the ``node_idle_cores`` threshold), sorted. The report's finding, the watch's rule and
    the staff report's table each ask this of a job on two nodes or more."""
    return tuple(sorted(node for node, cores in cores_by_node.items() if cores < below))
