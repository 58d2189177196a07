"""Memory of a GPU type from the name a cluster gives it in its gres configuration.

Sites name types freely (``a100``, ``A30``, ``nvidia_h100_80gb_hbm3_4g.40gb``, ``mi300x``,
``tesla``): a size written in the name wins (a MIG profile's ``4g.40gb`` is its slice),
else the model's memory from NVIDIA's and AMD's data sheets, else unknown.
"""

from __future__ import annotations

import re

from jobreport_common.units import GIB

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
# The MIG profiles of each card size (GiB of the whole card), smaller than the card itself,
# from NVIDIA's MIG user guide: A30, A100 40 GB, A100/H100 80 GB, H100 NVL 94 GB, H200.
MIG_PROFILES: tuple[tuple[int, tuple[str, ...]], ...] = (
    (24, ("1g.6gb", "2g.12gb")),
    (40, ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb")),
    (80, ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb")),
    (94, ("1g.12gb", "2g.24gb", "3g.47gb", "4g.47gb")),
    (141, ("1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb")),
)
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


def card_profiles(card_bytes: float) -> tuple[str, ...]:
    """The MIG profiles of the card size nearest ``card_bytes`` (a device reports a little
    less than its nominal size); () for a card under 24 GiB, which MIG does not split."""
    gib = card_bytes / GIB
    if gib < 20:
        return ()
    return min(MIG_PROFILES, key=lambda size_profiles: abs(size_profiles[0] - gib))[1]


def smallest_slice(card_bytes: float, need_bytes: float, busy: float) -> str | None:
    """The smallest MIG profile of the card that holds ``need_bytes`` and whose compute
    share holds ``busy`` (0..1 of the whole card); None when only a whole card does."""
    for profile in card_profiles(card_bytes):
        if need_bytes <= (type_memory_bytes(profile) or 0) and busy <= compute_share(profile):
            return profile
    return None


def compute_share(gpu_type: str) -> float:
    """The share of a card's compute a type has: a MIG slice's slices of seven, else 1."""
    m = MIG_SLICE.search(gpu_type)
    return int(m.group(1)) / MIG_SLICES_PER_CARD if m else 1.0
