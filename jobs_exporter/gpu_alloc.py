"""Which GPUs Slurm allocated to a job, from what Slurm wrote: never from the job itself.

A job's processes can set any environment they like, so SLURM_JOB_GPUS in
/proc/<pid>/environ proves nothing. The sources, in order:

1. the prolog's file ``<gpu-alloc-dir>/<jobid>`` (slurmd runs the prolog as root with
   the job's real SLURM_JOB_GPUS; deploy/slurm-prolog-gpus.sh);
2. cgroup v1: the job's ``devices.list``, when it is a whitelist (Slurm wrote ``a`` to
   devices.deny, then allowed the job's devices): the GPU device files it allows, as
   major:minor (195 ``/dev/nvidia<N>``, 226 ``/dev/dri/renderD<N>``), matched to the
   devices by the minor number their driver reports, never by a position.
   When the list reads ``a *:* rwm`` the kernel hides the denied devices, so it tells
   nothing (what Slurm 22.05 produces) and the next source is asked;
3. ``scontrol -d show job <id>``: ``GRES=gpu:1(IDX:1)`` on this node's ``Nodes=`` detail
   line, asked once per job (an allocation never changes); only the detail lines after the
   job's fixed fields count, never free text (a job name can hold line breaks).

Sources 1 and 3 give Slurm's GPU indexes (positions in Slurm's list of the node's GPUs,
mapped to devices by jobs_exporter/gpu_devices.py), source 2 gives device numbers.

Everything parsed is bounded: an index is below ``MAX_GPUS``, a list has at most that many
entries. Bad data raises ValueError for that one job; the caller drops only its series.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Callable, Collection, Sequence

from jobs_exporter.gpu_devices import DRM_MAJOR, NVIDIA_MAJOR, RENDER_MINOR_BASE

log = logging.getLogger(__name__)

MAX_GPUS = 1024  # no node has more; bounds every index and list parsed here
# 195:254 is nvidia-modeset, 195:255 nvidiactl: allowed to every GPU job, not GPUs.
_MAX_GPU_MINOR = 253
# DRM: 226:0-127 are card nodes, render nodes (what gres.conf names for AMD) from 128.
_RENDER_MINORS = range(RENDER_MINOR_BASE, 1 << 20)
_MAX_TEXT = 4096  # an allocation file or devices.list longer than this is not Slurm's
_SCONTROL_TIMEOUT = 10.0
# GRES=gpu:1(IDX:0)  gpu:a100:2(IDX:0-1)  gpu(IDX:1) (older Slurm)  gpu:2(IDX:0,2)
_GRES_GPU = re.compile(r"(?:^|[\s,=])gpu(?::[^:(\s,]+)?(?::\d+)?\(IDX:([^)]*)\)")
_HOST_PART = re.compile(r"([^\[\],]*)(?:\[([^\]]*)\])?([^\[\],]*)")

Runner = Callable[[Sequence[str]], str]


def parse_gpu_list(text: str) -> tuple[int, ...]:
    """Parse SLURM_JOB_GPUS / a prolog file / an IDX list, bounded by MAX_GPUS.

    ``0,1``
    ``0-1,3``
    """
    if len(text) > _MAX_TEXT:
        raise ValueError("GPU list too long")
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        lo, hi = _index(lo_text), _index(hi_text if dash else lo_text)
        if hi < lo:
            raise ValueError(f"bad GPU range {part!r}")
        out.update(range(lo, hi + 1))
    return tuple(sorted(out))


def _index(text: str) -> int:
    if not text.isdigit() or not text.isascii() or len(text) > 4 or int(text) >= MAX_GPUS:
        raise ValueError(f"bad GPU index {text[:20]!r}")
    return int(text)


def parse_devices_list(text: str, caps_majors: Collection[int] = ()
                       ) -> tuple[tuple[int, int], ...] | None:
    """GPU device files (major, minor) a v1 devices whitelist allows; None when it cannot tell.

    ``c 195:1 rwm``  (``/dev/nvidia1``)     ``c 226:129 rw`` (``/dev/dri/renderD129``)
    ``c 136:* rwm``  ``c 508:22 rw`` (``/dev/nvidia-caps/nvidia-cap22``, ``caps_majors``)
    ``a *:* rwm`` (default allow: the kernel does not show what was denied) -> None
    """
    majors = {str(NVIDIA_MAJOR), str(DRM_MAJOR), *(str(m) for m in caps_majors)}
    if len(text) > _MAX_TEXT * 16:
        raise ValueError("devices.list too long")
    numbers: set[tuple[int, int]] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 3:
            continue
        kind, spec, _access = fields
        if kind == "a":
            return None
        major, _, minor = spec.partition(":")
        if kind != "c" or major not in majors:
            continue
        if minor == "*":
            return None  # every GPU of the node: not an allocation
        if not (minor.isdigit() and minor.isascii() and len(minor) <= 7):
            continue
        number = (int(major), int(minor))
        if number[0] == NVIDIA_MAJOR and number[1] <= _MAX_GPU_MINOR:
            numbers.add(number)
        elif number[0] == DRM_MAJOR and number[1] in _RENDER_MINORS:
            numbers.add(number)
        elif number[0] not in (NVIDIA_MAJOR, DRM_MAJOR):
            numbers.add(number)  # a MIG capability file
    return tuple(sorted(numbers))


def hostlist_contains(expression: str, node: str) -> bool:
    """Whether a Slurm hostlist names ``node``, without expanding it.

    ``vm``
    ``b02r1n[07-08],gv[21,139]``
    """
    for match in _HOST_PART.finditer(expression):
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            if prefix + suffix == node and node:
                return True
            continue
        if not (node.startswith(prefix) and node.endswith(suffix)):
            continue
        middle = node[len(prefix) : len(node) - len(suffix)]
        if not middle.isdigit():
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            hi = hi or lo
            if lo.isdigit() and hi.isdigit() and int(lo) <= int(middle) <= int(hi):
                # zero-padded ranges (n[07-08]) need the same width
                if len(lo) == len(hi) and lo.startswith("0") and len(middle) != len(lo):
                    continue
                return True
    return False


def parse_scontrol_gpus(text: str, job_id: str, node: str) -> tuple[int, ...]:
    """GPU indexes ``scontrol -d show job`` gives ``job_id`` on ``node``; () for none.

    ``JobId=3 JobName=gpujob2.sh``
    ``     Nodes=vm CPU_IDs=1 Mem=200 GRES=gpu:1(IDX:1)``
    Raises ValueError when the text is not about that job, or when it holds more than one
    answer for ``node``.

    scontrol prints the job name (and later the work dir, command, comment, output paths)
    verbatim, line breaks included, so a line of free text can look like a detail line.
    Detail lines are only the run right after the job's fixed ``JOB_GRES=`` line (or, on
    Slurm without it, ``Socks/Node=``); a name can fake such a run too, so when two runs
    name this node with different GPUs nobody can tell which is Slurm's and the job gets
    none.
    """
    first = text.split(None, 1)[0] if text.strip() else ""
    if first != f"JobId={job_id}":
        raise ValueError(f"scontrol answered {first[:40]!r}, not JobId={job_id}")
    found = {_detail_gpus(run, node) for run in _detail_runs(text.splitlines())}
    answers = {gpus for gpus in found if gpus is not None}
    if len(answers) > 1:
        raise ValueError(f"{len(answers)} different GPU lines for {node}; free text mimics one")
    return answers.pop() if answers else ()


_DETAIL_ANCHORS = ("JOB_GRES=", "Socks/Node=")


def _detail_runs(lines: list[str]) -> list[list[list[str]]]:
    """Each run of ``Nodes=`` lines that follows a detail anchor, as split fields."""
    runs: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in lines:
        fields = line.split()
        if fields and fields[0].startswith("Nodes=") and current is not None:
            current.append(fields)
            continue
        if current:
            runs.append(current)
        anchored = bool(fields) and fields[0].startswith(_DETAIL_ANCHORS)
        current = [] if anchored else None
    if current:
        runs.append(current)
    return runs


def _detail_gpus(run: list[list[str]], node: str) -> tuple[int, ...] | None:
    """GPU indexes of the run's line for ``node``; None when no line names it."""
    for fields in run:
        if not hostlist_contains(fields[0][len("Nodes=") :], node):
            continue
        found: set[int] = set()
        for field in fields[1:]:
            if field.startswith("GRES="):
                for idx in _GRES_GPU.findall(field):
                    if idx != "N/A":
                        found.update(parse_gpu_list(idx))
        return tuple(sorted(found))
    return None


def read_allocation_file(alloc_dir: str, job_id: str) -> tuple[int, ...] | None:
    """GPUs the prolog recorded for ``job_id``; None when there is no file."""
    if not job_id.isdigit():
        return None  # job ids from cgroup names; never a path outside alloc_dir
    try:
        with open(os.path.join(alloc_dir, job_id), encoding="ascii", errors="replace") as f:
            return parse_gpu_list(f.read(_MAX_TEXT + 1))
    except FileNotFoundError:
        return None


def run_scontrol(argv: Sequence[str]) -> str:
    """Run scontrol; its stdout, or CalledProcessError/TimeoutExpired/OSError."""
    done = subprocess.run(
        list(argv),
        capture_output=True,
        timeout=_SCONTROL_TIMEOUT,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    )
    return done.stdout.decode("utf-8", errors="replace")
