"""scontrol for the report service: the command (no shell), and its answers kept a while.

Partitions and slurm.conf change only with a reconfigure, so each answer is kept for
``ttl`` seconds per process, shared by a web worker's threads. A failure is never kept:
a command that fails keeps nothing, and an answer its reader cannot parse is dropped, so
the next request asks scontrol again.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from cachetools import TTLCache

from webapp.model import SourceUnavailable

Runner = Callable[[list[str]], str]
T = TypeVar("T")
ANSWERS = 256  # distinct command lines kept: a site's partitions, and its config


def run_scontrol(argv: list[str], timeout: float, source: str = "partitions",
                 reason: str = "partition limits unavailable") -> str:
    """Run scontrol (no shell); SourceUnavailable(source, reason) when it is missing, slow
    or failing."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(source, reason, str(exc)) from None
    if proc.returncode != 0:
        why = (proc.stderr or "").strip().splitlines()
        raise SourceUnavailable(source, reason,
                                why[-1] if why else f"exit status {proc.returncode}")
    return proc.stdout


class ScontrolAnswers:
    """scontrol's answers by command line, each kept ``ttl`` seconds."""

    def __init__(self, runner: Runner, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._runner = runner
        self._answers: TTLCache[tuple[str, ...], str] = TTLCache(ANSWERS, ttl, timer=clock)
        self._lock = threading.Lock()  # a TTLCache is not thread-safe

    def read(self, argv: Sequence[str], parse: Callable[[str], T]) -> T:
        """``parse`` of the answer to ``argv``, asked of scontrol at most once per ``ttl``.
        The runner's error is raised and nothing kept; so is ``parse``'s ValueError, and
        the answer it could not read is dropped."""
        key = tuple(argv)
        with self._lock:
            text = self._answers.get(key)
        if text is None:
            text = self._runner(list(argv))
            with self._lock:
                self._answers[key] = text
        try:
            return parse(text)
        except ValueError:
            with self._lock:
                self._answers.pop(key, None)
            raise
