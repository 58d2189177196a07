"""The settings loader every deployable shares: each setting is declared once, as a field
of its frozen dataclass carrying its default text, its help line and its parser::

    smtp_port: int = setting("25", "SMTP port.", integer)

The variable's name follows from the field's (``PREFIX`` + upper case); ``load`` parses
every variable with its field's parser and ``documented`` gives the docs' table, so a
default, its parsed value and its documentation cannot disagree. Each kind of value has
one parser here that every deployable uses, so each rule is written once: ``boolean``
(1/0, true/false, yes/no, on/off in any case; nothing else) and ``ranged`` (a number or
an integer within bounds, the range named when refused); ``flag_type`` gives a
command-line flag that mirrors a setting the same parser, and ``with_flags`` lays a
command line's flags over the settings read from the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.replace takes

Parser = Callable[[str, str], Any]  # (variable's name, its text) -> value
S = TypeVar("S", bound="DataclassInstance")


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


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
BOOLEAN_WORDS = "1/0, true/false, yes/no or on/off (any case)"


def boolean(var: str, raw: str) -> bool:
    """The one boolean of every deployable: ``1``/``true``/``yes``/``on`` -> True,
    ``0``/``false``/``no``/``off`` -> False, in any case; anything else is refused (a
    typo must not quietly turn a safety off)."""
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SettingsError(f"{var}={raw!r} is not a boolean: use {BOOLEAN_WORDS}")


def _bound(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def ranged(*, at_least: float | None = None, above: float | None = None,
           at_most: float | None = None, below: float | None = None,
           kind: type[int] | type[float] = float) -> Parser:
    """The one range check of every deployable: a parser of ``kind`` (``int`` or
    ``float``) refusing, with the variable's name and the range, a value outside it
    (NaN too)::

        ranged(at_least=0, at_most=1)  # JOBREPORT_MIN_COVERAGE='2' is not a number from 0 to 1
        ranged(above=0)                # ... is not a number > 0
    """
    if at_least is not None and above is not None or at_most is not None and below is not None:
        raise ValueError("ranged: one lower bound (at_least or above), one upper (at_most "
                         "or below)")
    if at_least is None and above is None and at_most is None and below is None:
        raise ValueError("ranged: no bound")
    if at_least is not None and at_most is not None:
        span = f"from {_bound(at_least)} to {_bound(at_most)}"
    else:
        span = " and ".join(
            f"{sign} {_bound(b)}" for sign, b in ((">=", at_least), (">", above),
                                                   ("<=", at_most), ("<", below))
            if b is not None)
    what = f"{'an integer' if kind is int else 'a number'} {span}"

    def parse(var: str, raw: str) -> int | float:
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError(f"{var}={raw!r} is not {what}") from None
        inside = ((at_least is None or value >= at_least)
                  and (above is None or value > above)
                  and (at_most is None or value <= at_most)
                  and (below is None or value < below))
        if not inside:  # also NaN, whose every comparison is False
            raise SettingsError(f"{var}={raw!r} is not {what}")
        return value
    return parse


def flag_type(parse: Parser, flag: str) -> Callable[[str], Any]:
    """``parse`` as argparse's ``type=`` of ``flag``, a command-line flag that mirrors a
    setting: the same words and range, refused with argparse's usage error."""
    def convert(raw: str) -> Any:
        try:
            return parse(flag, raw)
        except SettingsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = flag  # argparse names the type in some of its messages
    return convert


def with_flags(base: S, given: Mapping[str, str | None]) -> S:
    """``base`` (settings from the environment) with the flags given on the command line
    in their place: ``given`` maps a setting's field name to its flag's text (None: not
    given). Each is parsed by its setting's own parser under the flag's name
    (``poll_limit`` -> ``--poll-limit``), so a flag is checked as its variable is and a
    refusal names the flag."""
    parsers = {f.name: f.metadata["parse"] for f in declared(type(base))}
    changes = {name: parsers[name]("--" + name.replace("_", "-"), raw)
               for name, raw in given.items() if raw is not None}
    return dataclasses.replace(base, **changes)


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


def declared(cls: type) -> tuple[dataclasses.Field[Any], ...]:
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
