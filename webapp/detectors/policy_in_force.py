"""The site's policy in force in a process: the one loader of ``JOBREPORT_POLICY_DIR``
(``in_force(directory)``), read again without a restart.

On use, at most every ``CHECK_SECONDS``, the directory's ``*.toml`` files are stat'ed
(name, mtime, size, inode: cheap); when any changed, or after a SIGHUP
(``reload_on_sighup``), the directory is read again with ``policy.load``. A broken edit
keeps the last good policy: its problems (each ``file:line``) are logged once per change
and kept for the staff pages (``InForce.problems``) until the files load again. With no
good policy read yet (a process started on a broken directory) ``policy()`` raises
PolicyError, as the start did before the policy reloaded.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from webapp.detectors import NAMES
from webapp.detectors.policy import NO_POLICY, Policy, PolicyError, load

log = logging.getLogger(__name__)

# Seconds between two looks at the files: a change is in force this long after it at most.
CHECK_SECONDS = 5.0

Stamp = tuple[object, ...]


@dataclass(frozen=True)
class InForce:
    """The policy the process judges by (None: none good read yet) and, when the files
    as they are now do not load, their problems."""

    policy: Policy | None
    problems: tuple[str, ...] = ()


def _stamp(directory: str) -> Stamp:
    """What changes when a file the policy is read from changes (an unreadable directory:
    its error, so a directory that comes back is read again)."""
    root = Path(directory)
    try:
        stamp: list[object] = [root.is_dir()]
        for path in sorted(root.glob("*.toml")):
            st = path.stat()
            stamp.append((path.name, st.st_mtime_ns, st.st_size, st.st_ino))
    except OSError as exc:
        return ("unreadable", str(exc))
    return tuple(stamp)


# SIGHUPs received: each source compares the count it last saw; the handler only counts
# (a signal handler that took a lock could wait on its own thread).
_hups = 0


class PolicySource:
    """One directory's policy in force, read on first use and again when it changes."""

    def __init__(self, directory: str, detectors: frozenset[str],
                 check_seconds: float = CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.detectors = detectors
        self.check_seconds = check_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._state = InForce(NO_POLICY if not directory else None)
        self._stamp: Stamp | None = None  # None: never read
        self._checked = float("-inf")
        self._hups_seen = _hups
        self._logged: tuple[Stamp, tuple[str, ...]] | None = None

    def reload(self) -> None:
        """Read the files on the next use, changed or not."""
        with self._lock:
            self._stamp = None

    def state(self) -> InForce:
        """The policy in force and the files' problems, after the cheap check."""
        if not self.directory:
            return self._state
        with self._lock:
            now = self.clock()
            forced = self._hups_seen != _hups or self._stamp is None
            if forced or now - self._checked >= self.check_seconds:
                self._checked, self._hups_seen = now, _hups
                stamp = _stamp(self.directory)
                if forced or stamp != self._stamp:
                    self._read(stamp)
            return self._state

    def policy(self) -> Policy:
        """The policy to judge by; PolicyError when none has loaded yet."""
        state = self.state()
        if state.policy is None:
            raise PolicyError(list(state.problems))
        return state.policy

    def _read(self, stamp: Stamp) -> None:
        before = self._state.policy
        try:
            policy = load(self.directory, self.detectors)
        except PolicyError as exc:
            problems = tuple(exc.problems)
            self._state = InForce(before, problems)
            if self._logged != (stamp, problems):
                kept = (f"policy {before.version} stays in force" if before
                        else "no policy is in force: reports are not judged until it loads")
                log.error("site policy %s does not load (%s):\n%s", self.directory, kept,
                          "\n".join(problems))
            self._logged = (stamp, problems)
        else:
            self._state = InForce(policy)
            if before is not None and before.version != policy.version:
                log.warning("site policy %s reloaded: version %s (was %s)", self.directory,
                            policy.version, before.version)
            self._logged = None
        self._stamp = stamp


_SOURCES: dict[str, PolicySource] = {}
_SOURCES_LOCK = threading.Lock()


def in_force(directory: str) -> PolicySource:
    """The process's source of the policy in ``directory`` (JOBREPORT_POLICY_DIR), shared
    by every report service of the process."""
    with _SOURCES_LOCK:
        source = _SOURCES.get(directory)
        if source is None:
            source = _SOURCES[directory] = PolicySource(directory, NAMES)
        return source


def _on_hup(_signum: int, _frame: FrameType | None) -> None:
    global _hups
    _hups += 1


@contextmanager
def reload_on_sighup() -> Iterator[None]:
    """Within: SIGHUP makes every policy of this process be read again on its next use
    (the long-running commands; gunicorn's workers leave HUP to their master, which
    starts new ones). The handler before is restored after. Off the main thread, where
    no handler can be installed, nothing changes."""
    try:
        previous = signal.signal(signal.SIGHUP, _on_hup)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:  # None: a handler installed outside Python; the default is the nearest
        signal.signal(signal.SIGHUP, signal.SIG_DFL if previous is None else previous)
