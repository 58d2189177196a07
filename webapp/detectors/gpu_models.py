"""Memory of a GPU type from the name a cluster gives it in its gres configuration.

Sites name types freely (``a100``, ``A30``, ``nvidia_h100_80gb_hbm3_4g.40gb``, ``mi300x``,
``tesla``): a size written in the name wins (a MIG profile's ``4g.40gb`` is its slice),
else the model's memory from NVIDIA's and AMD's data sheets, else unknown.
"""

from __future__ import annotations

import re

from webapp.formatting import GIB

# Models by the word that names them, with their (smallest) memory in GiB.
MODEL_GIB: tuple[tuple[str, float], ...] = (
    ("h200", 141), ("h100", 80), ("gh200", 96), ("a100", 40), ("a40", 48), ("a30", 24),
    ("a10", 24), ("a16", 16), ("a2", 16), ("l40s", 48), ("l40", 48), ("l4", 24),
    ("v100", 16), ("p100", 16), ("t4", 16), ("rtx8000", 48), ("rtx6000", 24),
    ("q6k", 24), ("rtx5000", 16), ("k80", 12), ("a6000", 48), ("a5000", 24),
    # AMD Instinct (AMD's data sheets); an MI250(X) is two GPUs to Slurm, 64 GiB each
    ("mi325x", 256), ("mi300x", 192), ("mi300a", 128), ("mi250x", 64), ("mi250", 64),
    ("mi210", 64), ("mi100", 32),
)
# A MIG slice's compute share is its slices of the card's seven (NVIDIA's MIG guide).
MIG_SLICES_PER_CARD = 7
MIG_SLICE = re.compile(r"(\d+)g\.(\d+)gb", re.I)
SIZE = re.compile(r"(?<![\d.])(\d+)\s*g(?:b|ib)?(?![a-z])", re.I)


def type_memory_bytes(gpu_type: str) -> float | None:
    """Memory of one GPU (or MIG slice) of ``gpu_type``, None when the name does not say."""
    name = gpu_type.lower()
    if m := MIG_SLICE.search(name):
        return float(m.group(2)) * GIB
    words = re.split(r"[^a-z0-9]+", name)
    for word in words:
        if (m := SIZE.fullmatch(word)) and int(m.group(1)) >= 4:
            return float(m.group(1)) * GIB
    for model, gib in MODEL_GIB:
        if model in words:
            return gib * GIB
    return None


def is_mig(gpu_type: str) -> bool:
    return MIG_SLICE.search(gpu_type) is not None


def mig_profile(gpu_type: str) -> str | None:
    """``1g.10gb`` of ``nvidia_a100_80gb_1g.10gb``; None for a whole GPU."""
    m = MIG_SLICE.search(gpu_type)
    return m.group(0).lower() if m else None


def compute_share(gpu_type: str) -> float:
    """The share of a card's compute a type has: a MIG slice's slices of seven, else 1."""
    m = MIG_SLICE.search(gpu_type)
    return int(m.group(1)) / MIG_SLICES_PER_CARD if m else 1.0
