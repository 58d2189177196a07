"""The web pages' parameters, checked before any source is asked.

Every check raises ``BadQuery`` with a message that starts with the parameter's name; the
web app answers it with a 400 page (``webapp.web.errors``). One path for every route, so
no page falls back to its default on a value it cannot read (``?days=abc``) or hands a
NUL byte to sacct (``?name=%00``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from webapp.lists.job_list import (
    DEFAULT_DAYS,
    MAX_DAYS,
    MAX_NAME,
    MAX_PAGE,
    SORT_KEYS,
    STATES,
    ListQuery,
)

MAX_TEXT = 200
# Slurm user and account names; anything else is a 400 before any query.
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")


class BadQuery(ValueError):
    """A parameter that is not one we accept (the page answers 400 naming it)."""


def whole_number(args: Mapping[str, str], key: str, low: int, high: int,
                 default: int) -> int:
    """``key`` as an int from ``low`` to ``high``; ``default`` when absent or empty.
    Digits only: ``1e3``, ``7.5``, ``-1`` and ``0x10`` are refused, not read loosely."""
    text = args.get(key, "")
    if text == "":
        return default
    if not re.fullmatch(r"[0-9]{1,9}", text) or not low <= int(text) <= high:
        raise BadQuery(f"{key} must be a whole number from {low} to {high}")
    return int(text)


def text(args: Mapping[str, str], key: str, max_length: int = MAX_TEXT) -> str:
    """``key`` stripped: printable (no NUL, no control character), at most ``max_length``."""
    value = args.get(key, "").strip()
    if len(value) > max_length or not value.isprintable():
        raise BadQuery(f"{key} must be printable text of at most {max_length} characters")
    return value


def choice(args: Mapping[str, str], key: str, options: Iterable[str], default: str = "",
           upper: bool = False) -> str:
    """``key`` when it is one of ``options`` (upper-cased first when ``upper``);
    ``default`` when absent or empty."""
    options = tuple(options)
    value = args.get(key, "").strip()
    value = value.upper() if upper else value
    if not value:
        return default
    if value not in options:
        raise BadQuery(f"{key} must be one of: {', '.join(options)}")
    return value


def flag(args: Mapping[str, str], key: str, meaning: str = "") -> bool:
    """``key=1`` (True) or ``key=0``/absent (False); ``meaning`` says what 1 does."""
    value = args.get(key, "")
    if value not in ("", "0", "1"):
        raise BadQuery(f"{key} must be 1{f' ({meaning})' if meaning else ''} or 0")
    return value == "1"


def slurm_name(value: str, key: str) -> str:
    """A Slurm user or account name (from the path or the query), else BadQuery."""
    if not NAME_RE.fullmatch(value):
        raise BadQuery(f"{key} must be a Slurm {key} name (letters, digits, _ . @ -), "
                       f"not {value!r}")
    return value


def optional_name(args: Mapping[str, str], key: str) -> str:
    """``key`` as a Slurm name, or "" when absent or empty."""
    value = args.get(key, "").strip()
    return slurm_name(value, key) if value else ""


def list_query(args: Mapping[str, str], clusters: Iterable[str] = (),
               default_sort: str = "submit") -> ListQuery:
    """A job list's parameters; raise BadQuery on any value outside what the page offers."""
    days = whole_number(args, "days", 1, MAX_DAYS, DEFAULT_DAYS)
    state = choice(args, "state", STATES, upper=True)
    name = text(args, "name", MAX_NAME)
    findings = flag(args, "findings", "only jobs with findings")
    sort = choice(args, "sort", SORT_KEYS, default_sort)
    order = choice(args, "order", ("asc", "desc"),
                   "asc" if sort in ("job", "name", "user") else "desc")
    cluster = choice(args, "cluster", clusters)
    page = whole_number(args, "page", 1, MAX_PAGE, 1)
    return ListQuery(days, state, name, findings, sort, order, cluster, page)
