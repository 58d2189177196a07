"""Metric names on both sides of the exporters: the ones they emit on the captures, and the
ones the web app and the deploy files refer to (in PromQL, in prose, composed in f-strings).

A reference may hold a wildcard: an f-string or ``str.format`` field (``slurm_{who}_jobs``),
a glob in prose (``jobs_*_bytes_total``) or a trailing ``_`` (a prefix). It stands for any
run of name characters, and must match at least one emitted name.
"""

from __future__ import annotations

import ast
import io
import re
import string
import tokenize
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from slurm_exporter.exposition import render
from tests.helpers.exporter_scrape import GOLDEN
from tests.helpers.slurm_captures import CONSTANTS, FIXTURES, collector

ROOT = Path(__file__).resolve().parents[2]
FIELD = "\0"  # stands for a formatted field while a string is scanned
# A field inside a name follows a "_" (slurm_{who}_jobs); one right after a name is its
# label selector (jobs_cpus{{{sel}}}, or a docstring's slurm_job_pending_info{jobid}).
NAME = re.compile(r"(?<![\w.])(?:jobs|slurm)_(?:[a-z0-9_*]|(?<=_)\0)+")
# Strings in webapp/ that look like metric names and are not.
NOT_METRICS = frozenset({
    "slurm_acct_db",  # slurmdbd's database, the --acct-db default
    "slurm_config",  # webapp.sources.slurm_config, the module that reads scontrol show config
    "slurm_mem", "slurm_time",  # webapp.formatting's functions, named in its docstrings
})


def emitted_names() -> set[str]:
    """Every family and sample name of jobs-exporter's goldens and of slurm-exporter on
    every capture."""
    texts = [p.read_text() for p in GOLDEN.glob("*.prom")]
    captures = {p.name.split(".")[0] for p in FIXTURES.glob("*.*.txt")}
    texts += [render(collector(c, CONSTANTS).collect()).decode() for c in sorted(captures)]
    names = set()
    for text in texts:
        names.update(re.findall(r"^# TYPE (\w+) ", text, flags=re.M))
        names.update(s.name for f in text_string_to_metric_families(text) for s in f.samples)
    return names


def _fields_as_wildcards(text: str) -> str:
    """A ``str.format`` template with each field replaced by FIELD; other text as it is."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:  # not a template: a lone brace of a PromQL selector
        return text
    return "".join(lit + (FIELD if field is not None else "") for lit, field, _, _ in parts)


def python_strings(source: str) -> Iterator[str]:
    """String literals (f-strings with FIELD for their fields) and comments of a module."""
    tree = ast.parse(source)
    in_fstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            in_fstrings.update(id(v) for v in node.values)
            yield "".join(v.value if isinstance(v, ast.Constant) else FIELD
                          for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in in_fstrings:
            yield _fields_as_wildcards(node.value)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def names_in(text: str) -> set[str]:
    return {m.rstrip("_") + "_*" if m.endswith("_") else m for m in NAME.findall(text)}


def referenced_names() -> dict[str, set[str]]:
    """name (maybe with wildcards) -> the files that refer to it: webapp/**/*.py and the
    Grafana dashboards and Prometheus files of deploy/."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "webapp").rglob("*.py")):
        for text in python_strings(path.read_text()):
            for name in names_in(text) - NOT_METRICS:
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    for pattern in ("grafana-*.json", "prometheus-*.yml"):
        for path in sorted((ROOT / "deploy").glob(pattern)):
            for name in names_in(path.read_text()):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def matches(reference: str, emitted: set[str]) -> bool:
    if FIELD not in reference and "*" not in reference:
        return reference in emitted
    parts = re.split(r"[*\0]+", reference)
    pattern = re.compile("[a-z0-9_]+".join(re.escape(p) for p in parts))
    return any(pattern.fullmatch(name) for name in emitted)
