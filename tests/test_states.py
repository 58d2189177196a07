"""One job-state vocabulary: a state is ended, or not, the same way in a job list, a
history, an array summary and a report (``webapp.states``)."""

from __future__ import annotations

import ast
from dataclasses import replace
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from tests.helpers import stack
from tests.helpers.reports import sample_report
from tests.test_history import job as history_job
from tests.test_job_list import NOW, Accounting, Prometheus, Sacct, _acct, _sacct
from webapp import states
from webapp.detectors import Thresholds
from webapp.lists.job_list import STATES
from webapp.mail.policy import skip_reason
from webapp.report.arrays import summarize_array
from webapp.report.history import MIN_JOBS, suggest
from webapp.report.job_rows import RUNNING_NOTE, ListSources, list_jobs
from webapp.settings import Settings
from webapp.sources.ended import FINAL_STATES
from webapp.sources.sacct import parse_sacct
from webapp.states import ENDED_STATES, NOT_ENDED_STATES, REQUEUED_STATES, ended

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "sacct"
# Every state the vocabulary names, and one it does not (a newer Slurm's).
ALL = sorted(NOT_ENDED_STATES | set(ENDED_STATES) | {"UNKNOWN(99)"})


def listed_as_ended(state: str) -> bool:
    """The job list looks an ended job up in the archive; a job not ended is 'not ended'."""
    looked_up: list[str] = []

    def archived(cluster: str, job_id: str):
        looked_up.append(job_id)
        return None

    src = ListSources(Accounting([_acct("31", state)]), Sacct([_sacct("31")]), Prometheus([]),
                      archived)
    (row,) = list_jobs(src, NOW - timedelta(days=7), NOW, user="alice")
    assert (row.missing == (RUNNING_NOTE,)) == (not looked_up)
    return bool(looked_up)


def history_counts(state: str) -> bool:
    """The #SBATCH block is based on the ended jobs only."""
    jobs = [history_job(i, 100) for i in range(MIN_JOBS)] + [history_job(9, 100, state=state)]
    return suggest(jobs, Thresholds()).based_on == MIN_JOBS + 1


def array_counts(state: str) -> bool:
    """An array's percentiles are over the tasks that ended."""
    tasks = parse_sacct((FIX / "local-array-28.psv").read_text(), tz=UTC)
    summary = summarize_array([*tasks[:3], replace(tasks[3], state=state)])
    return summary.elapsed_p50 != summarize_array(tasks[:3]).elapsed_p50


def report_is_ended(state: str) -> bool:
    return not sample_report(state=state).unfinished


@pytest.mark.parametrize("state", ALL)
def test_a_state_is_ended_or_not_alike_everywhere(state):
    want = ended(state)
    assert listed_as_ended(state) == want
    assert history_counts(state) == want
    assert array_counts(state) == want
    assert report_is_ended(state) == want


@pytest.mark.parametrize("state", sorted(REQUEUED_STATES))
def test_a_requeued_job_is_not_ended_it_will_run_again(state):
    assert not ended(state)
    report = sample_report(state=state)
    assert report.unfinished and not report.running  # no verdict yet, no allocation held
    assert skip_reason(report, Settings(), frozenset()) == "still running"


def test_final_states_are_one_list():
    # sacct --state abbreviations, the stack tests' wait and the list filter: one source.
    assert FINAL_STATES == ("BF", "CA", "CD", "DL", "F", "NF", "OOM", "PR", "TO")
    assert stack.FINAL_STATES == set(ENDED_STATES)
    assert set(STATES) - {"PENDING", "RUNNING", "SUSPENDED"} == set(ENDED_STATES)


def test_no_state_is_spelled_outside_the_vocabulary():
    """Code compares a state with webapp.states' constants, never with its own literal
    (docstrings and PromQL text aside): a typo there would match no job, silently."""
    names = {v for k, v in vars(states).items() if k.isupper() and isinstance(v, str)}
    found = []
    for path in sorted((ROOT / "webapp").rglob("*.py")):
        if path.name == "states.py":
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{n.lineno} {n.value}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and n.value in names and id(n) not in docs]
    assert found == []
