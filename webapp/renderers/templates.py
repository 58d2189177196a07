"""The Jinja environment on the project's templates, from a wheel or a source checkout."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from webapp.formatting import format_bytes, format_duration, format_percent, visible
from webapp.renderers.backticks import code_html
from webapp.renderers.presentation import evidence_line, format_time

_PACKAGE = Path(__file__).resolve().parent.parent


def templates_dir() -> Path:
    """``webapp/templates`` in an installed wheel (pyproject maps the top-level
    ``templates/`` there), else the top-level ``templates/`` of the source checkout."""
    installed = _PACKAGE / "templates"
    return installed if installed.is_dir() else _PACKAGE.parent / "templates"


TEMPLATES = templates_dir()


def install_filters(env: Environment) -> None:
    """The formatting filters every template may use."""
    env.filters.update(bytes=format_bytes, duration=format_duration,
                       percent=format_percent, time=format_time, code=code_html,
                       evidence=evidence_line, visible=visible)


def environment() -> Environment:
    """A Jinja environment on the templates with autoescape for .html (not for .txt)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES),
                      autoescape=select_autoescape(("html", "xml")),
                      trim_blocks=True, lstrip_blocks=True)
    install_filters(env)
    return env
