"""Every finding's evidence as one readable sentence, in every format; JSON keeps the numbers.

The reports are the detector tests' own (real sacct captures plus recorded usage), so each
detector fires here on the same input it is tested on.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from tests import test_detectors_causes as causes
from tests import test_hardware_fault as hardware
from tests import test_memory_kinds as memory_kinds
from tests.helpers.reports import sample_report
from tests.test_detectors import CASES, HB, flat, report_for
from tests.test_node_idle import two_node_report
from tests.test_queue import WAIT_ONLY, job_146, two_types
from tests.test_queue import report as queue_report
from webapp.archive.record import report_from_record
from webapp.detectors import DETECTORS, Thresholds, detect_all
from webapp.model import Finding, Severity, Usage
from webapp.renderers import html, text
from webapp.renderers import json as json_renderer
from webapp.renderers.presentation import evidence_line

# What OutcomeDetector emits besides its own name; every other detector emits its name.
OUTCOMES = {"job_failed", "job_timeout", "node_failure", "job_cancelled", "preempted"}


def triggering_reports():
    """(case id, report, thresholds) that make every detector fire at least once."""
    for case in CASES:
        yield case[0], report_for(*case[1:4], **case[4]), Thresholds()
    yield "memory-near-limit", replace(report_for(HB, "7216823_40"),
                                       memory_requested_bytes=1024**3), Thresholds()
    yield "oversubscribed-cores", replace(report_for(HB, "7216823_40"), cpus=2), Thresholds()
    yield "preempted", replace(report_for(HB, "7216823_40"), state="PREEMPTED"), Thresholds()
    yield "gpu-util-low-four", report_for(HB, "7971484", Usage(gpu_utilization=tuple(
        flat(f"a100gpu2/{i}", 0.05) for i in range(4))), elapsed_seconds=3600.0), Thresholds()
    yield "time-limit-past-usual", queue_report(
        job_146(), time_limit_seconds=3600.0, state="COMPLETED", elapsed_seconds=16.0), WAIT_ONLY
    q = replace(job_146(), requested_gpu_types=("A100",), gpus_available_max=two_types())
    yield "gpu-type-unavailable", queue_report(q, gpus=1), WAIT_ONLY
    yield "node-idle", two_node_report(0.0), Thresholds()
    yield from causes.triggering_reports()
    yield "memory-in-tmpfs", memory_kinds.shm_stack(), Thresholds()
    yield "hardware-fault", hardware.with_faults(
        hardware.GpuFault("node01/2", "xid", "79", 1, hardware.AT)), Thresholds()


ALL = [(case, detect_all(report, t)) for case, report, t in triggering_reports()]
# A readable sentence: no `key = value` pairs, no snake_case evidence keys.
DUMP = re.compile(r"\b[a-z]+_[a-z_]+\b|\s=\s")


def test_every_detector_fires_in_these_reports():
    names = {f.name for _, findings in ALL for f in findings}
    expected = ({d.name for d in DETECTORS} - {"outcome"}) | OUTCOMES
    assert expected <= names, sorted(expected - names)


@pytest.mark.parametrize("case, findings", ALL, ids=[c for c, _ in ALL])
def test_every_finding_has_one_sentence(case, findings):
    for f in findings:
        sentence = f.evidence_text
        assert sentence, (case, f.name)
        assert sentence[0].isupper() or sentence[0].isdigit(), sentence
        assert sentence.endswith(".") and "\n" not in sentence, sentence
        assert not DUMP.search(sentence), (f.name, sentence)
        assert "None" not in sentence and "n/a" not in sentence, (f.name, sentence)


def test_sentences_read_the_numbers():
    gpu = next(f for _, fs in ALL for f in fs if f.name == "gpu_idle"
               and f.evidence["gpus_allocated"] == 1)
    assert gpu.evidence_text.startswith("1 GPU allocated; it was idle for the whole job")
    mem = next(f for c, fs in ALL if c == "memory-near-limit" for f in fs
               if f.name == "memory_near_limit")
    assert "of the 1.0 GiB limit" in mem.evidence_text


def test_fallback_is_a_readable_list_never_key_equals_value():
    f = Finding("custom", Severity.INFO, "m", "a",
                {"memory_peak_bytes": 3 * 1024**3, "elapsed_seconds": 725, "time_used": 0.05,
                 "gpus_idle": 1})
    line = evidence_line(f)
    assert line == "Memory peak: 3.0 GiB; elapsed: 12m 05s; time used: 5.0%; GPUs idle: 1."
    assert evidence_line(replace(f, evidence={})) == ""
    assert evidence_line(replace(f, evidence_text="One sentence.")) == "One sentence."


SENTENCE = "1 GPU allocated; it was idle for the whole job (never above 0.0% busy)."


def _report():
    findings = (Finding("gpu_idle", Severity.CRITICAL, "GPU idle.", "Drop `--gres=gpu:1`.",
                        {"gpus_allocated": 1, "gpus_idle": 1}, SENTENCE),)
    return sample_report(findings=findings)


def test_sentence_in_html_text_and_email_not_the_keys(tmp_path):
    from webapp.renderers import email

    report = _report()
    page = html.render(report)
    out = text.render(report, details=True)
    msg = email.render(report, "alice@example.org", "jobreport@example.org", pdf=b"%PDF")
    plain = msg.get_body(("plain",)).get_content()
    rich = msg.get_body(("html",)).get_content()
    for body in (page, out):
        assert SENTENCE in " ".join(body.split()), body[:400]
    # The email is the short form (findings with advice); the evidence is in the PDF.
    for body in (page, out, plain, rich):
        assert "gpus_allocated" not in body and "gpus_idle" not in body


def test_json_keeps_the_numbers_and_adds_the_sentence():
    data = json.loads(json_renderer.render(_report()))
    f = data["findings"][0]
    assert f["evidence"] == {"gpus_allocated": 1, "gpus_idle": 1}
    assert f["evidence_text"] == SENTENCE


def test_archive_round_trip_keeps_the_sentence():
    summary = json_renderer.to_dict(_report(), include_series=False)
    back = report_from_record(summary, {})
    assert back.findings[0].evidence_text == SENTENCE
    assert back.findings[0].evidence == {"gpus_allocated": 1, "gpus_idle": 1}
