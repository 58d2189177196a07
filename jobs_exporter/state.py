"""What jobs-exporter keeps across its own restart: the counters it adds up itself.

A job's joules, the I/O of its exited processes and its threads' wait seconds exist only
in the exporter (the kernel and the meters hold no per-job total of them). Kept in memory
alone, a restart (an upgrade, a crash, a config push) would start them at 0 and a report
reading the job's last sample would count from the restart on. So the collectors that
add up (``Stateful``) give a snapshot of their state, written to one JSON file every
``SAVE_EVERY`` seconds and at a clean stop, and read back at the start.

Nothing between the last snapshot and the restart is lost: every snapshot holds the
readings its sums were taken from (RAPL, GPU and cgroup CPU counters; each process's I/O
and each thread's times), which are cumulative, so the first scrape after the restart
adds all that happened since. Only a thread or process that exited meanwhile takes its
last interval with it, as between two scrapes.

The file is ignored, with a log line, when it belongs to another boot (its jobs are
gone and the hardware counters restarted), is of another format version, or cannot be
read. It is written to a sibling and renamed over, so a crash mid-write leaves the one
before.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)

VERSION = 1
SAVE_EVERY = 30.0  # seconds; a crash loses nothing of it (see above), only a clean stop
BOOT_ID = "/proc/sys/kernel/random/boot_id"


@runtime_checkable
class Stateful(Protocol):
    """A collector whose figures are sums kept in the exporter."""

    name: str

    def snapshot(self) -> dict[str, Any]: ...

    def restore(self, data: Mapping[str, Any]) -> None: ...


def boot_id(path: str = BOOT_ID) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


class StateFile:
    """One exporter's snapshot file (JOBREPORT_EXPORTER_STATE_FILE)."""

    def __init__(self, path: str, boot: Callable[[], str] = boot_id,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.boot = boot
        self.clock = clock
        self._saved_at: float | None = None
        self._failing = False  # logged once while saving fails

    def load(self) -> dict[str, Any]:
        """Collector name -> its snapshot; {} when there is none to use (logged why)."""
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            log.info("no state in %s: every job's sums start now", self.path)
            return {}
        except (OSError, ValueError) as exc:
            log.error("state %s unreadable (%s): every job's sums start now", self.path, exc)
            return {}
        if not isinstance(data, dict) or data.get("version") != VERSION:
            log.warning("state %s is of another version: not used", self.path)
            return {}
        if data.get("boot_id") != self.boot():
            log.info("state %s is of an earlier boot: not used", self.path)
            return {}
        parts = data.get("collectors")
        age = time.time() - float(data.get("saved_at", 0))
        log.info("state of %s read back from %s (saved %.0f s ago)",
                 ", ".join(sorted(parts or {})) or "nothing", self.path, age)
        return dict(parts) if isinstance(parts, dict) else {}

    def due(self) -> bool:
        return self._saved_at is None or self.clock() - self._saved_at >= SAVE_EVERY

    def save(self, parts: Mapping[str, Any]) -> None:
        """Write the snapshot; a failure is logged (once until it works again), never
        raised: a full or read-only disk must not stop the scrapes."""
        self._saved_at = self.clock()
        data = {"version": VERSION, "boot_id": self.boot(), "saved_at": time.time(),
                "collectors": parts}
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError as exc:
            if not self._failing:
                log.error("cannot save state to %s (%s): a restart would lose the sums",
                          self.path, exc)
            self._failing = True
            return
        if self._failing:
            log.info("state saved to %s again", self.path)
        self._failing = False
