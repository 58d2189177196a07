"""`jobreport watch` runs end to end on a real SMTP server: one email per job and rule
however often it runs, the record of notices, and enforcement after the grace period."""

from __future__ import annotations

from email import message_from_bytes
from email.policy import default

import pytest

from tests.helpers.mail import mail_settings
from tests.helpers.watch import NOW, gpu_sample, running_job
from webapp.watch.policy import PolicyError, parse_policy
from webapp.watch.rules import RULE_NAMES
from webapp.watch.run import Watcher
from webapp.watch_records import AlertLog, ordinal

POLICY = """
exempt_users = ["carol"]
[[cancel]]
rule = "gpu_idle"
accounts = ["teaching"]
grace_minutes = 10
exempt_accounts = ["research"]
"""


class Live:
    """Every job's GPUs idle (the recorded T4 reading is 0 %)."""

    def sample(self, job, now, windows):
        return gpu_sample(job, 0.0)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def watcher(tmp_path, port, jobs, clock, cancelled, policy=""):
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    settings = mail_settings(tmp_path, port, watch_policy=str(path) if policy else "")
    return Watcher(settings, running=lambda: jobs, live=Live(), clock=clock,
                   canceller=lambda argv: cancelled.append(argv))


def mails(recorder):
    return [message_from_bytes(raw, policy=default) for _, raw in recorder.messages]


def test_one_alert_per_job_and_rule_over_three_runs(tmp_path, smtp):
    recorder, port = smtp
    jobs = [running_job("501"), running_job("502", user="bob", account="teaching")]
    clock, cancelled = Clock(), []
    w = watcher(tmp_path, port, jobs, clock, cancelled)
    first = w.run()
    assert [o for _, o in first.alerts] == ["queued", "queued"]
    for _ in range(2):
        clock.now += 300
        again = w.run()
        assert [o for _, o in again.alerts] == ["sent before", "sent before"]
    assert len(recorder.messages) == 2 and cancelled == []  # no policy: nothing cancelled
    msg = message_from_bytes(recorder.messages[0][1], policy=default)
    assert msg["X-Jobreport-Rule"] == "gpu_idle"
    body = msg.get_body(("plain",)).get_content()
    assert "scancel 501" in body and "GPUs allocated" in body and "1st notice" in body
    log = AlertLog(str(tmp_path / "var" / "outbox.sqlite"))
    assert [(a.user, a.job_id, a.rule) for a in log.alerts(0)] == [
        ("alice", "501", "gpu_idle"), ("bob", "502", "gpu_idle")]
    log.close()


def test_dry_run_sends_and_records_nothing(tmp_path, smtp):
    recorder, port = smtp
    result = watcher(tmp_path, port, [running_job()], Clock(), []).run(dry_run=True)
    assert [o for _, o in result.alerts] == ["would send"]
    assert recorder.messages == []
    log = AlertLog(str(tmp_path / "var" / "outbox.sqlite"))
    assert log.alerts(0) == []


def test_policy_cancels_after_notice_and_grace_never_the_exempt(tmp_path, smtp):
    recorder, port = smtp
    jobs = [running_job("601", user="bob", account="teaching"),
            running_job("602", user="alice", account="research"),
            running_job("603", user="carol", account="teaching")]
    clock, cancelled = Clock(), []
    w = watcher(tmp_path, port, jobs, clock, cancelled, POLICY)
    first = w.run()
    assert [(d.alert.job.job_id, d.outcome) for d in first.decisions] == [
        ("601", "waiting for the first notice")]
    clock.now += 300
    assert [d.outcome for d in w.run().decisions][0].startswith("in grace")
    clock.now += 301
    assert [d.outcome for d in w.run(dry_run=True).decisions] == ["would cancel"]
    assert cancelled == []
    assert [d.outcome for d in w.run().decisions] == ["cancelled"]
    assert cancelled == [["scancel", "601"]]
    (notice,) = [m for m in mails(recorder) if "cancelled" in m["Subject"]]
    assert notice["X-Jobreport-Job"] == "601"
    assert "(rule gpu_idle)" in notice.get_body(("plain",)).get_content()
    log = AlertLog(str(tmp_path / "var" / "outbox.sqlite"))
    (c,) = log.cancellations(0)
    assert (c.job_id, c.user, c.rule, c.outcome) == ("601", "bob", "gpu_idle", "cancelled")
    assert ("GPUs allocated", "1") in c.evidence
    clock.now += 300
    assert [d.outcome for d in w.run().decisions] == ["cancelled before"]
    assert cancelled == [["scancel", "601"]]


def test_policy_file_is_checked():
    assert parse_policy(POLICY, RULE_NAMES).entries[0].grace_seconds == 600
    for bad, what in ((POLICY.replace("gpu_idle", "gpu_idel"), "gpu_idel"),
                      (POLICY.replace('accounts = ["teaching"]', ""), "partition or account"),
                      (POLICY + "\nwhatever = 1\n", "whatever"),
                      ("cancel = 3\n", r"\[\[cancel\]\] tables"),
                      ("cancel = [1]\n", "#1: not a table"),
                      (POLICY.replace("[[cancel]]", "[cancel]"), r"\[\[cancel\]\] tables")):
        with pytest.raises(PolicyError, match=what):
            parse_policy(bad, RULE_NAMES)


@pytest.mark.parametrize(("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"),
                                         (11, "11th"), (12, "12th"), (22, "22nd")])
def test_ordinal(n, text):
    assert ordinal(n) == text


def test_shipped_policy_example_parses_and_names_gpu_idle():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "deploy/watch-policy.toml").read_text()
    policy = parse_policy(text, RULE_NAMES)
    assert [(e.rule, e.partitions, e.grace_seconds) for e in policy.entries] == [
        ("gpu_idle", frozenset({"gpu"}), 3600.0)]
    assert policy.exempt_accounts == frozenset({"admin"})
