"""The sync-lag benchmark at small scale, so its generator, backfill and replay cannot rot:
jobs of the real captured shapes end one every 2 s for 20 seconds, backfilled with
promtool into a Prometheus of its own, and the sync's own runs (back to back, as the
epilog's nudge keeps them) archive every one of them within the target lag."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.stack

def test_jobs_ending_every_two_seconds_are_archived_within_a_minute():
    from bench import bench_sync_lag

    said: list[str] = []
    result = bench_sync_lag.measure(1 / 3, 2.0, [0.0], process_start=False, say=said.append)
    lags, runs = result[0.0]
    assert len(lags) == 10  # every job archived (measure asserts it too)
    assert all(lag >= 0 for lag in lags)  # never before its end
    assert bench_sync_lag.pct(lags, 0.99) <= bench_sync_lag.TARGET_P99
    assert len(runs) >= 2  # the jobs arrived over several runs, not all in one
    assert any("lag p50" in line for line in said)
