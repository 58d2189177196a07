"""The policy in force read again without a restart (webapp/detectors/policy_in_force.py):
files of a real policy directory edited, the next judgement following them; a broken edit
keeping the last good policy and showing its errors to staff; SIGHUP forcing a read."""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import replace

import pytest

from tests.helpers.web import make_app, password_settings, signed_in
from tests.test_detectors import LOCAL, report_for
from webapp.detectors import NAMES, judge
from webapp.detectors.policy import PolicyError
from webapp.detectors.policy_in_force import (
    CHECK_SECONDS,
    PolicySource,
    in_force,
    reload_on_sighup,
)
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.thresholds import Thresholds

OFF_IN_DEBUG = '[[override]]\npartition = "debug"\nrule = "short_job"\nenabled = false\n'
# the same rule for the gpu partition: debug's short jobs are judged short again
OFF_IN_GPU = OFF_IN_DEBUG.replace('"debug"', '"gpu"')
BROKEN = OFF_IN_DEBUG + '\n[[override]]\nrule = "short_jobs"\nenabled = false\n'


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def found(policy) -> set[str]:  # noqa: ANN001
    report = replace(report_for(LOCAL, "11"), partition="debug")
    return {f.name for f in judge(report, Thresholds(), policy)[0]}


@pytest.fixture
def site(tmp_path):
    (tmp_path / "site.toml").write_text(OFF_IN_DEBUG)
    return tmp_path


def test_an_edit_is_in_force_at_the_first_use_after_the_check(site):
    clock = Clock()
    source = PolicySource(str(site), NAMES, clock=clock)
    first = source.policy()
    assert "short_job" not in found(first)
    (site / "site.toml").write_text(OFF_IN_GPU)
    clock.now += CHECK_SECONDS / 2
    assert source.policy() is first  # within the check interval: no look at the files
    clock.now += CHECK_SECONDS / 2
    assert "short_job" in found(source.policy())
    assert source.policy().version != first.version
    (site / "more.toml").write_text('[[override]]\nrule = "short_job"\nenabled = false\n')
    clock.now += CHECK_SECONDS
    assert "short_job" not in found(source.policy())  # a new file counts too


def test_a_broken_edit_keeps_the_last_good_policy_and_says_why_once(site, caplog):
    clock = Clock()
    source = PolicySource(str(site), NAMES, clock=clock)
    good = source.policy()
    (site / "site.toml").write_text(BROKEN)
    caplog.set_level(logging.ERROR, "webapp.detectors.policy_in_force")
    for _ in range(3):
        clock.now += CHECK_SECONDS
        assert source.policy() is good
    state = source.state()
    assert state.policy is good
    assert state.problems == (f"{site / 'site.toml'}:7: no detector 'short_jobs' "
                              "(docs/findings.md)",)
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and f"policy {good.version} stays in force" in logged[0]
    assert f"{site / 'site.toml'}:7:" in logged[0]
    (site / "site.toml").write_text(OFF_IN_GPU)  # fixed
    clock.now += CHECK_SECONDS
    assert not source.state().problems
    assert "short_job" in found(source.policy())


def test_broken_from_the_start_raises_until_it_loads(site):
    (site / "site.toml").write_text(BROKEN)
    clock = Clock()
    source = PolicySource(str(site), NAMES, clock=clock)
    with pytest.raises(PolicyError, match="short_jobs"):
        source.policy()
    assert source.state().policy is None
    (site / "site.toml").write_text(OFF_IN_DEBUG)
    clock.now += CHECK_SECONDS
    assert "short_job" not in found(source.policy())


def test_sighup_makes_the_report_service_judge_by_the_new_files(site):
    service = ReportService(Settings(policy_dir=str(site)))
    assert service.policies is in_force(str(site))  # the process's one loader
    report = replace(report_for(LOCAL, "11"), partition="debug")
    assert "short_job" not in {f.name for f in service.judged(report).findings}
    before = signal.getsignal(signal.SIGHUP)
    (site / "site.toml").write_text(OFF_IN_GPU)
    with reload_on_sighup():
        assert signal.getsignal(signal.SIGHUP) is not before
        os.kill(os.getpid(), signal.SIGHUP)
        judged = service.judged(report)  # well within CHECK_SECONDS: read for the HUP
    assert signal.getsignal(signal.SIGHUP) is before
    assert "short_job" in {f.name for f in judged.findings}
    assert judged.audit is not None
    assert judged.audit.policy_version == service.policy.version != None  # noqa: E711


def test_staff_see_a_broken_policy_on_their_pages(tmp_path, site):
    settings = password_settings(tmp_path, policy_dir=str(site))
    app = make_app(settings)
    staff, alice = signed_in(app, "staffer"), signed_in(app, "alice")
    good = in_force(str(site)).policy()
    assert "policy-problems" not in staff.get("/staff/users/bob").get_data(as_text=True)
    (site / "site.toml").write_text(BROKEN)
    in_force(str(site)).reload()  # what a SIGHUP or the next check does
    page = staff.get("/staff/users/bob").get_data(as_text=True)
    assert 'id="policy-problems"' in page
    assert f"{site / 'site.toml'}:7: no detector &#39;short_jobs&#39;" in page
    assert f"the last version that loaded, {good.version}" in page
    assert "policy-problems" in staff.get("/").get_data(as_text=True)  # every staff page
    assert "policy-problems" not in alice.get("/").get_data(as_text=True)


def test_no_good_policy_yet_the_web_app_answers_503(tmp_path, site):
    (site / "site.toml").write_text(BROKEN)
    settings = password_settings(tmp_path, policy_dir=str(site))
    alice = signed_in(make_app(settings, service=None), "alice")
    answer = alice.get("/jobs/11")
    assert answer.status_code == 503
    assert "JOBREPORT_POLICY_DIR" in answer.get_data(as_text=True)
