"""The site's own policy (``JOBREPORT_POLICY_DIR``, docs/policy.md): TOML files that switch
the built-in detectors on or off, change their severity, thresholds and exemptions per
scope (cluster, partition, account, qos, user; the most specific wins: policy_scope.py),
add rules of the site's own: a condition over the report's JSON figures, a severity, a
message and advice, and say which running jobs ``jobreport watch`` may cancel
(``[[cancel]]``, policy_cancel.py).

Conditions and templates are Jinja2 sandboxed expressions (``ImmutableSandboxedEnvironment``):
no attribute of a Python object beyond data, no mutation, no import, no loop in a
condition; Jinja2 is already a dependency of the web app.

``load`` reads a directory (raising ``PolicyError`` with every problem, each naming its
file and line), ``Policy.resolve`` gives a job's effective thresholds, switches and
severities once, and ``judge`` runs the detectors under them and appends the site rules'
findings.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import TemplateSyntaxError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from webapp.detectors.policy_cancel import CANCEL_KEYS, WATCH_RULES, Cancel, Enforced, enforced
from webapp.detectors.policy_scope import (
    SCOPES,
    JobScope,
    Scope,
    describe_scope,
    in_precedence,
    matches,
    parse_scope,
)
from webapp.json_codec import REPORT, USAGE, USAGE_PAIRS, encode
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds

log = logging.getLogger(__name__)

OVERRIDE_KEYS = frozenset({*SCOPES, "rule", "enabled", "severity", "thresholds",
                           "excluded_users", "excluded_accounts"})
RULE_KEYS = frozenset({*SCOPES, "name", "condition", "severity", "message", "advice"})
# The figures a condition may name: the report JSON's top-level keys; ``usage.X`` too.
FIGURES = frozenset(k for k, _, _ in REPORT) | {"series"}
USAGE_FIGURES = frozenset(USAGE) | frozenset(USAGE_PAIRS) | {
    "gpu_faults", "gpu_devices", "counter_resets", "replayed"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")

ENV = ImmutableSandboxedEnvironment(autoescape=False)


class PolicyError(ValueError):
    """The policy directory's problems, one ``file:line: what`` per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Override:
    where: str  # file:line
    scope: Scope
    rule: str | None = None
    enabled: bool | None = None
    severity: Severity | None = None
    thresholds: tuple[tuple[str, float], ...] = ()
    excluded_users: frozenset[str] = frozenset()
    excluded_accounts: frozenset[str] = frozenset()

    def describe(self) -> str:
        scope = describe_scope(self.scope)
        what = []
        if self.enabled is not None:
            what.append("on" if self.enabled else "off")
        if self.severity is not None:
            what.append(f"severity {self.severity.value}")
        what += [f"{n} = {v:g}" for n, v in self.thresholds]
        if self.excluded_users:
            what.append("excluded users " + ", ".join(sorted(self.excluded_users)))
        if self.excluded_accounts:
            what.append("excluded accounts " + ", ".join(sorted(self.excluded_accounts)))
        return f"{self.where}: {self.rule or 'all rules'} in {scope}: {'; '.join(what)}"


@dataclass(frozen=True)
class SiteRule:
    where: str  # file:line of its condition
    name: str
    scope: Scope
    condition: str
    severity: Severity
    message: str
    advice: str


@dataclass(frozen=True)
class Resolved:
    """One job's effective policy: thresholds, detectors off, severities, what applied."""

    thresholds: Thresholds
    off: frozenset[str] = frozenset()
    severity: tuple[tuple[str, Severity], ...] = ()
    applied: tuple[str, ...] = ()
    rules: tuple[SiteRule, ...] = ()


@dataclass(frozen=True)
class Policy:
    overrides: tuple[Override, ...] = ()
    rules: tuple[SiteRule, ...] = ()
    version: str | None = None  # None: no site policy
    cancels: tuple[Cancel, ...] = ()

    def resolve(self, base: Thresholds, job: JobScope) -> Resolved:
        """The effective policy for a job whose scope is ``job`` (its cluster, partition,
        account, qos and user): the matching overrides applied least specific first."""
        matching = in_precedence(self.overrides, job)
        changes: dict[str, float] = {}
        enabled: dict[str, bool] = {}
        severity: dict[str, Severity] = {}
        applied = []
        for o in matching:
            excluded = (job.get("user") in o.excluded_users
                        or job.get("account") in o.excluded_accounts)
            if excluded and o.rule:
                enabled[o.rule] = False
            if o.enabled is not None and o.rule:
                enabled[o.rule] = o.enabled and not excluded
            if o.severity is not None and o.rule:
                severity[o.rule] = o.severity
            changes.update(o.thresholds)
            applied.append(o.describe() + (" (this job is excluded)" if excluded else ""))
        thresholds = base
        if changes:
            thresholds = dataclasses.replace(base, **changes,
                                             overridden=base.overridden | set(changes))
        return Resolved(thresholds, frozenset(r for r, on in enabled.items() if not on),
                        tuple(severity.items()), tuple(applied),
                        tuple(r for r in self.rules if matches(r.scope, job)))

    def enforced(self, rule: str, job: JobScope) -> Enforced:
        """Whether and after what grace `jobreport watch`'s ``rule`` cancels the job."""
        return enforced(self.cancels, rule, job)


NO_POLICY = Policy()


def job_scope(report: JobReport) -> dict[str, str | None]:
    return {"cluster": report.cluster, "partition": report.partition,
            "account": report.account, "qos": report.qos,
            "user": report.user}


def figures(report: JobReport) -> dict[str, Any]:
    """The names a site rule's condition and templates see: the report's JSON."""
    return encode(report, include_series=False)


# Compiled once per text, not per report: compiling took 2.5 ms of each report a site
# rule applies to, half the CPU time of `jobreport policy diff`.
_expression = functools.lru_cache(maxsize=1024)(ENV.compile_expression)
_template = functools.lru_cache(maxsize=1024)(ENV.from_string)


def evaluate(rule: SiteRule, values: Mapping[str, Any]) -> Finding | None:
    """The rule's finding when its condition holds; a condition that cannot be evaluated
    (a figure unknown for this job: null) gives none."""
    try:
        if not _expression(rule.condition)(**values):
            return None
        message = _template(rule.message).render(**values)
        advice = _template(rule.advice).render(**values)
    except Exception as exc:  # noqa: BLE001 - null figures, type errors: no verdict
        log.info("site rule %s (%s) not evaluated: %s", rule.name, rule.where, exc)
        return None
    return Finding(rule.name, rule.severity, message, advice,
                   {"site_rule": rule.where}, f"Site rule {rule.name}: {rule.condition}")


def apply(report: JobReport, resolved: Resolved,
          found: tuple[Finding, ...]) -> tuple[Finding, ...]:
    """The detectors' findings with the policy's severities, plus the site rules'."""
    severity = dict(resolved.severity)
    out = [dataclasses.replace(f, severity=severity[f.name]) if f.name in severity else f
           for f in found if f.name not in resolved.off]
    if resolved.rules:
        values = figures(dataclasses.replace(report, findings=tuple(out)))
        out += [f for r in resolved.rules if (f := evaluate(r, values)) is not None]
    return tuple(sorted(out, key=lambda f: (f.severity.rank, f.name)))


# -- reading and checking -----------------------------------------------------------------
def version(files: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(f"file {name} {len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()[:12]


def _line_of(text: str, kind: str, index: int, key: str) -> int:
    """The line of ``key`` in the ``index``-th ``[[kind]]`` table of ``text`` (that
    table's header line when the key is not found)."""
    header = re.compile(rf"^\s*\[\[\s*{kind}\s*\]\]")
    seen, start = -1, 0
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if header.match(line):
            seen += 1
            if seen == index:
                start = n
        elif seen == index and start and line.lstrip().startswith("[["):
            break
        elif seen == index and start and re.match(rf"^\s*{key}\s*=", line):
            return n
    return start


def _names_in(expr: nodes.Node) -> list[str]:
    """Unknown figure names of a parsed expression (``usage.X`` checked too)."""
    bad = []
    for getattr_node in expr.find_all(nodes.Getattr):
        base = getattr_node.node
        if (isinstance(base, nodes.Name) and base.name == "usage"
                and getattr_node.attr not in USAGE_FIGURES):
            bad.append(f"usage.{getattr_node.attr}")
    bad += [n.name for n in expr.find_all(nodes.Name)
            if n.name not in FIGURES and n.name not in {"true", "false", "none"}]
    return bad


def _check_expression(text: str) -> str | None:
    try:
        ENV.compile_expression(text)
        parsed = ENV.parse("{{ " + text + " }}")
    except TemplateSyntaxError as exc:
        return f"bad expression {text!r}: {exc.message}"
    unknown = _names_in(parsed)
    if unknown:
        return (f"unknown figure {', '.join(sorted(set(unknown)))} in {text!r} (the report "
                "JSON's names, docs/policy.md)")
    return None


def _check_template(text: str) -> str | None:
    try:
        parsed = ENV.parse(text)
    except TemplateSyntaxError as exc:
        return f"bad template {text!r}: {exc.message}"
    unknown = _names_in(parsed)
    return f"unknown figure {', '.join(sorted(set(unknown)))} in {text!r}" if unknown else None


def _severity(value: Any, where: str, problems: list[str]) -> Severity | None:
    try:
        return Severity(value)
    except ValueError:
        problems.append(f"{where}: severity {value!r}: use "
                        + ", ".join(s.value for s in Severity))
        return None


def _users(value: Any, where: str, key: str, problems: list[str]) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{where}: {key} must be a list of names")
        return frozenset()
    return frozenset(value)


def _override(table: Mapping[str, Any], where: str, detectors: frozenset[str],
              problems: list[str], partitions: frozenset[str] | None) -> Override:
    for key in sorted(set(table) - OVERRIDE_KEYS):
        problems.append(f"{where}: unknown key {key!r} (use {', '.join(sorted(OVERRIDE_KEYS))})")
    rule = table.get("rule")
    if rule is not None and rule not in detectors:
        problems.append(f"{where}: no detector {rule!r} (docs/findings.md)")
    needs_rule = ("enabled", "severity", "excluded_users", "excluded_accounts")
    if rule is None and any(k in table for k in needs_rule):
        problems.append(f"{where}: {', '.join(k for k in needs_rule if k in table)} "
                        "need a rule")
    enabled = table.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        problems.append(f"{where}: enabled must be true or false")
    severity = _severity(table["severity"], where, problems) if "severity" in table else None
    values: list[tuple[str, float]] = []
    known = {f.name for f in dataclasses.fields(Thresholds) if "unit" in f.metadata}
    for name, value in (table.get("thresholds") or {}).items():
        if name not in known:
            problems.append(f"{where}: no threshold {name!r} (docs/settings.md)")
        elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            problems.append(f"{where}: threshold {name} must be a number >= 0")
        else:
            values.append((name, float(value)))
    return Override(
        where, parse_scope(table, where, problems, partitions), rule,
        enabled if isinstance(enabled, bool) else None, severity, tuple(values),
        _users(table.get("excluded_users", []), where, "excluded_users", problems),
        _users(table.get("excluded_accounts", []), where, "excluded_accounts", problems))


def _rule(table: Mapping[str, Any], where: str, condition_at: str, detectors: frozenset[str],
          problems: list[str], partitions: frozenset[str] | None) -> SiteRule | None:
    for key in sorted(set(table) - RULE_KEYS):
        problems.append(f"{where}: unknown key {key!r} (use {', '.join(sorted(RULE_KEYS))})")
    missing = [k for k in ("name", "condition", "message") if not isinstance(table.get(k), str)]
    if missing:
        problems.append(f"{where}: a rule needs {', '.join(missing)}")
        return None
    name = table["name"]
    if not NAME_RE.match(name) or name in detectors:
        problems.append(f"{where}: rule name {name!r}: lower case, digits and _, and no "
                        "built-in detector's name")
    error = _check_expression(table["condition"])
    if error:
        problems.append(f"{condition_at}: {error}")
    for key in ("message", "advice"):
        error = _check_template(str(table.get(key, "")))
        if error:
            problems.append(f"{where}: {key}: {error}")
    severity = _severity(table.get("severity", "warning"), where, problems)
    return SiteRule(condition_at, name, parse_scope(table, where, problems, partitions),
                    table["condition"], severity or Severity.WARNING, table["message"],
                    str(table.get("advice", "")))


def _cancel(table: Mapping[str, Any], where: str, problems: list[str],
            partitions: frozenset[str] | None) -> Cancel:
    for key in sorted(set(table) - CANCEL_KEYS):
        problems.append(f"{where}: unknown key {key!r} (use {', '.join(sorted(CANCEL_KEYS))})")
    rule = table.get("rule")
    if rule is not None and rule not in WATCH_RULES:
        problems.append(f"{where}: no watch rule {rule!r} (use {', '.join(WATCH_RULES)})")
    enabled = table.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        problems.append(f"{where}: enabled must be true or false")
    grace = table.get("grace_minutes")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int | float)
                              or grace < 0):
        problems.append(f"{where}: grace_minutes must be a number >= 0")
        grace = None
    scope = parse_scope(table, where, problems, partitions)
    # As with the watch's own file before: cancelling every job is never a default.
    if grace is not None and not scope:
        problems.append(f"{where}: a [[cancel]] with grace_minutes needs a scope "
                        "(cluster, partition, account, qos or user)")
    return Cancel(where, scope, rule, enabled if isinstance(enabled, bool) else None,
                  None if grace is None else float(grace) * 60,
                  _users(table.get("excluded_users", []), where, "excluded_users", problems),
                  _users(table.get("excluded_accounts", []), where, "excluded_accounts",
                         problems))


def load(directory: str | Path, detectors: frozenset[str],
         partitions: frozenset[str] | None = None) -> Policy:
    """The policy of ``directory``'s ``*.toml`` files (name order); an empty name: none.
    ``partitions``: the cluster's, when known, so a scope naming another is an error.
    Raises PolicyError naming each problem's file and line."""
    if not str(directory):
        return NO_POLICY
    root = Path(directory)
    if not root.is_dir():
        raise PolicyError([f"{root}: no such policy directory"])
    problems: list[str] = []
    overrides: list[Override] = []
    rules: list[SiteRule] = []
    cancels: list[Cancel] = []
    files = sorted((p.name, p.read_bytes()) for p in root.glob("*.toml") if p.is_file())
    for name, data in files:
        path = root / name
        text = data.decode("utf-8", "replace")
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = re.search(r"line (\d+)", str(exc))
            problems.append(f"{path}:{line.group(1) if line else 1}: {exc}")
            continue
        for key in sorted(set(doc) - {"override", "rule", "cancel"}):
            problems.append(f"{path}:1: unknown table {key!r} (use [[override]], [[rule]], "
                            "[[cancel]])")
        for i, table in enumerate(doc.get("override", [])):
            where = f"{path}:{_line_of(text, 'override', i, 'rule')}"
            overrides.append(_override(table, where, detectors, problems, partitions))
        for i, table in enumerate(doc.get("rule", [])):
            where = f"{path}:{_line_of(text, 'rule', i, 'name')}"
            condition_at = f"{path}:{_line_of(text, 'rule', i, 'condition')}"
            rule = _rule(table, where, condition_at, detectors, problems, partitions)
            if rule is not None:
                rules.append(rule)
        for i, table in enumerate(doc.get("cancel", [])):
            where = f"{path}:{_line_of(text, 'cancel', i, 'rule')}"
            cancels.append(_cancel(table, where, problems, partitions))
    if problems:
        raise PolicyError(problems)
    return Policy(tuple(overrides), tuple(rules), version(files), tuple(cancels))

