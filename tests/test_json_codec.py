"""One JSON shape (``webapp.json_codec``): what the JSON renderer writes is what the archive
stores, and reading it back gives the same report, section by section."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.helpers.reports import SIZING, array_report, sample_report
from tests.test_queue import job_146
from tests.test_steps_waste_coverage import half_covered, steps_report
from webapp.archive.store import Archive
from webapp.detectors import Thresholds, detect_all
from webapp.json_codec import DERIVED, LEFT_OUT, REPORT, decode, encode
from webapp.model import Energy, Gap, JobReport, Replay, TimeLimitKind
from webapp.renderers.json import to_dict
from webapp.report.archived import archive_record, from_archive
from webapp.report.coverage import audited
from webapp.report.peak import node_memory
from webapp.report.waste import compute_waste


def full_report() -> JobReport:
    """Every section filled: real sacct steps (job 1506) with their lines, waste, coverage,
    audit and findings; the queue context of captured job 146; series, a sizing block, an
    array summary, notes and a gap whose detail only staff see."""
    thresholds = Thresholds(min_runtime_seconds=10)
    report = half_covered(steps_report())
    report = dataclasses.replace(report, waste=compute_waste(report, {}, 1.0),
                                 findings=detect_all(report, thresholds))
    report = audited(report, thresholds, 0.8)
    sample = sample_report()
    shared = tuple(dataclasses.replace(s, points=tuple((t, v / 4) for t, v in s.points))
                   for s in sample.usage.memory_rss)
    usage = dataclasses.replace(sample.usage, memory_shmem=shared, memory_cache=shared)
    return dataclasses.replace(
        report, memory_nodes=node_memory(usage, None), usage=dataclasses.replace(
            usage, queries=(("cpu", "rate(x[1m])"),), energy_joules=7.2e6,
            energy_gpu_joules=3.6e6, energy_other_joules=1.8e6,
            energy_by_node=(("node01", 5.4e6), ("node02", 1.8e6)),
            gpu_energy=(("node01/0", 2.5e6), ("node01/1", 1.1e6)),
            replayed=(Replay("node01", "nvml", "replay.json"), Replay("node02", "powercap"))),
        energy=Energy(7.2e6, (("node01", 5.4e6), ("node02", 1.8e6)), 1.2e6, 0.9e6, 370.0,
                      "constant (JOBREPORT_CARBON_INTENSITY)", 740.0),
        queue=job_146(), sizing=SIZING, array=array_report(5).array,
        time_limit_kind=TimeLimitKind.PARTITION, time_limit_seconds=3600.0,
        submit_time=sample.submit_time, notes=("Plots show one point per 30 s.",),
        gaps=(Gap("sacct", "no answer within 30 s", "timeout after 30.0 s on /usr/bin/sacct"),),
        uid=1001, account="research", job_name="steps", work_dir="/home/alice", qos="long")


def test_every_report_field_is_written_or_left_out_on_purpose():
    written = {attr for _, attr, _ in REPORT if attr is not None} | {"audit"}
    names = {f.name for f in dataclasses.fields(JobReport)}
    assert names == written | LEFT_OUT
    assert not written & LEFT_OUT
    assert set(DERIVED) == {key for key, attr, _ in REPORT if attr is None}


def test_decode_gives_back_every_section():
    report = full_report()
    summary = json.loads(json.dumps(encode(report)))
    back = decode(summary)
    assert encode(back) == summary
    for _, attr, _ in REPORT:
        if attr is None or attr in ("gaps", "usage", "coverage"):
            continue
        assert getattr(back, attr) == getattr(report, attr), attr
    assert back.audit == report.audit and back.audit is not None
    assert back.queue == report.queue and back.queue.reasons  # the captured reasons
    # What the JSON leaves out, and nothing else: a gap's detail, and which PromQL was
    # the usage's and which the coverage's.
    assert back.gaps == (Gap("sacct", "no answer within 30 s"),)
    assert back.usage == dataclasses.replace(
        report.usage, queries=report.usage.queries + report.coverage.queries)
    assert back.coverage == dataclasses.replace(report.coverage, queries=())


def test_report_archive_report_is_identical(tmp_path):
    report = full_report()
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        archive.put(archive_record(report))
        back = from_archive(archive.get(report.cluster, report.job_id))
    want, got = to_dict(report), to_dict(back)
    # The archive says where the report comes from; all else is what was written.
    assert got.pop("gaps") == [{"source": "archive", "reason": back.gaps[0].reason},
                               *want.pop("gaps")]
    assert got == want


def test_the_qos_goes_and_comes_back_and_an_older_summary_has_none():
    report = full_report()
    summary = json.loads(json.dumps(encode(report)))
    keys = list(summary)
    assert keys[keys.index("partition") + 1] == "qos" and summary["qos"] == "long"
    assert decode(summary).qos == "long"
    unknown = json.loads(json.dumps(encode(dataclasses.replace(report, qos=None))))
    assert unknown["qos"] is None and decode(unknown).qos is None
    del summary["qos"]  # archived before the field
    back = decode(summary)
    assert back.qos is None and back.partition == report.partition
    assert encode(back)["qos"] is None


@pytest.mark.parametrize("key", ["memory_peak", "array", "memory_nodes"])
def test_summaries_written_before_a_field_still_decode(key):
    summary = json.loads(json.dumps(encode(full_report())))
    if key == "memory_peak":
        del summary["memory_peak"]  # only the bytes were kept then
        assert decode(summary).memory_peak_bytes == summary["memory_peak_bytes"]
    elif key == "memory_nodes":
        del summary["memory_nodes"], summary["series"]["memory_shmem_bytes"]
        assert decode(summary).memory_nodes == ()
        assert decode(summary).usage.memory_shmem == ()
    else:
        del summary["array"]["task_list"]  # only the count was kept then
        assert len(decode(summary).array.tasks) == summary["array"]["tasks"] == 5
