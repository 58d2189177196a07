"""Node states as Slurm holds them: a base state plus flags, never collapsed.

sinfo's ``StateComplete`` prints ``base+flag+flag`` in lower case (``idle+drain``,
``down+not_responding``, ``idle+maintenance+reserved``). ``StateLong`` folds the same
states into one word (MIXED+DRAIN and IDLE+DRAIN print ``draining``/``drained``), so it
is never used for classification.
"""

from __future__ import annotations

BASE_STATES = ("down", "idle", "allocated", "error", "mixed", "future", "unknown")
# Display symbols of StateLong/%t (not_responding, power saving...); StateComplete has none.
STATE_SYMBOLS = "*~#!%$@^-"


def split_state(state_complete: str) -> tuple[str, tuple[str, ...]]:
    """``'mixed+drain'`` -> ``('mixed', ('drain',))``; flags sorted, so order never matters.

    >>> split_state("idle+maintenance+reserved")
    ('idle', ('maintenance', 'reserved'))
    """
    parts = state_complete.strip().lower().split("+")
    base = parts[0].rstrip(STATE_SYMBOLS)
    if not base:
        raise ValueError(f"empty node state in {state_complete!r}")
    return base, tuple(sorted(f for f in parts[1:] if f))


def join_flags(flags: tuple[str, ...]) -> str:
    return "+".join(flags)


def held_state(base: str, cpus_alloc: int, cpus_total: int) -> str:
    """The base state slurmctld holds for a node sinfo prints as ``allocated``.

    On a drained node sinfo counts idle CPUs as "other" and then prints ``allocated``
    (seen on 22.05.8: ``allocated+drain`` with CPUsState ``1/0/1/2`` while
    ``scontrol show node`` says ``MIXED+DRAIN``). Slurm's own rule: some but not all
    CPUs allocated is MIXED.
    """
    if base == "allocated" and 0 < cpus_alloc < cpus_total:
        return "mixed"
    return base
