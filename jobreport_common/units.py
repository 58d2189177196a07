"""Binary units of memory, defined once for every deployable.

Slurm's K, M, G, T and P are 1024-based (its "MB", the unit of ``--mem`` and of a memory
TRES, is a MiB), as are the kernel's and the GPU drivers' sizes, so every memory figure
is in bytes and these are its multiples.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
PIB = 1024**5

# The size suffixes Slurm prints and reads (sacct, squeue, scontrol, slurm.conf).
SLURM_SUFFIXES = {"K": KIB, "M": MIB, "G": GIB, "T": TIB, "P": PIB}
