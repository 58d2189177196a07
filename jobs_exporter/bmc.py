"""The node's power as its BMC measures it: IPMI DCMI (ipmitool or FreeIPMI) or Redfish.

Asking a BMC takes from 0.1 s to several seconds, so it never runs in the scrape path: a
``BmcPoller`` thread asks every ``interval`` seconds and a scrape takes the last reading
and its age. A failed or unparsable answer keeps the previous reading (its age grows).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

COMMANDS = {
    "ipmitool": ["ipmitool", "dcmi", "power", "reading"],
    "ipmi-dcmi": ["ipmi-dcmi", "--get-system-power-statistics"],
}
TIMEOUT_SECONDS = 10.0

_IPMITOOL = re.compile(r"Instantaneous power reading:\s*(\d+(?:\.\d+)?)\s*Watts", re.I)
_FREEIPMI = re.compile(r"^Current Power\s*:\s*(\d+(?:\.\d+)?)\s*Watts", re.I | re.M)


def parse_ipmitool(text: str) -> float:
    """Watts from ``ipmitool dcmi power reading``::

        Instantaneous power reading:                  2578 Watts
        Minimum during sampling period:               2118 Watts
    """
    match = _IPMITOOL.search(text)
    if match is None:
        raise ValueError("no 'Instantaneous power reading' line")
    return float(match.group(1))


def parse_ipmi_dcmi(text: str) -> float:
    """Watts from FreeIPMI ``ipmi-dcmi --get-system-power-statistics``::

        Current Power                        : 332 Watts
        Minimum Power over sampling duration : 68 watts
    """
    match = _FREEIPMI.search(text)
    if match is None:
        raise ValueError("no 'Current Power' line")
    return float(match.group(1))


def parse_redfish_power(text: str) -> float:
    """Watts from a Redfish ``Chassis/<id>/Power`` resource: the sum of every
    ``PowerControl`` member's ``PowerConsumedWatts`` (one member per power input)::

        {"PowerControl": [{"MemberId": "0", "PowerConsumedWatts": 344, ...},
                          {"MemberId": "1", "PowerConsumedWatts": 53, ...}], ...}
    """
    members = json.loads(text).get("PowerControl") or []
    watts = [m["PowerConsumedWatts"] for m in members if m.get("PowerConsumedWatts") is not None]
    if not watts:
        raise ValueError("no PowerControl member with PowerConsumedWatts")
    return float(sum(watts))


PARSERS: dict[str, Callable[[str], float]] = {
    "ipmitool": parse_ipmitool,
    "ipmi-dcmi": parse_ipmi_dcmi,
    "redfish": parse_redfish_power,
}


def run_command(argv: list[str]) -> str:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=True
    ).stdout


def fetch_redfish(url: str, auth: str = "") -> str:
    """GET a Redfish resource; ``auth`` is ``user:password`` or empty."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310
        body: bytes = answer.read()
        return body.decode()


@dataclass(frozen=True)
class Reading:
    watts: float
    at: float  # time.monotonic() of the answer


class BmcPoller:
    """Asks ``ask()`` (text) every ``interval`` seconds in a daemon thread; ``latest()``
    is the last reading parsed by ``parse``, or None before the first good one."""

    def __init__(
        self,
        ask: Callable[[], str],
        parse: Callable[[str], float],
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ask, self.parse, self.interval, self.clock = ask, parse, interval, clock
        self._latest: Reading | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> None:
        try:
            watts = self.parse(self.ask())
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            log.warning("BMC power reading failed: %s", exc)
            return
        self._latest = Reading(watts, self.clock())

    def latest(self) -> Reading | None:
        return self._latest

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bmc-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval)
