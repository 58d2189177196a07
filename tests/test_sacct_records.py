"""Job text holding line breaks, ``|`` and control characters, on real sacct captures
(fixtures/sacct/local-linebreaks-78-*: jobs 78-80 of the local stack, captured with the
argv SacctSource builds): every record is read whole, every value kept as Slurm holds it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers.sacct_fields import CAPTURED_FIELDS, as_captured
from webapp.sources.sacct import SacctSource, parse_sacct, run_sacct
from webapp.sources.sacct_accounting import NAMED_LIST_FIELDS, SacctJobList
from webapp.sources.sacct_records import delimiter_of, split_records

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
META = json.loads((FIX / "local-linebreaks-78.json").read_text())
NAMES = dict(zip(META["ids"], META["names"], strict=True))


def capture(what: str) -> tuple[str, str]:
    """(sacct's stdout as run_sacct decodes it, the delimiter its argv asked for)."""
    text = (FIX / f"local-linebreaks-78-{what}.psv").read_bytes().decode()
    return text, delimiter_of(META["argv"][what])


def replay(what: str) -> SacctSource:
    text, d = capture(what)
    return as_captured(SacctSource(delimiter=d, runner=lambda argv: text))


def test_the_captures_hold_what_was_submitted():
    text, d = capture("jobs")
    assert "\r\n" in text and "two\nlines|pipe" in text and d not in "".join(NAMES.values())


def test_one_job_with_a_line_break_and_a_pipe_in_its_name_and_work_directory():
    job = replay("job").job("78")
    assert job.job_name == "two\nlines|pipe" and job.work_dir == META["workdir"]
    assert (job.user, job.state, job.exit_code, job.cpus) == ("alice", "COMPLETED", "0:0", 2)
    assert job.memory_requested_bytes == 300 * 2**20 and job.elapsed_seconds == 4
    assert job.end_time == datetime.fromtimestamp(1795643939, UTC)
    assert [s.step_id for s in job.steps] == ["batch", "0"]
    assert [s.name for s in job.steps] == ["batch", "python3"]


def test_every_job_of_a_batch_keeps_its_name_and_figures():
    jobs = replay("jobs").jobs(META["ids"])
    assert {j: job.job_name for j, job in jobs.items()} == NAMES
    assert {job.work_dir for job in jobs.values()} == {META["workdir"]}
    assert [(j.state, j.exit_code, len(j.steps)) for j in jobs.values()] == [
        ("COMPLETED", "0:0", 2), ("COMPLETED", "0:0", 1), ("FAILED", "3:0", 1)]


def test_the_job_list_from_one_call_keeps_names_and_submit_times():
    text, d = capture("list")
    listing = SacctJobList(SacctSource(delimiter=d, runner=lambda argv: text), "demo")
    rows = listing.recent(datetime(2026, 1, 1, tzinfo=UTC), user="alice")
    assert {r.job_id: r.job_name for r in rows} == NAMES
    assert all(r.submit_time is not None for r in rows)
    assert [j.job_id for j in parse_sacct(text, NAMED_LIST_FIELDS, delimiter=d)] == META["ids"]


def test_run_sacct_keeps_carriage_returns(tmp_path):
    fake = tmp_path / "sacct"
    fake.write_text(f"#!/bin/sh\nexec cat {FIX / 'local-linebreaks-78-jobs.psv'}\n")
    fake.chmod(0o755)
    text, _ = capture("jobs")
    assert run_sacct([str(fake)]) == text  # text mode would make the \r a line break


def test_a_pipe_delimited_answer_still_glues_a_pipe_and_joins_a_line_break():
    text, d = capture("jobs")
    pipes = text.replace("|", "\x00").replace(d, "|").replace("\x00", "|")
    # With "|" as delimiter only one free-text column can hold a "|" and a line break
    # (the name); the random delimiter is what makes the work directory's safe too.
    pipes = pipes.replace(META["workdir"], "/home/alice")
    jobs = {j.job_id: j for j in parse_sacct(pipes, CAPTURED_FIELDS, delimiter="|")}
    assert {j: jobs[j].job_name for j in NAMES} == NAMES
    assert jobs["78"].cpus == 2 and jobs["80"].exit_code == "3:0"


@pytest.mark.parametrize(("text", "records"), [
    ("1|a|x\n2|b|y\n", [["1", "a", "x"], ["2", "b", "y"]]),
    ("1|a\nb|x\n", [["1", "a\nb", "x"]]),  # a line break inside a field
    ("1|a|b|x\n", [["1", "a|b", "x"]]),  # the delimiter inside the glued column
    ("1|a|x|\n", [["1", "a", "x"]]),  # -p's trailing delimiter
    ("1|a\n2|b|y\n", [["2", "b", "y"]]),  # a broken line before a whole record
    ("1|a|x\n3\n", [["1", "a", "x"]]),  # a broken line at the end
])
def test_split_records(text, records):
    assert list(split_records(text, 3, "|", glue=1)) == records
