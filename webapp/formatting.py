"""Numbers as people and Slurm read them: bytes, durations, percentages, ``--mem``/``--time``;
and Slurm's own text with its control characters shown (``visible``).

The model keeps bytes and seconds; only renderers and advice texts call these.
``None`` (unknown) formats as ``n/a`` rather than as zero. No number is ever written with
an exponent: people read ``< 0.01 core-hours``, not ``3.53e-05``.
"""

from __future__ import annotations

import math
from decimal import Decimal

# Re-exported: the one definition of the units is jobreport_common.units.
from jobreport_common.units import GIB, MIB

JOULES_PER_KWH = 3.6e6  # the one conversion of energy every figure and table uses
UNKNOWN = "n/a"
_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SHOWN = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """Slurm text (a job name, a path) with every character a terminal, a browser, LaTeX
    or a mail header would obey or hide written out instead, as in a shell's ``$'...'``:
    ``\\n``, ``\\r``, ``\\t``, else ``\\x1b`` / ``\\u2028``. The one place job text is
    made visible: a line break cannot move the cursor, start a header or a new line,
    and the reader still sees it was there."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _shown(c) for c in text)


def _shown(char: str) -> str:
    if char in _SHOWN:
        return _SHOWN[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else (
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def format_bytes(n: float | None) -> str:
    """``1.5 GiB``, ``512 MiB``, ``12 GiB`` (1024-based, like Slurm and the kernel)."""
    if n is None:
        return UNKNOWN
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit < len(_BINARY) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(value)} B"
    return f"{value:.1f} {_BINARY[unit]}" if abs(value) < 10 else f"{value:.0f} {_BINARY[unit]}"


def slurm_mem(n: float) -> str:
    """A ``--mem`` value at least ``n`` bytes: whole G from ~1 GiB up, else 100M steps."""
    if n > 1000 * MIB:
        return f"{math.ceil(n / GIB - 1e-9)}G"
    return f"{max(1, math.ceil(n / (100 * MIB) - 1e-9)) * 100}M"


def slurm_time(seconds: float) -> str:
    """A ``--time`` value: ``HH:MM:SS``, or ``D-HH:MM:SS`` from one day up."""
    total = max(0, math.ceil(seconds - 1e-9))
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{days}-{h:02d}:{m:02d}:{s:02d}" if days else f"{h:02d}:{m:02d}:{s:02d}"


def slurm_mem_bytes(value: str) -> int:
    """The bytes a ``slurm_mem`` value stands for: ``600M`` -> 600 MiB, ``6G`` -> 6 GiB."""
    return int(value[:-1]) * (GIB if value.endswith("G") else MIB)


def slurm_time_seconds(value: str) -> int:
    """The seconds of a ``slurm_time`` value: ``1-02:00:00`` -> 93600."""
    days, _, rest = value.rpartition("-")
    h, m, s = (int(x) for x in rest.split(":"))
    return (int(days) if days else 0) * 86400 + h * 3600 + m * 60 + s


def format_duration(seconds: float | None) -> str:
    """``45s``, ``12m 05s``, ``1h 02m``, ``2d 03h``: the two largest units."""
    if seconds is None:
        return UNKNOWN
    total = round(seconds)
    if total < 60:
        return f"{seconds:.0f}s" if seconds >= 1 or seconds == 0 else f"{seconds:.2f}s"
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if days:
        return f"{days}d {h:02d}h"
    if h:
        return f"{h}h {m:02d}m"
    return f"{m}m {s:02d}s"


def format_energy(joules: float | None) -> str:
    """Joules as kWh (``0.42 kWh``), in Wh below 0.01 kWh (a short job draws a few), never
    with an exponent."""
    if joules is None:
        return UNKNOWN
    kwh = joules / JOULES_PER_KWH
    return format_amount(kwh, "kWh") if kwh >= 0.01 else format_amount(kwh * 1000, "Wh")


def format_co2e(grams: float | None) -> str:
    if grams is None:
        return UNKNOWN
    return (format_amount(grams / 1000, "kg CO2e") if grams >= 1000
            else format_amount(grams, "g CO2e"))


def format_percent(ratio: float | None) -> str:
    """``12%`` for 0.12; one decimal below 10 % so that 0.4 % does not read as 0 %."""
    if ratio is None:
        return UNKNOWN
    pct = ratio * 100
    return f"{pct:.1f}%" if abs(pct) < 10 and pct != 0 else f"{pct:.0f}%"


def format_amount(value: float | None, unit: str = "") -> str:
    """An amount as people read it, never with an exponent: ``< 0.01 core-hours``,
    ``0.9 core-hours``, ``12.5 GPU-hours``, ``1,200 units``; ``0`` for nothing."""
    if value is None:
        return UNKNOWN
    if value < 0:
        return "-" + format_amount(-value, unit)
    suffix = f" {unit}" if unit else ""
    if value == 0:
        return f"0{suffix}"
    if value < 0.01:
        return f"< 0.01{suffix}"
    if value < 10:
        text = f"{value:.2f}".rstrip("0")
        return (text + "0" if text.endswith(".") else text) + suffix
    if value < 100:
        return f"{value:.1f}".removesuffix(".0") + suffix
    return f"{value:,.0f}{suffix}"


def format_number(value: float) -> str:
    """A setting's number as written, never with an exponent: ``8388608``, ``0.00001``."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < 1e18 and value == int(value):
        return str(int(value))
    return format(Decimal(repr(value)), "f")
