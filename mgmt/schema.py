"""The columns of slurmdbd's tables that db-setup's views read, checked against the tables a
database has before anything is created.

The SQL files are the one place that names those columns: they are read from the view
templates themselves (every ``alias.column`` of a table joined ``AS alias``), so a column
added to a view is checked without a list to keep in step. slurmdbd changes its schema
between releases; the view reads only columns that 22.05, 24.11 and 26.05 all have (their
job, association and TRES tables differ in others: docs/deploying.md). A release that
renamed or dropped one of them fails here, naming the table and the column, instead of
in a ``CREATE VIEW`` over several clusters after the users were made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# `{acct_db}`.`{cluster}_job_table` AS j
_TABLE_RE = re.compile(r"`\{acct_db\}`\.`([^`]+)`\s+AS\s+([a-z]\w*)", re.I)
# j.id_job, a.user, j.`partition`
_REF_RE = re.compile(r"(?<![\w`])([a-z]\w*)\.`?([a-z_][a-z0-9_]*)`?", re.I)


def parse_needed_columns(template: str) -> dict[str, frozenset[str]]:
    """Table (as the template names it) -> the columns its alias reads; ``--`` comment lines
    are skipped.

        SELECT j.id_job AS job_id, a.user AS user FROM `{acct_db}`.`{cluster}_job_table` AS j
        LEFT JOIN `{acct_db}`.`{cluster}_assoc_table` AS a ON a.id_assoc = j.id_assoc

    -> ``{"{cluster}_job_table": {"id_job", "id_assoc"}, "{cluster}_assoc_table": {"user",
    "id_assoc"}}``.
    """
    text = "\n".join(ln for ln in template.splitlines() if not ln.lstrip().startswith("--"))
    tables = {alias: table for table, alias in _TABLE_RE.findall(text)}
    out: dict[str, set[str]] = {table: set() for table in tables.values()}
    for alias, column in _REF_RE.findall(text):
        if alias in tables:
            out[tables[alias]].add(column)
    return {table: frozenset(cols) for table, cols in out.items()}


def missing_columns(needed: Mapping[str, frozenset[str]], have: Mapping[str, frozenset[str]],
                    acct_db: str) -> list[str]:
    """One line per table the database lacks, or per table that lacks a needed column.

    ``have``: table -> its columns, as the database lists them (information_schema)."""
    problems = []
    for table in sorted(needed):
        if table not in have:
            problems.append(f"{acct_db}.{table} does not exist")
            continue
        gone = sorted(needed[table] - have[table])
        if gone:
            problems.append(f"{acct_db}.{table} has no column {', '.join(gone)}")
    return problems


def needed_for(templates: Sequence[str], clusters: Sequence[str]) -> dict[str, frozenset[str]]:
    """Every table (its real name) the views over ``clusters`` read -> the columns read."""
    out: dict[str, frozenset[str]] = {}
    for template in templates:
        for table, cols in parse_needed_columns(template).items():
            for name in {table.format(cluster=c) for c in clusters}:
                out[name] = out.get(name, frozenset()) | cols
    return out
