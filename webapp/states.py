"""Job states: which ones have ended, which hold an allocation, which will run again.

The one vocabulary every list, history, array summary and report reads (names as sacct
prints them; the accounting view's numbers are decoded to the same names).

- pending: waiting in the queue, never started;
- running: holds its allocation (a suspended job keeps its nodes);
- requeued: this run is over but the job goes on under the same id (``REQUEUED``, and
  ``RESIZING``, whose record a resize closes): not ended, it will run again;
- ended: one of Slurm's final states; ``COMPLETED`` is the only one that is not a failure.

A state outside these (``UNKNOWN(…)`` from a newer Slurm, or none known) counts as
ended: nothing says the job is pending, running or coming back, and a list or a verdict
would otherwise wait for it forever.
"""

from __future__ import annotations

# The names, one constant each: code compares with these, never with a literal.
PENDING = "PENDING"
RUNNING = "RUNNING"
SUSPENDED = "SUSPENDED"
REQUEUED = "REQUEUED"
RESIZING = "RESIZING"
COMPLETED = "COMPLETED"
CANCELLED = "CANCELLED"
FAILED = "FAILED"
TIMEOUT = "TIMEOUT"
NODE_FAIL = "NODE_FAIL"
PREEMPTED = "PREEMPTED"
BOOT_FAIL = "BOOT_FAIL"
DEADLINE = "DEADLINE"
OUT_OF_MEMORY = "OUT_OF_MEMORY"

PENDING_STATES = frozenset({PENDING})
RUNNING_STATES = frozenset({RUNNING, SUSPENDED})
REQUEUED_STATES = frozenset({REQUEUED, RESIZING})
NOT_ENDED_STATES = PENDING_STATES | RUNNING_STATES | REQUEUED_STATES

# Final states, with the abbreviations ``sacct --state`` takes, in slurm.h's order.
ENDED_STATES: dict[str, str] = {
    COMPLETED: "CD",
    CANCELLED: "CA",
    FAILED: "F",
    TIMEOUT: "TO",
    NODE_FAIL: "NF",
    PREEMPTED: "PR",
    BOOT_FAIL: "BF",
    DEADLINE: "DL",
    OUT_OF_MEMORY: "OOM",
}
FAILED_STATES = frozenset(ENDED_STATES) - {COMPLETED}
# What a job list can be filtered by: the states its rows show, queue order first.
LIST_STATES = (PENDING, RUNNING, SUSPENDED, *ENDED_STATES)


def ended(state: str | None) -> bool:
    """Over for good: not pending, running or requeued."""
    return state not in NOT_ENDED_STATES


def running(state: str | None) -> bool:
    """Holds its allocation now: its processes may still be using resources."""
    return state in RUNNING_STATES


def started(state: str | None) -> bool:
    """May have run: not pending (a requeued job's first run left metrics; a state not
    known is looked up rather than assumed away)."""
    return state not in PENDING_STATES


def failed(state: str | None) -> bool:
    """Ended in anything but success."""
    return state in FAILED_STATES


def sacct_final_states() -> tuple[str, ...]:
    """``sacct --state`` abbreviations of every final state, sorted (a stable command)."""
    return tuple(sorted(ENDED_STATES.values()))
