"""Values as sacct prints them: durations, memory sizes, TRES, states, times, host lists.

Every function here is pure and reads one field's text; ``webapp.sources.sacct`` groups
the lines of an answer into jobs and steps with them.

Times: sacct prints local wall-clock time without a zone (``2024-04-04T19:29:45``), or
Unix seconds when ``SLURM_TIME_FORMAT=%s``. The default runner sets ``%s`` so no
daylight-saving guess is ever needed; text in ISO form is read as local time (or the
``tz`` given) and converted to UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from functools import lru_cache

from jobreport_common.slurm_values import parse_size, tres_memory_bytes
from jobreport_common.split import split_top
from webapp.model import TimeLimitKind

_NO_LIMIT = frozenset({"", "UNLIMITED", "PARTITION_LIMIT", "INVALID", "NONE", "N/A"})
_NO_TIME = frozenset({"", "UNKNOWN", "NONE", "N/A", "0"})
_UNKNOWN_SIZE_RE = re.compile(r"^[0-9]+(?:\.[0-9]*)?[KMGTP]?\?\Z")


@lru_cache(maxsize=8192)
def parse_sacct_duration(text: str) -> float | None:
    """Seconds from a Slurm duration; None for no limit or no value.

        02:03.640        (MM:SS.mmm, the CPU fields)
        762-08:11:49     (D-HH:MM:SS)

    Also ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and a bare number of minutes
    (Slurm's own input syntax, and what TimelimitRaw prints).
    """
    t = text.strip()
    if t.upper() in _NO_LIMIT:
        return None
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        days = int(d)
    parts = t.split(":")
    try:
        if len(parts) == 3:
            h, m, s = int(parts[0]), int(parts[1]), float(parts[2])
        elif len(parts) == 2:
            # After "D-" the pair is HH:MM; alone it is MM:SS (sacct's short CPU times).
            if days:
                h, m, s = int(parts[0]), int(parts[1]), 0.0
            else:
                h, m, s = 0, int(parts[0]), float(parts[1])
        elif days:
            h, m, s = int(parts[0]), 0, 0.0
        else:
            h, m, s = 0, int(parts[0]), 0.0
    except ValueError:
        raise ValueError(f"not a Slurm duration: {text!r}") from None
    return days * 86400 + h * 3600 + m * 60 + s


# TimelimitRaw prints Slurm's INFINITE and NO_VAL as numbers.
_RAW_LIMITS = {"4294967295": TimeLimitKind.UNLIMITED, "4294967294": TimeLimitKind.PARTITION}


@lru_cache(maxsize=1024)
def parse_time_limit(text: str, raw: str = "") -> tuple[TimeLimitKind | None, float | None]:
    """Which limit applied and its seconds, from Timelimit (else TimelimitRaw, minutes).

        2-00:00:00        (the job's own limit)
        Partition_Limit   (the partition's MaxTime applies; sacct does not say which)

    ``UNLIMITED`` is the only text read as no limit; empty or unknown text is (None, None).
    """
    t = text.strip().upper()
    if t == "UNLIMITED":
        return TimeLimitKind.UNLIMITED, None
    if t == "PARTITION_LIMIT":
        return TimeLimitKind.PARTITION, None
    seconds = parse_sacct_duration(text)
    if seconds is not None:
        return TimeLimitKind.JOB, seconds
    r = raw.strip()
    if r.upper() == "UNLIMITED" or r in _RAW_LIMITS:
        return _RAW_LIMITS.get(r, TimeLimitKind.UNLIMITED), None
    if r.isdigit():
        return TimeLimitKind.JOB, int(r) * 60.0
    return None, None


@lru_cache(maxsize=8192)
def parse_memory(text: str) -> int | None:
    """Bytes from a sacct usage figure (MaxRSS, a usage TRES's ``mem``; 1024-based
    suffixes); None when empty.

        1294440K
        0

    A bare number is bytes: Slurm prints usage in bytes, shortened to K/M/G only when it
    divides exactly. A unit of ``?`` is past sacct's largest (P): how it prints NO_VAL64,
    its "not known", as ``16?`` (seen on a job's allocation line the moment after it
    ended). None too. An allocation's memory is read by ``tres_memory_bytes`` (MiB).
    """
    t = text.strip().upper()
    if not t or _UNKNOWN_SIZE_RE.match(t):
        return None
    return parse_size(t)


@lru_cache(maxsize=1024)
def parse_alloc_memory(text: str) -> int | None:
    """Bytes of an allocation's or a request's memory (AllocTRES's ``mem``, ReqMem without
    its ``c``/``n``); None when empty or not known (``16?``).

        500M
        62.50G

    Slurm counts these in MB: a bare number (``0``, or a raw count) is MiB, not bytes as
    in ``parse_memory``.
    """
    t = text.strip().upper()
    if not t or _UNKNOWN_SIZE_RE.match(t):
        return None
    return tres_memory_bytes(t)


def parse_req_mem(text: str, cpus: int | None = None, nodes: int | None = None) -> int | None:
    """Requested memory of the whole job in bytes.

        4000Mc      (Slurm < 21.08: per CPU, times ``cpus``)
        100Gn       (per node, times ``nodes``)

    Newer Slurm prints the job total (``10G``). None when the multiplier is unknown.
    """
    t = text.strip()
    if not t:
        return None
    suffix = t[-1]
    if suffix in "cn":
        per = parse_alloc_memory(t[:-1])
        count = cpus if suffix == "c" else nodes
        if per is None or not count:
            return None
        return per * count
    return parse_alloc_memory(t)


@lru_cache(maxsize=1024)
def parse_sacct_state(text: str) -> tuple[str, int | None]:
    """The state name and, for a cancellation, the uid that cancelled.

        CANCELLED by 223988
        OUT_OF_MEMORY
    """
    t = text.strip()
    name, sep, who = t.partition(" by ")
    if sep:
        try:
            return name.upper(), int(who)
        except ValueError:
            return name.upper(), None
    return t.rstrip("+").upper(), None


@lru_cache(maxsize=4096)
def parse_time(text: str, tz: tzinfo | None = None) -> datetime | None:
    """A UTC-aware datetime from a sacct timestamp; None for Unknown/None.

        2024-04-04T19:29:45     (local time of the sacct host, or ``tz``)
        1681342706              (SLURM_TIME_FORMAT=%s)
    """
    t = text.strip()
    if t.upper() in _NO_TIME:
        return None
    if t.isdigit():
        try:
            return datetime.fromtimestamp(int(t), UTC)
        except (OverflowError, OSError):
            raise ValueError(f"timestamp {t[:20]!r} out of range") from None
    naive = datetime.fromisoformat(t)
    if tz is None:
        return naive.astimezone(UTC)  # naive astimezone() means "this host's local time"
    if tz is UTC:
        return naive.replace(tzinfo=UTC)
    return naive.replace(tzinfo=tz).astimezone(UTC)


# More hosts than any cluster has: a hostile or corrupt range is refused, not expanded.
MAX_HOSTS = 65536


def _expand_range(body: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not sep:
            out.append(lo)
            continue
        width = len(lo)  # node[022-023] keeps its zero padding
        first, last = int(lo), int(hi)
        if last - first + len(out) >= MAX_HOSTS:
            raise ValueError(f"host range [{body[:40]}] names over {MAX_HOSTS} hosts")
        out.extend(str(i).zfill(width) for i in range(first, last + 1))
    return out


@lru_cache(maxsize=4096)
def parse_nodelist(text: str) -> tuple[str, ...]:
    """Host names from a Slurm host list; () when none was assigned; ValueError when the
    list is malformed or names more than MAX_HOSTS hosts.

        omni[1,10-12]
        mycluster2-node[022-023,057-058]
    """
    t = text.strip()
    if not t or t in ("None assigned", "(null)"):
        return ()
    hosts: list[str] = []
    for item in split_top(t):
        open_ = item.find("[")
        if open_ < 0:
            hosts.append(item)
            continue
        close = item.index("]", open_)
        prefix, body, rest = item[:open_], item[open_ + 1 : close], item[close + 1 :]
        tails = parse_nodelist(rest) if rest else ("",)
        names = _expand_range(body)
        if (len(hosts) + len(names)) * len(tails) > MAX_HOSTS:
            raise ValueError(f"host list {t[:40]!r} names over {MAX_HOSTS} hosts")
        hosts.extend(prefix + n + tail for n in names for tail in tails)
    return tuple(hosts)
