"""The web's report cache (webapp/web/reports.py): a built report is reused for its time
to live, one with a gap (a source was down) for a shorter one, a failure never."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.helpers.reports import sample_report
from webapp.model import Gap
from webapp.web.reports import ReportCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def builder(report):
    built = []

    def build():
        built.append(report)
        return report
    return build, built


def test_a_report_is_reused_for_its_ttl_a_gapped_one_briefly():
    clock = Clock()
    cache = ReportCache(ttl=30, gap_ttl=5, clock=clock)
    whole = sample_report()
    gapped = replace(whole, gaps=(Gap("prometheus", "down"),))
    build, built = builder(whole)
    build_gapped, built_gapped = builder(gapped)
    cache.get("1", build), cache.get("2", build_gapped)
    clock.now += 4.9
    cache.get("1", build), cache.get("2", build_gapped)
    assert (len(built), len(built_gapped)) == (1, 1)
    clock.now += 0.2  # the gapped report is 5.1 s old, the whole one too
    cache.get("1", build), cache.get("2", build_gapped)
    assert (len(built), len(built_gapped)) == (1, 2)
    clock.now += 25
    cache.get("1", build)
    assert len(built) == 2


def test_a_failed_build_is_not_kept_and_the_cache_is_bounded():
    cache = ReportCache(size=2, clock=Clock())

    def failing():
        raise RuntimeError("sacct down")

    with pytest.raises(RuntimeError):
        cache.get("1", failing)
    build, built = builder(sample_report())
    for key in ("1", "2", "3", "1"):
        cache.get(key, build)
    assert len(built) == 4  # "1" was built, then dropped for "3", then built again
