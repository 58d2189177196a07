"""What a PromQL expression may read, decided from its syntax tree (promql-parser), never
from its text: the Prometheus front's check (``webapp/web/prometheus_front.py``).

Every vector and matrix selector of the expression, wherever it sits (functions,
aggregations, binary operators, subqueries), is one of:

- public: its metric name is a literal one of ``Rules.public`` (``slurm_*``, ``up``, ...);
- a job's: it pins the job label (``jobid``) with ``=`` or with ``=~`` of a literal
  alternation of job ids (``4242|4243``, or ``1234\\+0|1234\\+1``, the het-job form of
  ``webapp.sources.prometheus.job_selector``), and, where one Prometheus holds several
  clusters' series, the cluster label with ``=`` to this cluster. Its ids are returned:
  the caller checks their owner (``check_owners``).

Anything else is refused: a ``jobs_*`` selector naming no job (``sum(jobs_cpu_seconds_total)``),
a regex that is not a list of ids (``jobid=~"42.*"``), a negative matcher standing alone
(``jobid!="42"``), a metric name that is neither public nor pinned
(``{__name__=~"jobs_.*"}``). Rewriting labels afterwards (``label_replace``) changes
nothing: the selectors beneath are what is checked. The cost bounds (nodes of the tree,
points of a subquery or range query) hold for everyone.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import promql_parser as pp

from webapp.model import JobId, JobNotFound

# The exporters' per-job metrics: a selector of one must name the jobs it reads.
JOB_METRIC_PREFIX = "jobs_"
# One id of a ``=~`` alternation, as ``job_selector`` writes it (re.escape of ``123+1``
# is ``123\+1``): anything else, a ``.``, an unescaped ``+``, a group, is a pattern.
_ID_ALTERNATIVE = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10}|\\\+[0-9]{1,4})?")
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Functions that read series their arguments do not name (Prometheus 3's ``info`` joins
# ``target_info``): refused to anybody but staff, whatever their arguments.
IMPLICIT_READS = frozenset({"info"})
# Prometheus' default evaluation interval: a subquery's step when it gives none.
DEFAULT_SUBQUERY_STEP = 60.0
# Job ids one request may name: each costs an accounting lookup.
MAX_JOBS = 100
# The longest expression parsed (``parse``): characters outside strings, and in all.
MAX_STRUCTURE = 1024
MAX_TEXT = 65536


class Refused(Exception):
    """The expression reads what the user may not: the reason, said to the user."""


class BadExpression(Exception):
    """The text is no PromQL (or no series selector where one is needed)."""


@dataclass(frozen=True)
class Rules:
    """What the check allows: from the settings (``prometheus_front.rules``)."""

    public: frozenset[str] = frozenset({"slurm_*", "up"})  # metric name globs
    job_label: str = "jobid"
    cluster_label: str = ""  # JOBREPORT_PROMETHEUS_CLUSTER_LABEL: then pinned to ``cluster``
    cluster: str = ""
    max_nodes: int = 256
    max_points: int = 11000

    def is_public(self, metric: str) -> bool:
        return any(fnmatch.fnmatchcase(metric, glob) for glob in self.public)


def structure_length(text: str) -> int:
    """Characters of ``text`` outside its string literals (comments count): what the
    parser builds nodes of. A string, however long (a list of nodes or job ids), is one."""
    count, quote, escaped, comment = 0, "", False, False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "`":  # backquoted strings have no escapes
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        count += 1
        if comment:
            comment = ch != "\n"
        elif ch == "#":
            comment = True
        elif ch in "\"'`":
            quote = ch
    return count


def parse(text: str) -> pp.Expr:
    """The syntax tree, once ``text`` is known small enough to parse: promql-parser
    needs memory quadratic in a tree's depth (1,000 characters of ``1+1+...`` take
    50 MB, 2,000 take 160 MB) and overflows the thread's stack at some thousands of
    levels (10,000 nested parentheses in 8 MiB: the process dies, no exception).
    ``MAX_STRUCTURE`` characters nest at most 512 deep, which parse in 1 MiB."""
    if len(text) > MAX_TEXT or structure_length(text) > MAX_STRUCTURE:
        raise Refused(f"the expression is too long to check: at most {MAX_STRUCTURE} "
                      f"characters outside its strings, {MAX_TEXT} in all")
    try:
        return pp.parse(text)
    except ValueError as exc:
        raise BadExpression(f"cannot parse the expression: {exc}") from None


# Each node type the check knows -> its children. A node of any other type (a newer
# promql-parser's) is refused: what is not walked is not checked.
CHILDREN: dict[type, Callable[[Any], list[Any]]] = {
    pp.AggregateExpr: lambda e: [e.param, e.expr],  # topk's k may itself read series
    pp.BinaryExpr: lambda e: [e.lhs, e.rhs],
    pp.Call: lambda e: list(e.args),
    pp.MatrixSelector: lambda e: [e.vector_selector],
    pp.NumberLiteral: lambda e: [],
    pp.ParenExpr: lambda e: [e.expr],
    pp.StringLiteral: lambda e: [],
    pp.SubqueryExpr: lambda e: [e.expr],
    pp.UnaryExpr: lambda e: [e.expr],
    pp.VectorSelector: lambda e: [],
}


def _nodes(expr: pp.Expr, limit: int) -> list[pp.Expr]:
    """Every node of the tree (promql-parser's own ``walk`` copies each subtree for its
    callback: seconds and gigabytes on a tree this one walks in a millisecond)."""
    seen: list[pp.Expr] = []
    todo: list[Any] = [expr]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        children = CHILDREN.get(type(node))
        if children is None:
            raise Refused(f"cannot check a {type(node).__name__} node")
        seen.append(node)
        if len(seen) > limit:
            raise Refused(f"the expression has more than the {limit} nodes allowed")
        todo.extend(children(node))
    return seen


def jobs_in_query(text: str, rules: Rules, staff: bool = False) -> frozenset[str]:
    """The job ids ``text`` (an expression of ``query`` or ``query_range``) reads, whose
    owners the caller must check; Refused or BadExpression when it may not be sent.
    Staff pass the ownership rules, not the cost bounds."""
    nodes = _nodes(parse(text), rules.max_nodes)
    ids: set[str] = set()
    for node in nodes:
        if isinstance(node, pp.SubqueryExpr):
            _check_subquery(node, rules)
        elif isinstance(node, pp.Call) and node.func.name in IMPLICIT_READS and not staff:
            raise Refused(f"{node.func.name}() reads series the expression does not name")
        elif isinstance(node, pp.VectorSelector) and not staff:
            ids |= jobs_of_selector(node, rules)
    return _bounded(ids)


def jobs_in_match(texts: Iterable[str], rules: Rules, staff: bool = False) -> frozenset[str]:
    """The job ids the ``match[]`` selectors of ``series``, ``labels`` or ``label
    values`` read; each must be a series selector, as Prometheus requires."""
    ids: set[str] = set()
    for text in texts:
        expr = parse(text)
        if not isinstance(expr, pp.VectorSelector):
            raise BadExpression(f"match[] {text!r} is not a series selector")
        if not staff:
            ids |= jobs_of_selector(expr, rules)
    return _bounded(ids)


def lists_jobs(texts: Iterable[str], rules: Rules) -> bool:
    """Whether the ``match[]`` selectors are a job picker's: each a series selector of
    literal ``jobs_*`` names that names no job at all (no ``jobid`` matcher; the cluster
    pinned where one Prometheus holds several), as Grafana's
    ``label_values(jobs_info{cluster="$cluster"}, jobid)`` sends them. The front then
    answers only the asker's own jobs (``prometheus_front``) instead of refusing."""
    texts = list(texts)
    if not texts:
        return False
    for text in texts:
        expr = parse(text)
        if not isinstance(expr, pp.VectorSelector):
            return False
        for group in expr.matchers.or_matchers or [[]]:
            matchers = [*expr.matchers.matchers, *group]
            names = {expr.name} if expr.name else set()
            names |= {m.value for m in matchers
                      if m.name == "__name__" and m.op == pp.MatchOp.Equal}
            literal = all(m.op == pp.MatchOp.Equal for m in matchers if m.name == "__name__")
            if (not literal or not names or any(rules.is_public(n) for n in names)
                    or not all(n.startswith(JOB_METRIC_PREFIX) for n in names)
                    or any(m.name == rules.job_label for m in matchers)):
                return False
            if rules.cluster_label and not any(
                    m.name == rules.cluster_label and m.op == pp.MatchOp.Equal
                    and m.value == rules.cluster for m in matchers):
                return False
    return True


def _bounded(ids: set[str]) -> frozenset[str]:
    if len(ids) > MAX_JOBS:
        raise Refused(f"the request names {len(ids)} jobs, more than the {MAX_JOBS} allowed")
    return frozenset(ids)


def _seconds(delta: timedelta | None, default: float) -> float:
    return delta.total_seconds() if delta is not None else default


def _check_subquery(node: pp.SubqueryExpr, rules: Rules) -> None:
    span = _seconds(node.range, 0.0)
    step = _seconds(node.step, DEFAULT_SUBQUERY_STEP) or DEFAULT_SUBQUERY_STEP
    if span / step > rules.max_points:
        raise Refused(f"a subquery asks for {span / step:.0f} points, more than the "
                      f"{rules.max_points} allowed")


def range_points(start: float, end: float, step: float) -> float:
    """Points per series of a range query."""
    return (end - start) / step


def check_range(start: float, end: float, step: float, rules: Rules) -> None:
    points = range_points(start, end, step)
    if points > rules.max_points:
        raise Refused(f"the range query asks for {points:.0f} points per series, more than "
                      f"the {rules.max_points} allowed")


def jobs_of_selector(selector: pp.VectorSelector, rules: Rules) -> frozenset[str]:
    """The ids ``selector`` pins (none when its metric is public); Refused when it reads
    series that are neither public nor pinned to named jobs. A selector with ``or``
    groups (``{a="1" or b="2"}``) is each group on its own."""
    base = list(selector.matchers.matchers)
    groups = selector.matchers.or_matchers or [[]]
    ids: set[str] = set()
    for group in groups:
        ids |= _jobs_of(selector.name, [*base, *group], rules, str(selector))
    return frozenset(ids)


def _jobs_of(name: str | None, matchers: list[pp.Matcher], rules: Rules,
             shown: str) -> frozenset[str]:
    names = {name} if name else set()
    names |= {m.value for m in matchers if m.name == "__name__" and m.op == pp.MatchOp.Equal}
    # A literal name (two that differ select nothing): public, or a job's metric below.
    if names and all(rules.is_public(n) for n in names):
        return frozenset()
    foreign = sorted(n for n in names if not n.startswith(JOB_METRIC_PREFIX))
    if foreign:
        raise Refused(f"{foreign[0]} is not a public metric")
    ids = _pinned_ids(matchers, rules.job_label)
    if not ids:
        raise Refused(f"{shown} does not name its jobs: a selector of per-job series must "
                      f"match {rules.job_label}=\"<id>\" or {rules.job_label}=~\"<id>|<id>\"")
    if rules.cluster_label and not any(
            m.name == rules.cluster_label and m.op == pp.MatchOp.Equal
            and m.value == rules.cluster for m in matchers):
        raise Refused(f"{shown} does not name the cluster: one Prometheus holds several "
                      f"clusters' jobs, add {rules.cluster_label}=\"{rules.cluster}\"")
    return ids


def _pinned_ids(matchers: list[pp.Matcher], label: str) -> frozenset[str]:
    """Every id the ``=`` and ``=~`` matchers of ``label`` name (their intersection is
    what is read: checking their union is the stricter); empty when none pins it.
    Refused for a regex that is not an alternation of literal ids."""
    ids: set[str] = set()
    for m in matchers:
        if m.name != label:
            continue
        if m.op == pp.MatchOp.Equal:
            ids.add(_job_id(m.value))
        elif m.op == pp.MatchOp.Re:
            ids |= {_job_id(alt) for alt in _alternatives(m.value, label)}
    return frozenset(ids)


def _alternatives(regex: str, label: str) -> list[str]:
    """``4242|4243`` or Grafana's multi-value ``(4242|4243)`` -> the ids as written."""
    body = regex[1:-1] if regex.startswith("(") and regex.endswith(")") else regex
    alts = body.split("|")
    bad = [a for a in alts if not _ID_ALTERNATIVE.fullmatch(a)]
    if bad:
        raise Refused(f"{label}=~{regex!r} is not a list of job ids ({bad[0]!r} is a pattern)")
    return [a.replace("\\+", "+") for a in alts]


def _job_id(text: str) -> str:
    """``text`` when it is a job id as Slurm writes it (the series' label and the owner
    lookup then name the same job); else Refused."""
    try:
        canonical: str | None = str(JobId.parse(text))
    except ValueError:
        canonical = None
    if canonical != text:
        raise Refused(f"{text!r} is not a job id")
    return text


def check_owners(ids: Iterable[str], may_see: Callable[[str], bool]) -> None:
    """Refused unless the user may see every job of ``ids``. ``may_see``: the report
    pages' check (``reports.may_see``: the owner, or a coordinator of the job's account;
    raises JobNotFound for an unknown id, SourceUnavailable when the accounting view is
    down)."""
    for job_id in sorted(ids):
        try:
            allowed = may_see(job_id)
        except JobNotFound:
            raise Refused(f"job {job_id} is not in the accounting database") from None
        if not allowed:
            raise Refused(f"job {job_id} is not yours")
