"""The wording a site owns (docs/policy.md, "Wording"): the sign-off of the owner's report
email, of the weekly digest and of the watch's notices, and the report page's footer
(contact, documentation links).

Each part is a short text template: the default is ``templates/wording/NAME.txt``, the
site's own ``NAME.txt`` in the policy directory's ``wording/`` folder
(JOBREPORT_POLICY_DIR). Both render in Jinja2's immutable sandbox, as the site rules'
messages do, with only the names ``PARTS`` gives each. A site template that fails when a
message is built is logged and the default is used: the email still goes out.
``check`` is what ``jobreport policy check`` runs on the folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from jinja2 import Template, TemplateSyntaxError, meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from webapp.json_codec import REPORT, decode, encode
from webapp.model import JobReport
from webapp.renderers.templates import TEMPLATES, install_filters

log = logging.getLogger(__name__)

FOLDER = "wording"  # in the policy directory, and in templates/ for the defaults
# The report JSON's top-level names, as a site rule's condition sees them.
REPORT_NAMES = frozenset(k for k, _, _ in REPORT)
# Each part and the names its template is given.
PARTS: dict[str, frozenset[str]] = {
    "owner_email_footer": REPORT_NAMES | {"report_url"},
    "report_footer": REPORT_NAMES,
    "digest_footer": frozenset({"user", "cluster", "first_day", "last_day", "jobs"}),
    "watch_footer": frozenset({"user", "cluster", "job_id", "job_name", "rule", "cancelled"}),
}
# A real report (fixtures/reports/stack-busy-79.json, copied so an install has it): what
# `policy check` renders each template with once.
SAMPLE = TEMPLATES / FOLDER / "sample-report.json"

ENV = ImmutableSandboxedEnvironment(autoescape=False, trim_blocks=True, lstrip_blocks=True)
install_filters(ENV)


def default_path(name: str) -> Path:
    return TEMPLATES / FOLDER / f"{name}.txt"


def site_path(policy_dir: str, name: str) -> Path | None:
    """The site's template of part ``name``, when the policy directory has one."""
    if not policy_dir:
        return None
    path = Path(policy_dir) / FOLDER / f"{name}.txt"
    return path if path.is_file() else None


def version(policy_dir: str, name: str) -> str:
    """12 hex digits of the site's template of part ``name`` ("": the default): what a
    kept PDF with that part is keyed by."""
    site = site_path(policy_dir, name)
    return hashlib.sha256(site.read_bytes()).hexdigest()[:12] if site else ""


@functools.lru_cache(maxsize=64)
def _compiled(path: str, _mtime_ns: int, _size: int) -> Template:
    """Compiled once per version of the file: an edit is in force at the next message."""
    return ENV.from_string(Path(path).read_text())


def _template(path: Path) -> Template:
    st = path.stat()
    return _compiled(str(path), st.st_mtime_ns, st.st_size)


def render(policy_dir: str, name: str, values: Mapping[str, Any]) -> str:
    """Part ``name``'s text: the site's template when it has one and it renders, else the
    default; surrounding blank space dropped."""
    given = {k: v for k, v in values.items() if k in PARTS[name]}
    site = site_path(policy_dir, name)
    if site is not None:
        try:
            return _template(site).render(**given).strip()
        except Exception as exc:  # noqa: BLE001 - a site's mistake must not stop the mail
            log.error("site wording %s does not render (%s): the default is used", site, exc)
    return _template(default_path(name)).render(**given).strip()


def report_footer(policy_dir: str, report: JobReport) -> str:
    """The footer of the report's page, PDF and text (the site's contact and documentation
    links; none by default)."""
    return render(policy_dir, "report_footer", report_values(report))


def report_values(report: JobReport, **extra: Any) -> dict[str, Any]:
    """What a part about one report is given: the report JSON's names, as site rules see
    them, and ``extra``."""
    return {**encode(report, include_series=False), **extra}


def sample_values(report: JobReport) -> dict[str, dict[str, Any]]:
    """Each part's names filled from one real report, for the check's render."""
    day = "2026-11-23"
    return {
        "owner_email_footer": report_values(report, report_url="https://jobs.example/jobs/1"),
        "report_footer": report_values(report),
        "digest_footer": {"user": report.user, "cluster": report.cluster,
                          "first_day": day, "last_day": day, "jobs": 1},
        "watch_footer": {"user": report.user, "cluster": report.cluster,
                         "job_id": report.job_id, "job_name": report.job_name,
                         "rule": "gpu_idle", "cancelled": False},
    }


def sample_report() -> JobReport:
    return decode(json.loads(SAMPLE.read_text()))


# -- checking -----------------------------------------------------------------------------
def _unknown(parsed: nodes.Template, known: frozenset[str]) -> list[tuple[int, str]]:
    """(line, name) of each name the template reads that it is not given (names it sets
    itself, with ``set`` or ``for``, are its own)."""
    free = meta.find_undeclared_variables(parsed) - known
    seen: dict[str, int] = {}
    for node in parsed.find_all(nodes.Name):
        if node.name in free and node.ctx == "load":
            seen.setdefault(node.name, node.lineno)
    return sorted((line, name) for name, line in seen.items())


def _line_of_failure(tb: TracebackType | None) -> int:
    """The template's line a render failed at: Jinja rewrites the traceback so the
    template's frame has its line (``<template>``: a template from a string)."""
    line = 1
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def check_file(path: Path, name: str, values: Mapping[str, Any]) -> list[str]:
    """``file:line: what`` for each problem of one template of part ``name``."""
    text = path.read_text(errors="replace")
    try:
        parsed = ENV.parse(text)
    except TemplateSyntaxError as exc:
        return [f"{path}:{exc.lineno}: bad template: {exc.message}"]
    unknown = _unknown(parsed, PARTS[name])
    if unknown:
        given = ", ".join(sorted(PARTS[name]))
        return [f"{path}:{line}: unknown name {n!r} (a {name} template is given {given})"
                for line, n in unknown]
    try:
        ENV.from_string(text).render(**values)
    except Exception as exc:  # noqa: BLE001 - whatever the sandbox refuses or fails on
        return [f"{path}:{_line_of_failure(exc.__traceback__)}: does not render with a "
                f"sample report: {type(exc).__name__}: {exc}"]
    return []


def check(policy_dir: str | Path, sample: JobReport | None = None) -> tuple[int, list[str]]:
    """(templates found, problems) of the policy directory's ``wording/`` folder: each
    template parsed, its names checked against what its part is given, and rendered once
    in the sandbox with ``sample`` (default: the shipped real report)."""
    folder = Path(policy_dir) / FOLDER
    if not folder.is_dir():
        return 0, []
    files = sorted(p for p in folder.iterdir() if p.is_file())
    problems: list[str] = []
    values = sample_values(sample or sample_report()) if files else {}
    for path in files:
        name = path.name.removesuffix(".txt")
        if path.suffix != ".txt" or name not in PARTS:
            problems.append(f"{path}:1: no wording part {path.name!r} (use "
                            + ", ".join(f"{p}.txt" for p in PARTS) + ")")
            continue
        problems += check_file(path, name, values[name])
    return len(files), problems
