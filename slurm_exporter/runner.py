"""Run one Slurm command under a timeout that kills its whole process group."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)


class CommandFailed(Exception):
    """The command timed out (``kind='timeout'``) or exited non-zero (``kind='exit'``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def run_command(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> str:
    """stdout of ``argv``; stderr is only logged (Slurm warns on stderr and still succeeds).

    The command starts its own session, so on timeout SIGKILL reaches any child it
    spawned too (a wrapper script, a hung plugin) and none is left behind.
    """
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise CommandFailed("exit", f"{argv[0]}: {exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        raise CommandFailed("timeout", f"{argv[0]} killed after {timeout:g} s") from None
    if err.strip():
        log.warning("%s stderr: %s", argv[0], err.decode(errors="replace").strip()[:500])
    if proc.returncode != 0:
        raise CommandFailed("exit", f"{argv[0]} exited {proc.returncode}")
    log.debug("%s ran in %.3f s", argv[0], time.monotonic() - start)
    return out.decode(errors="replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
