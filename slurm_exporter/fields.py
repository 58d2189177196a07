"""Splitting the `|`-terminated lines of ``-O 'Field:|,...'`` output, and their numbers."""

from __future__ import annotations


def split_line(line: str, count: int) -> list[str]:
    """The ``count`` fields of one line; the last field is free text and may hold ``|``.

    Every field ends with ``|``, so a line has ``count`` separators and an empty tail.
    """
    parts = line.split("|", count - 1)
    if len(parts) != count:
        raise ValueError(f"expected {count} '|'-separated fields in {line!r}")
    last = parts[-1]
    if not last.endswith("|"):
        raise ValueError(f"line does not end with '|': {line!r}")
    parts[-1] = last[:-1]
    return parts


def optional_float(text: str) -> float | None:
    """``'0.56'`` -> 0.56; ``'N/A'`` or empty (not reported yet) -> None."""
    text = text.strip()
    if text in ("", "N/A", "n/a"):
        return None
    return float(text)


def integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None
