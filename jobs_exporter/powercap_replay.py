"""Replays a recorded RAPL energy series as a powercap tree (demo stacks, tests).

For machines without RAPL (the demo stack, containers): ``jobs-exporter --powercap-replay
TRACE --powercap-root TREE`` copies TREE, a captured powercap class directory such as
fixtures/exporter/energy/powercap, to a private directory and rewrites the ``energy_uj``
file of each package and DRAM zone there as time passes, as the kernel would: the zone's
captured counter plus the joules TRACE recorded for that socket and domain since the
machine booted (the recording looped; a restarted exporter's replay goes on where the
last one was, as the hardware's counter does), wrapped at the zone's ``max_energy_range_uj``. The
exporter reads the copy through jobs_exporter/powercap.py exactly as it reads
/sys/class/powercap. A zone TRACE has no series for keeps its captured value.

TRACE is the per-interval RAPL energy of a real machine as ``rapl-trace`` prints it (the
MSR reader of the ICPE 2024 RAPL validation artifact; see fixtures/SOURCES.md): seconds
since the start, the interval, socket ``N<i>``, domain ``package`` or ``ram``, joules and
watts in that interval.
"""

from __future__ import annotations

import atexit
import bisect
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs_exporter import powercap

log = logging.getLogger(__name__)

# The powercap zone a trace domain counts in: RAPL's DRAM domain is the "dram" zone.
_ZONE_OF_DOMAIN = {"package": "package", "ram": "dram"}


def parse_rapl_trace(text: str) -> dict[tuple[int, str], list[tuple[float, float]]]:
    """(socket, zone kind) -> [(seconds at the end of the interval, joules in it)]::

        #timestamp,interval,socket,domain,energy,power
        0.005173,0.005229,N0,package,0.1097,20.9754
    """
    series: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(",")
        if len(fields) != 6 or not re.fullmatch(r"N\d+", fields[2]):
            raise ValueError(f"line {number}: not a rapl-trace sample: {line!r}")
        kind = _ZONE_OF_DOMAIN.get(fields[3])
        if kind is None:
            continue  # pp0/pp1/psys: not zones the exporter reads
        points = series.setdefault((int(fields[2][1:]), kind), [])
        at, joules = float(fields[0]), float(fields[4])
        if points and at <= points[-1][0]:
            raise ValueError(f"line {number}: time goes back")
        points.append((at, joules))
    return series


class Recording:
    """The joules one series counted from its start to ``t`` seconds, the series looped
    (its recorded power repeats), linear within a recorded interval."""

    def __init__(self, points: list[tuple[float, float]]):
        if not points:
            raise ValueError("an empty series")
        self.times = [0.0] + [at for at, _ in points]
        self.totals = [0.0]
        for _, joules in points:
            self.totals.append(self.totals[-1] + joules)
        self.period = self.times[-1]

    def joules(self, t: float) -> float:
        loops, rest = divmod(max(t, 0.0), self.period)
        i = min(bisect.bisect_right(self.times, rest), len(self.times) - 1)
        t0, t1 = self.times[i - 1], self.times[i]
        e0, e1 = self.totals[i - 1], self.totals[i]
        return loops * self.totals[-1] + e0 + (e1 - e0) * (rest - t0) / (t1 - t0)

    @property
    def mean_watts(self) -> float:
        return self.totals[-1] / self.period


def zone_series_key(zone: powercap.Zone) -> tuple[int, str]:
    """The (socket, kind) a zone counts: ``intel-rapl:1`` (package-1) and its DRAM
    sub-zone ``intel-rapl:1:0`` are socket 1's."""
    socket = re.search(r"rapl:(\d+)", os.path.basename(zone.path))
    return (int(socket.group(1)) if socket else 0, zone.kind)


@dataclass
class _Replayed:
    zone: powercap.Zone
    start_uj: int
    recording: Recording


class PowercapReplay:
    """A private copy of ``tree`` whose zones count the recorded series from now on."""

    # What jobs_exporter_replay_info says (registry.py): what the replay stands in for,
    # and the trace's file name ("" for a trace given as text).
    replay_source = "powercap"
    recording = ""

    def __init__(self, tree: str, trace: str, root: str | None = None,
                 clock: Callable[[], float] = time.monotonic, started: float | None = None):
        self.root = root or tempfile.mkdtemp(prefix="jobs-exporter-powercap-")
        shutil.copytree(tree, self.root, dirs_exist_ok=True, symlinks=True)
        series = parse_rapl_trace(trace)
        self.zones: list[_Replayed] = []
        for zone in powercap.discover_zones(self.root):
            points = series.get(zone_series_key(zone))
            if points:
                start = powercap.read_energy_uj(zone.path)
                self.zones.append(_Replayed(zone, start, Recording(points)))
        if not self.zones:
            raise ValueError(f"no zone under {tree} has a series in the trace")
        self.clock = clock
        # None: counting from now. ``start_replay`` counts from the boot (monotonic 0), as
        # the hardware does, so a restarted exporter's copy goes on where the last one was.
        self.started = clock() if started is None else started
        self._stop = threading.Event()

    def advance(self) -> None:
        """Write every replayed zone's counter for the present moment."""
        elapsed = self.clock() - self.started
        for z in self.zones:
            counted = round(z.recording.joules(elapsed) * 1e6)
            _write_atomically(os.path.join(z.zone.path, "energy_uj"),
                              f"{(z.start_uj + counted) % z.zone.max_range_uj}\n")

    def start(self, interval: float = 0.5) -> None:
        """Advance the counters every ``interval`` seconds from a thread of their own (as
        the hardware counts whether or not anyone reads)."""
        self.advance()

        def run() -> None:
            while not self._stop.wait(interval):
                try:
                    self.advance()
                except OSError as exc:  # the copy removed under us: stop, say why
                    log.error("powercap replay stopped: %s", exc)
                    return

        threading.Thread(target=run, name="powercap-replay", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def _write_atomically(path: str, text: str) -> None:
    # A reader opening the file mid-write would see a partial number: write a sibling,
    # then rename over (the reader gets the old file or the new one, whole).
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def start_replay(trace_path: str, tree: str) -> PowercapReplay:
    """The replay of ``trace_path`` over ``tree``, counting, its copy removed at exit."""
    with open(trace_path) as f:
        trace = f.read()
    replay = PowercapReplay(tree, trace, started=0.0)
    replay.recording = os.path.basename(trace_path)
    atexit.register(shutil.rmtree, replay.root, True)
    replay.start()
    for z in replay.zones:
        log.info("powercap replay: %s (%s) counts %.1f W on average from %s",
                 os.path.basename(z.zone.path), z.zone.label, z.recording.mean_watts,
                 trace_path)
    return replay
