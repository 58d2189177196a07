"""Peak Python allocation of a block: a bound that load on the machine cannot move,
where a wall-clock bound would flake."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def peak_allocated() -> Iterator[Callable[[], int]]:
    """``with peak_allocated() as peak: ...``; ``peak()`` is the block's peak in bytes."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result: list[int] = []
    try:
        yield lambda: result[0]
    finally:
        result.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
