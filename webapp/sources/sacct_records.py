"""sacct's ``--parsable2`` text cut into records, whatever line breaks its free text holds.

Slurm keeps a job name or a work directory as the bytes it was given: a line break or
the delimiter in one prints raw, so a record may span lines and hold extra delimiters.
Every sacct call asks for a fresh random ``--delimiter`` (``new_delimiter``) no job text
holds by chance; lines are then joined until a record has all its fields (a line break
inside a field stays a ``\\n`` in its value). The delimiter found inside the one free-text
column (``glue``) is glued back there: how ``|`` in a name reads when ``|`` delimits.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator, Sequence

log = logging.getLogger(__name__)

DELIMITER_OPTION = "--delimiter="


def new_delimiter() -> str:
    """A delimiter for one sacct call: 64 random bits, so no job text holds it by chance."""
    return f"~{secrets.token_hex(8)}~"


def delimiter_argv(delimiter: str) -> list[str]:
    """sacct's options for parsable output with ``delimiter``, without a header."""
    return ["--parsable2", "--noheader", DELIMITER_OPTION + delimiter]


def delimiter_of(argv: Sequence[str]) -> str:
    """The delimiter an argv asks sacct for: its ``--delimiter=``, else sacct's ``|``."""
    for arg in argv:
        if arg.startswith(DELIMITER_OPTION):
            return arg[len(DELIMITER_OPTION) :]
    return "|"


def glue_column(fields: Sequence[str]) -> int:
    """The free-text column a stray delimiter belongs to: JobName, else WorkDir, else -1."""
    names = [f.strip().lower() for f in fields]
    for name in ("jobname", "workdir"):
        if name in names:
            return names.index(name)
    return -1


def _fields(parts: list[str], n: int, delimiter: str, glue: int,
            trailing: bool) -> list[str] | None:
    """A line's fields when its count is off: `-p`'s trailing delimiter (``trailing``), or
    the delimiter inside the free-text column ``glue``; None when it cannot be read."""
    if trailing and len(parts) > n and parts[-1] == "":
        parts.pop()  # `sacct -p` ends every line with the delimiter
    extra = len(parts) - n
    if extra > 0 and glue >= 0:
        parts[glue : glue + extra + 1] = [delimiter.join(parts[glue : glue + extra + 1])]
    elif extra:
        return None
    return parts


def split_records(text: str, n: int, delimiter: str, glue: int = -1) -> Iterator[list[str]]:
    """The records (``n`` fields each) of sacct's output, in order.

    A line with too few fields was cut by a line break in a field: it is joined with the
    next line(s) until the record is whole. A held piece that a whole record follows was
    not cut but broken (logged and skipped, as is a line that cannot be read)."""
    lines = text.split("\n")  # not splitlines(): \r, \v, \x1c... are text, not line ends
    held: str | None = None
    trailing: bool | None = None  # `-p` output: decided once, when a line needs it
    for line in lines:
        parts = line.split(delimiter)
        if len(parts) == n and held is None:
            yield parts  # the common case: one line, one record (each used, then dropped)
            continue
        if trailing is None and len(parts) > n:
            trailing = _dash_p(lines, n, delimiter, glue)
        if held is not None:
            if len(parts) >= n and _fields(parts[:], n, delimiter, glue, bool(trailing)):
                _skip(held, n, delimiter)  # the next record starts here: held was no cut
            else:
                line = held + "\n" + line
                parts = line.split(delimiter)
                if trailing is None and len(parts) > n:
                    trailing = _dash_p(lines, n, delimiter, glue)
            held = None
        elif not line:
            continue
        if len(parts) < n:
            held = line
            continue
        fields = _fields(parts, n, delimiter, glue, bool(trailing))
        if fields is None:
            _skip(line, n, delimiter)
        else:
            yield fields
    if held:
        _skip(held, n, delimiter)


def _dash_p(lines: list[str], n: int, delimiter: str, glue: int) -> bool:
    """Whether a line ending in an extra delimiter is `sacct -p`'s, not a name holding the
    delimiter beside an empty last column: `-p` prints no line of exactly n fields."""
    return glue < 0 or not any(line.count(delimiter) == n - 1 for line in lines)


def _skip(line: str, n: int, delimiter: str) -> None:
    count = line.count(delimiter) + 1
    log.warning("sacct line with %d fields, expected %d: skipped", count, n)
