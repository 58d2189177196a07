"""Durations on the command line (`--max-span 7d`, `--since 2w`)."""

from __future__ import annotations

import re
from datetime import timedelta

_LOOKBACK_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*\Z")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_lookback(text: str) -> timedelta:
    """'90' or '90s', '30m', '1h', '2d', '1w'."""
    m = _LOOKBACK_RE.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 30m, 1h, 2d)")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
