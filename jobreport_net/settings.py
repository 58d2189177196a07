"""The settings loader every deployable shares: each setting is declared once, as a field
of its frozen dataclass carrying its default text, its help line and its parser::

    smtp_port: int = setting("25", "SMTP port.", integer)

The variable's name follows from the field's (``PREFIX`` + upper case); ``load`` parses
every variable with its field's parser and ``documented`` gives the docs' table, so a
default, its parsed value and its documentation cannot disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

Parser = Callable[[str, str], Any]  # (variable's name, its text) -> value


class SettingsError(ValueError):
    """A setting holds a value we cannot use; the message names the variable."""


def checked(check: Callable[[str], object]) -> Parser:
    """A parser that keeps the text as it is once ``check(text)`` accepts it; the
    ValueError ``check`` raises becomes a SettingsError naming the variable."""
    def parse(var: str, raw: str) -> str:
        try:
            check(raw)
        except ValueError as exc:
            raise SettingsError(f"{var}: {exc}") from None
        return raw
    return parse


def text(var: str, raw: str) -> str:
    return raw


def integer(var: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{var}={raw!r} is not an integer") from None


def number(var: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{var}={raw!r} is not a number") from None


def boolean(var: str, raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes")


def names(var: str, raw: str) -> frozenset[str]:
    """``a, b`` -> ``{"a", "b"}``."""
    return frozenset(u.strip() for u in raw.split(",") if u.strip())


def choice(*options: str) -> Parser:
    """A parser accepting only ``options``."""
    def parse(var: str, raw: str) -> str:
        if raw not in options:
            raise SettingsError(f"{var}={raw!r}: use {' or '.join(options)}")
        return raw
    return parse


def setting(default: str, help: str, parse: Parser = text) -> Any:
    """One setting: a dataclass field whose default is ``parse(default)``."""
    value = parse("(default)", default)
    meta = {"default": default, "help": help, "parse": parse}
    if isinstance(value, dict | list | set):  # mutable: each instance gets its own
        return dataclasses.field(default_factory=lambda: parse("(default)", default),
                                 metadata=meta)
    return dataclasses.field(default=value, metadata=meta)


def declared(cls: type) -> tuple[dataclasses.Field, ...]:
    """The fields of ``cls`` that are settings (others are derived values)."""
    return tuple(f for f in dataclasses.fields(cls) if "parse" in f.metadata)


def documented(cls: type, prefix: str) -> dict[str, tuple[str, str]]:
    """Variable name -> (default text, help), in declaration order."""
    return {prefix + f.name.upper(): (f.metadata["default"], f.metadata["help"])
            for f in declared(cls)}


def load(cls: type, prefix: str, env: Mapping[str, str],
         ignored: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every setting of ``cls`` parsed from ``env`` (field name -> value). A variable with
    ``prefix`` that is no setting (a typo) is an error, unless it starts with one of
    ``ignored`` (another deployable's prefix)."""
    known = documented(cls, prefix)
    unknown = sorted(k for k in env if k.startswith(prefix) and k not in known
                     and not k.startswith(ignored))
    if unknown:
        raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
    return {f.name: f.metadata["parse"](prefix + f.name.upper(),
                                        env.get(prefix + f.name.upper(), f.metadata["default"]))
            for f in declared(cls)}
