"""The stack's ``jobreport.jobs`` view, as unit tests read it without a database: rows
captured from it (fixtures/accounting/local-jobs-view-rows.json, fixtures/SOURCES.md) and
a stand-in for the pymysql connection that answers them."""

from __future__ import annotations

import json
from pathlib import Path

ROWS: list[dict] = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / "accounting"
     / "local-jobs-view-rows.json").read_text())
BUSY = next(r for r in ROWS if r["job_id"] == 1240)


class ViewConnection:
    """A pymysql connection whose every SELECT on the view answers ``rows`` (a chunk's
    rows hold other jobs' records too, as the real OR-query's do)."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.sql = ""

    def cursor(self) -> ViewConnection:
        return self

    def __enter__(self) -> ViewConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, params: object) -> None:
        self.sql = sql

    def fetchall(self) -> list[dict]:
        if "FROM tres" in self.sql:
            return [{"id": 1001, "type": "gres", "name": "gpu"}]
        return [dict(r) for r in self.rows]

    def close(self) -> None:
        return None
