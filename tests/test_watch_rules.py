"""The watch rules on running jobs: each fires on its condition and stays quiet on a
true negative; GPUs from recorded NVML readings, nodes from captured Prometheus answers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.helpers.watch import (
    HOUR,
    NOW,
    WINDOWS,
    gpu_sample,
    memory_series,
    node_sample,
    nvml_utilization,
    running_job,
)
from webapp.settings import SettingsError
from webapp.sources.live import LiveSample
from webapp.thresholds import Thresholds, parse_thresholds
from webapp.watch.rules import RULE_NAMES, evaluate, fit_slope, gpu_idle, memory_growth, node_idle

T = Thresholds()
GIB = 1024**3


def test_rules_registry_names_each_rule_once():
    assert RULE_NAMES == ("gpu_idle", "node_idle", "memory_growth", "time_limit_no_output",
                          "small_files_off_scratch")


def test_idle_gpu_recorded_t4_alerts_with_evidence_and_scancel():
    alert = gpu_idle(gpu_sample(running_job(gpus=2), nvml_utilization("T4")), T)
    assert alert is not None and alert.rule == "gpu_idle"
    assert alert.cancel_command == "scancel 501"
    assert ("GPUs allocated", "2") in alert.evidence
    assert len(alert.evidence) == 3  # one row per GPU besides the count


def test_busy_gpu_recorded_h100_gets_no_alert():
    assert nvml_utilization("H100") == 1.0
    assert evaluate(gpu_sample(running_job(), nvml_utilization("H100")), T) == ()


@pytest.mark.parametrize("change", [
    {"ran": 0.5 * HOUR},  # not idle for the whole window yet
    {"gpus": 2},  # only one of two GPUs seen: no verdict on missing data
])
def test_idle_gpu_needs_the_whole_window_and_every_gpu(change):
    job = running_job(**{k: v for k, v in change.items() if k != "gpus"})
    sample = gpu_sample(job, 0.0)
    if "gpus" in change:
        sample = replace(sample, job=replace(job, gpus=change["gpus"]))
    assert gpu_idle(sample, T) is None


def test_idle_gpu_with_too_few_samples_is_not_judged():
    assert gpu_idle(gpu_sample(running_job(), 0.0, samples=100), T) is None


def test_multi_node_job_with_a_captured_idle_node_alerts_on_that_node():
    job = running_job(nodes=("node-a", "node-b"), gpus=0)
    sample = node_sample(job, "687", "688")  # a busy job's node, an idle job's node
    alert = node_idle(sample, replace(T, node_idle_seconds=20.0))
    assert alert is not None
    assert "1 of the 2 nodes" in alert.message
    assert ("node node-b: cores busy, last 20s", "0.00") in alert.evidence
    assert ("node node-a: cores busy, last 20s", "1.00") in alert.evidence


def test_multi_node_job_with_busy_nodes_and_single_node_jobs_get_none():
    t = replace(T, node_idle_seconds=20.0)
    busy = running_job(nodes=("node-a", "node-b"), gpus=0)
    assert node_idle(node_sample(busy, "687", "687"), t) is None
    single = running_job(nodes=("node-b",), gpus=0)
    assert node_idle(node_sample(single, "688"), t) is None


def test_fit_slope_is_least_squares():
    s = memory_series(per_second=1000.0, base=5.0)
    assert fit_slope(s) == pytest.approx(1000.0)


def test_memory_growing_into_the_limit_before_the_time_limit_alerts():
    job = running_job(ran=HOUR, limit=10 * HOUR)
    # 1 GiB now... growing 0.5 GiB per hour reaches the 4 GiB limit in 6 h, before 9 h left
    series = memory_series(per_second=0.5 * GIB / HOUR, base=0.5 * GIB)
    sample = LiveSample(job, NOW, WINDOWS, 5.0, memory_held=(series,),
                        memory_limit_bytes=4 * GIB)
    alert = memory_growth(sample, T)
    assert alert is not None and alert.rule == "memory_growth"
    assert ("memory limit per node", "4.0 GiB") in alert.evidence


def test_memory_that_will_not_reach_the_limit_in_time_gets_none():
    job = running_job(ran=HOUR, limit=2 * HOUR)  # 1 h left: +0.5 GiB is 1.5 GiB < 4 GiB
    series = memory_series(per_second=0.5 * GIB / HOUR, base=0.5 * GIB)
    sample = LiveSample(job, NOW, WINDOWS, 5.0, memory_held=(series,),
                        memory_limit_bytes=4 * GIB)
    assert memory_growth(sample, T) is None
    flat = LiveSample(job, NOW, WINDOWS, 5.0, memory_held=(memory_series(0.0, GIB),),
                      memory_limit_bytes=4 * GIB)
    assert memory_growth(flat, T) is None


def test_time_limit_near_without_output_hints_at_checkpoints():
    job = running_job(ran=9.5 * HOUR, limit=10 * HOUR, gpus=0)
    quiet = LiveSample(job, NOW, WINDOWS, 5.0, written_bytes=4096.0)
    (alert,) = evaluate(quiet, T)
    assert alert.rule == "time_limit_no_output" and "95%" in alert.message
    writing = replace(quiet, written_bytes=500 * 1024**2)
    assert evaluate(writing, T) == ()
    early = replace(quiet, job=running_job(ran=5 * HOUR, limit=10 * HOUR, gpus=0))
    assert evaluate(early, T) == ()


def test_small_files_off_scratch_now():
    job = running_job(gpus=0)
    base = LiveSample(job, NOW, WINDOWS, 5.0, small_files_write_calls=50_000.0,
                      small_files_write_bytes=50_000 * 4096.0, scratch_in_use=0.0)
    (alert,) = evaluate(base, T)
    assert alert.rule == "small_files_off_scratch"
    assert evaluate(replace(base, scratch_in_use=1.0), T) == ()
    assert evaluate(replace(base, scratch_in_use=None), T) == ()  # unknown is not "off"
    assert evaluate(replace(base, small_files_write_bytes=50_000 * 65536.0), T) == ()


def test_missing_series_never_fire():
    assert evaluate(LiveSample(running_job(nodes=("a", "b")), NOW, WINDOWS, 5.0), T) == ()


def test_watch_thresholds_come_from_the_one_threshold_variable():
    assert parse_thresholds("JOBREPORT_THRESHOLDS", "gpu_idle_seconds=30").gpu_idle_seconds == 30
    with pytest.raises(SettingsError, match="JOBREPORT_THRESHOLDS: unknown name 'gpu_idel'"):
        parse_thresholds("JOBREPORT_THRESHOLDS", "gpu_idel=1")
