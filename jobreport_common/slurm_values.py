"""Values Slurm prints in more than one command: TRES strings and memory sizes, read the
same by the web app (sacct, the accounting database) and by slurm-exporter (squeue).

A memory size is a number with an optional 1024-based suffix (``K``..``P``). What a bare
number means depends on the field, as in Slurm's own printing
(``slurmdb_make_tres_string_from_simple``): an allocation or request TRES
(``AllocTRES``, ``ReqTRES``, squeue's ``tres-alloc``) counts memory in MB, printed with its
suffix (``mem=500M``, ``mem=62.50G``) except a zero (``mem=0``) or a raw count
(``mem=500``: 500 MiB); a usage TRES (``TRESUsageInMax``) and ``MaxRSS`` count bytes
(``mem=80K``, ``0``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from jobreport_common.units import MIB, SLURM_SUFFIXES

_SIZE_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?)([KMGTP]?)\Z")


def parse_size(text: str, bare: int = 1) -> int:
    """Bytes of a Slurm memory size; a number without a suffix is in units of ``bare``
    bytes (1 for usage figures, ``MIB`` for allocations: see ``tres_memory_bytes``).

        1294440K
        62.50G
    """
    m = _SIZE_RE.match(text.strip().upper())
    if not m:
        raise ValueError(f"not a memory size: {text!r}")
    number, suffix = m.groups()
    return round(float(number) * (SLURM_SUFFIXES[suffix] if suffix else bare))


def tres_memory_bytes(text: str) -> int:
    """Bytes of an allocation or request TRES's ``mem`` value: a bare number is MiB.

        500M
        0
    """
    return parse_size(text, MIB)


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


def gpus_from_tres(tres: Mapping[str, str | float]) -> int:
    """GPU count: ``gres/gpu`` if present, else the sum of typed ``gres/gpu:<type>`` (a
    typed entry repeats the untyped total: ``gres/gpu:t4=1,gres/gpu=1`` is one GPU). From
    sacct's and squeue's text and from the accounting database's TRES ids alike."""
    if "gres/gpu" in tres:
        return int(float(tres["gres/gpu"]))
    # gres/gpumem and gres/gpuutil (usage TRES) share the prefix but have no ':'.
    return sum(int(float(v)) for k, v in tres.items() if k.startswith("gres/gpu:"))
