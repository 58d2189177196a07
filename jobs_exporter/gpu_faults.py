"""NVIDIA XID events, counted by card, GPU instance and XID code in a background thread.

An XID is the driver's report of an error on a card: most are the hardware's or the
driver's (79: the GPU fell off the bus, 48: a double-bit ECC error), a few the program's
(13, 31, 43: the report leaves those out). NVML delivers them as events:
``nvmlEventSetCreate``, ``nvmlDeviceRegisterEvents(card, nvmlEventTypeXidCriticalError,
set)`` for every card, then ``nvmlEventSetWait_v2(set, 1000)`` in a loop, each answer an
``c_nvmlEventData_t``: its ``device`` (the card, told by its PCI bus id),
``eventData`` (the XID code) and ``gpuInstanceId`` (a MIG GPU instance the error belongs
to, 0xFFFFFFFF for the whole card).

Bounded: the thread waits at most a second at a time and ends once its reader is gone;
at most ``MAX_KEYS`` different (card, instance, code) are counted (more are dropped and
counted in ``dropped``); an error other than the wait's timeout is logged once and waited
out a second at a time. Counts start when the exporter does: an XID before it is not seen.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from jobs_exporter.gpu_devices import parse_bus_id

log = logging.getLogger(__name__)

NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId of an event that is the whole card's
WAIT_MS = 1000
MAX_KEYS = 4096
NVML_ERROR_TIMEOUT = 10  # pynvml's NVML_ERROR_TIMEOUT


class XidCounts:
    """XID events seen, by (card bus id, GPU instance or None, code); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int | None, int], int] = {}
        self.dropped = 0

    def add(self, card: str, instance: int | None, xid: int) -> None:
        key = (card, instance, xid)
        with self._lock:
            if key not in self._counts and len(self._counts) >= MAX_KEYS:
                self.dropped += 1
                return
            self._counts[key] = self._counts.get(key, 0) + 1

    def of(self, card: str, instance: int | None = None) -> dict[int, int]:
        """Events of ``card`` by code: the whole card's and, for a MIG device
        (``instance``), its GPU instance's; for a whole card, every instance's."""
        with self._lock:
            items = list(self._counts.items())
        out: dict[int, int] = {}
        for (bus, where, xid), count in items:
            if bus == card and (instance is None or where in (None, instance)):
                out[xid] = out.get(xid, 0) + count
        return out


def watch(nv: Any, cards: list[Any], counts: XidCounts, owner: object
          ) -> threading.Thread | None:
    """Start counting the XIDs of ``cards`` (NVML handles) into ``counts`` while
    ``owner`` lives: the thread, or None when NVML has no events here."""
    try:
        event_set = nv.nvmlEventSetCreate()
    except nv.NVMLError as exc:
        log.info("XID events not watched: %s", exc)
        return None
    registered = 0
    for card in cards:
        try:
            nv.nvmlDeviceRegisterEvents(card, nv.nvmlEventTypeXidCriticalError, event_set)
            registered += 1
        except nv.NVMLError as exc:  # e.g. NotSupported on a board without them
            log.info("XID events of a GPU not watched: %s", exc)
    if not registered:
        _free(nv, event_set)
        return None
    alive = weakref.ref(owner)
    thread = threading.Thread(target=_run, args=(nv, event_set, counts, alive), daemon=True,
                              name="xid-events")
    thread.start()
    return thread


def _run(nv: Any, event_set: Any, counts: XidCounts, alive: Callable[[], object | None]
         ) -> None:
    logged = False
    while alive() is not None:
        try:
            data = nv.nvmlEventSetWait_v2(event_set, WAIT_MS)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_TIMEOUT",
                                                      NVML_ERROR_TIMEOUT):
                continue
            if not logged:
                log.warning("waiting for XID events failed (%s); retrying each second", exc)
                logged = True
            time.sleep(WAIT_MS / 1000)
            continue
        if not data.eventType & nv.nvmlEventTypeXidCriticalError:
            continue
        try:
            bus = nv.nvmlDeviceGetPciInfo(data.device).busId
            card = parse_bus_id(bus.decode() if isinstance(bus, bytes) else bus)
        except (nv.NVMLError, ValueError) as exc:
            log.warning("XID %s of an unknown GPU: %s", data.eventData, exc)
            continue
        instance = None if data.gpuInstanceId == NO_INSTANCE else int(data.gpuInstanceId)
        log.warning("GPU %s reported XID %d%s", card, data.eventData,
                    "" if instance is None else f" (GPU instance {instance})")
        counts.add(card, instance, int(data.eventData))
    _free(nv, event_set)


def _free(nv: Any, event_set: Any) -> None:
    try:
        nv.nvmlEventSetFree(event_set)
    except nv.NVMLError:
        pass
