"""Prometheus work per report is bounded by points, against the real Prometheus."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import requests

from webapp.report.build import COARSE_STEP, coarse_note
from webapp.sources import prometheus, prometheus_queries


class CountingSession(requests.Session):
    """A real session that records every request's query parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict] = []

    def request(self, method, url, params=None, **kwargs):
        self.calls.append(dict(params or {}))
        return super().request(method, url, params=params, **kwargs)


@pytest.mark.parametrize("days", [1 / 24, 365, 3650])
def test_requests_per_report_are_capped_whatever_the_length(stack_env, days):
    session = CountingSession()
    src = prometheus.PrometheusSource(stack_env["JOBREPORT_PROMETHEUS_URL"],
                                      scrape_interval=30, session=session)
    end = datetime.now(UTC)
    usage = src.usage("999999999", end - timedelta(days=days), end, ["node01"])
    # The old fixed 7-day chunks made 332 requests for a year, 3,146 for ten.
    assert len(session.calls) <= prometheus.REQUEST_BUDGET <= 40
    ranges = [c for c in session.calls if "step" in c]
    per_query = len(ranges) // len(prometheus_queries.RANGE_QUERIES)
    instants = sum((c["end"] - c["start"]) // c["step"] + 1 for c in ranges[:per_query])
    assert instants <= prometheus.MAX_POINTS
    assert usage.step_seconds == ranges[0]["step"]
    assert (usage.step_seconds >= COARSE_STEP) == (days >= 365)


def test_the_coarse_step_is_said_in_words():
    assert "one point per 8h 46m" in coarse_note(31_560)
