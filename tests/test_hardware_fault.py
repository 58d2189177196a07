"""Trouble that is not the user's: a GPU's XIDs and memory errors, a node set down or
drained while the job ran; said with when and why, never for the program's own XIDs."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.helpers.reports import START, sample_report
from webapp.detectors import Thresholds, detect_all
from webapp.detectors.hardware_fault import HardwareFaultDetector
from webapp.model import GpuFault, NodeEvent
from webapp.sources.accounting import node_state_name
from webapp.sources.prometheus_answers import dated, parse_gpu_faults

T = Thresholds()
AT = START.timestamp() + 12 * 60


def with_faults(*faults: GpuFault, state: str = "FAILED", events=()):
    base = sample_report(state=state, exit_code="1:0")
    return replace(base, usage=replace(base.usage, gpu_faults=faults), node_events=events)


def test_an_xid_79_is_named_with_its_time_and_the_job_is_not_blamed():
    (f,) = HardwareFaultDetector().detect(
        with_faults(GpuFault("node01/2", "xid", "79", 1, AT)), T)
    assert f.message.startswith("GPU node01/2 reported XID 79 (GPU has fallen off the bus) at ")
    assert "(12m 00s into the job)" in f.message and "failure may not be yours" in f.message
    assert f.severity == "critical" and "`--exclude=node01`" in f.advice


def test_the_programs_own_xid_and_a_few_corrected_errors_are_not_faults():
    report = with_faults(GpuFault("node01/0", "xid", "13", 3),
                         GpuFault("node01/0", "ecc_corrected", None, 4))
    assert HardwareFaultDetector().detect(report, T) == ()
    many = with_faults(GpuFault("node01/0", "ecc_corrected", None, T.gpu_ecc_corrected))
    (f,) = HardwareFaultDetector().detect(many, T)
    assert "100 corrected memory errors" in f.message


def test_a_drained_node_with_its_reason_on_a_job_that_completed():
    drained = NodeEvent("node02", START + timedelta(minutes=3), None, "MIXED+DRAIN",
                        "Kill task failed")
    (f,) = HardwareFaultDetector().detect(with_faults(state="COMPLETED", events=(drained,)), T)
    assert f.message.startswith('Node node02 was set MIXED+DRAIN at ')
    assert '(reason: "Kill task failed")' in f.message and "check its results" in f.message
    assert f.severity == "warning"


def test_a_node_failure_says_its_event_once_in_the_outcome():
    down = NodeEvent("node01", START + timedelta(minutes=5), None, "DOWN", "Not responding")
    report = with_faults(state="NODE_FAIL", events=(down,))
    found = {f.name: f for f in detect_all(report, T)}
    assert "hardware_fault" not in found
    assert 'node node01 was set DOWN at' in found["node_failure"].message
    assert 'reason: "Not responding"' in found["node_failure"].message


def test_slurm_node_states_in_slurms_words():
    assert node_state_name(514) == "IDLE+DRAIN"  # a drain on v24, read back from slurmdbd
    assert node_state_name(1) == "DOWN"
    assert node_state_name(1 | 0x800) == "DOWN+NOT_RESPONDING"


def test_fault_answers_are_parsed_and_dated():
    answer = [({"instance": "gpu1", "gpu": "0", "xid": "79", "figure": "xid"}, 1.0),
              ({"instance": "gpu1", "gpu": "1", "type": "uncorrected", "figure": "ecc"}, 2.0)]
    faults = parse_gpu_faults(answer, "instance")
    assert [(f.gpu, f.kind, f.code, f.count) for f in faults] == [
        ("gpu1/0", "xid", "79", 1.0), ("gpu1/1", "ecc_uncorrected", None, 2.0)]
    series = [(("gpu1/0", "xid", "79"), [(100.0, 4.0), (110.0, 4.0), (120.0, 5.0)])]
    assert dated(faults, series)[0].first_at == 120.0 and dated(faults, series)[1].first_at is None


def test_the_syncs_batch_reads_node_events_once_and_each_job_gets_its_own():
    from webapp.sources.prefetched import PrefetchedAccounting

    class Live:
        calls = 0

        def node_events(self, nodes, start, end):
            Live.calls += 1
            return (NodeEvent("n1", START + timedelta(minutes=5), None, "DOWN", "x"),
                    NodeEvent("n2", START + timedelta(minutes=50), None, "IDLE+DRAIN", "y"))

    window = (START, START + timedelta(hours=2))
    batch = PrefetchedAccounting(Live(), {}, window)
    first = batch.node_events(("n1",), START, START + timedelta(minutes=30))
    second = batch.node_events(("n1", "n2"), START + timedelta(minutes=40),
                               START + timedelta(hours=1))
    assert [e.node for e in first] == ["n1"] and [e.node for e in second] == ["n2"]
    assert Live.calls == 1
