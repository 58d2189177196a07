"""Waiting for a condition, never for a fixed time: the one poll loop of the tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str | Callable[[], str],
             every: float = 1.0) -> T:
    """Call ``check`` every ``every`` seconds until it returns something true, and return
    that. After ``timeout`` seconds a TimeoutError says ``what`` was waited for (a
    callable is asked then, to describe the last state seen). ``check`` may raise to
    stop the wait at once (a server that exited, a job that failed)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"after {timeout:g} s: {what() if callable(what) else what}")
        time.sleep(every)
