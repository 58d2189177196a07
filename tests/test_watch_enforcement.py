"""The watch's enforcement policy as the site policy's ``[[cancel]]`` tables
(webapp/detectors/policy_cancel.py, webapp/watch/enforcement.py): checked with file and
line, scoped by the overrides' one rule, reloaded with the policy, chosen over the
deprecated JOBREPORT_WATCH_POLICY file, and shown by `jobreport policy explain`."""

from __future__ import annotations

import io
import logging
from dataclasses import replace

import pytest

from tests.helpers.mail import mail_settings
from tests.helpers.watch import running_job
from tests.test_detectors import LOCAL, report_for
from tests.test_watch_run import POLICY, Clock, Live
from webapp.cli import build_parser
from webapp.cli import policy as cli_policy
from webapp.detectors import NAMES
from webapp.detectors.policy import PolicyError, load
from webapp.detectors.policy_cancel import WATCH_RULES
from webapp.detectors.policy_in_force import in_force
from webapp.settings import Settings
from webapp.watch.enforcement import enforcement_in_force, watch_scope
from webapp.watch.rules import RULE_NAMES
from webapp.watch.run import Watcher

# gpu_idle cancels in partition gpu after an hour, in account teaching after 10 minutes
# (account is more specific than partition), never for alice nor account bench.
CANCELS = """\
[[cancel]]
rule = "gpu_idle"
partition = "gpu"
grace_minutes = 60
excluded_accounts = ["bench"]

[[cancel]]
account = "teaching"
rule = "gpu_idle"
grace_minutes = 10

[[cancel]]
user = "alice"
enabled = false
"""


def site(tmp_path, text: str = CANCELS):
    d = tmp_path / "policy"
    d.mkdir(exist_ok=True)
    (d / "watch.toml").write_text(text)
    return d


def scope(**job) -> dict[str, str | None]:
    return {"cluster": "demo", "partition": "debug", "account": "research", "qos": None,
            "user": "bob", **job}


def test_the_policy_knows_the_watchs_rules():
    assert WATCH_RULES == RULE_NAMES


def test_most_specific_wins_as_for_the_overrides(tmp_path):
    p = load(site(tmp_path), NAMES)
    assert len(p.cancels) == 3
    assert p.enforced("gpu_idle", scope(partition="gpu")).grace_seconds == 3600
    assert p.enforced("gpu_idle", scope(partition="gpu", account="teaching")
                      ).grace_seconds == 600
    assert p.enforced("gpu_idle", scope(partition="gpu", user="alice")).grace_seconds is None
    off = p.enforced("gpu_idle", scope(partition="gpu", account="bench"))
    assert off.grace_seconds is None and "(this job is excluded)" in off.applied[0]
    assert p.enforced("node_idle", scope(partition="gpu")).grace_seconds is None
    said = p.enforced("gpu_idle", scope(partition="gpu", account="teaching", user="alice"))
    assert [a.split(": ", 1)[1] for a in said.applied] == [
        "gpu_idle in partition gpu: grace 60 min; excluded accounts bench",
        "gpu_idle in account teaching: grace 10 min",
        "every watch rule in user alice: off"]
    assert said.applied[0].startswith(f"{tmp_path / 'policy' / 'watch.toml'}:2:")


@pytest.mark.parametrize("text, wanted", [
    ('[[cancel]]\npartition = "gpu"\nrule = "gpu_idel"\ngrace_minutes = 5\n',
     ":3: no watch rule 'gpu_idel'"),
    ('\n[[cancel]]\nrule = "gpu_idle"\ngrace_minutes = 5\n',
     ":3: a [[cancel]] with grace_minutes needs a scope"),
    ('[[cancel]]\npartition = "gpu"\nrule = "gpu_idle"\ngrace_minutes = -1\n',
     ":3: grace_minutes must be a number >= 0"),
    ('[[cancel]]\npartition = "gpu"\nrule = "gpu_idle"\npartitions = ["gpu"]\n',
     ":3: unknown key 'partitions'"),
    ('[[cancel]]\npartition = "nowhere"\nrule = "gpu_idle"\ngrace_minutes = 5\n',
     ":3: no partition 'nowhere' on this cluster"),
    ('[[cancel]]\nuser = "x"\nrule = "gpu_idle"\nenabled = "no"\n',
     ":3: enabled must be true or false"),
])
def test_policy_check_names_file_and_line(tmp_path, text, wanted):
    d = site(tmp_path, text)
    with pytest.raises(PolicyError) as err:
        load(d, NAMES, frozenset({"debug", "gpu"}))
    assert [p for p in err.value.problems if p.startswith(f"{d / 'watch.toml'}{wanted}")]
    args = build_parser().parse_args(["policy", "check", "--partitions", "debug,gpu", str(d)])
    out, errs = io.StringIO(), io.StringIO()
    assert cli_policy.run_policy(args, Settings(cluster="demo"), out, errs) == 1
    assert errs.getvalue().startswith(f"{d / 'watch.toml'}{wanted}")


def test_policy_check_counts_the_cancel_tables(tmp_path):
    args = build_parser().parse_args(["policy", "check", "--partitions", "debug,gpu",
                                      str(site(tmp_path))])
    out, errs = io.StringIO(), io.StringIO()
    assert cli_policy.run_policy(args, Settings(cluster="demo"), out, errs) == 0, errs.getvalue()
    assert "3 cancel tables" in out.getvalue()


def watcher(tmp_path, port, jobs, clock, cancelled, **changes):
    settings = mail_settings(tmp_path, port, **changes)
    return Watcher(settings, running=lambda: jobs, live=Live(), clock=clock,
                   canceller=lambda argv: cancelled.append(argv))


def test_the_watch_cancels_by_the_policy_directory(tmp_path, smtp):
    _, port = smtp
    jobs = [running_job("701", user="bob", account="teaching", partition="gpu"),
            running_job("702", user="alice", account="teaching", partition="gpu"),
            running_job("703", user="bob", account="research", partition="debug")]
    clock, cancelled = Clock(), []
    w = watcher(tmp_path, port, jobs, clock, cancelled, policy_dir=str(site(tmp_path)))
    assert [(d.alert.job.job_id, d.outcome) for d in w.run().decisions] == [
        ("701", "waiting for the first notice")]
    clock.now += 601
    assert [d.outcome for d in w.run().decisions] == ["cancelled"]
    assert cancelled == [["scancel", "701"]]


def test_a_cancel_table_scoped_by_qos_takes_the_running_jobs_qos(tmp_path, smtp):
    _, port = smtp
    d = site(tmp_path, '[[cancel]]\nqos = "long"\nrule = "gpu_idle"\ngrace_minutes = 10\n')
    p = load(d, NAMES)
    assert p.enforced("gpu_idle", scope(qos="long")).grace_seconds == 600
    assert p.enforced("gpu_idle", scope(qos="normal")).grace_seconds is None
    assert p.enforced("gpu_idle", scope()).grace_seconds is None  # no QoS known
    # The watch's running jobs (the accounting view's rows) carry their QoS to the policy.
    jobs = [running_job("751", user="bob", account="teaching", partition="gpu", qos="long"),
            running_job("752", user="bob", account="teaching", partition="gpu",
                        qos="normal")]
    assert watch_scope(jobs[0])["qos"] == "long"
    clock, cancelled = Clock(), []
    w = watcher(tmp_path, port, jobs, clock, cancelled, policy_dir=str(d))
    assert [(d.alert.job.job_id, d.outcome) for d in w.run().decisions] == [
        ("751", "waiting for the first notice")]
    clock.now += 601
    assert [d.outcome for d in w.run().decisions] == ["cancelled"]
    assert cancelled == [["scancel", "751"]]


def test_an_edit_of_the_directory_is_in_force_at_the_next_run(tmp_path, smtp):
    _, port = smtp
    d = site(tmp_path, "")
    jobs = [running_job("711", user="bob", account="teaching", partition="gpu")]
    w = watcher(tmp_path, port, jobs, Clock(), [], policy_dir=str(d))
    first = w.run(dry_run=True)
    assert not first.enforcing and first.decisions == []
    (d / "watch.toml").write_text(CANCELS)
    in_force(str(d)).reload()  # what the 5-second look or a SIGHUP does
    again = w.run(dry_run=True)
    assert again.enforcing
    assert [d.outcome for d in again.decisions] == ["waiting for the first notice"]


def test_the_watchs_own_file_still_works_with_a_warning(tmp_path, smtp, caplog):
    _, port = smtp
    (tmp_path / "watch-policy.toml").write_text(POLICY)
    d = site(tmp_path, '[[override]]\nrule = "short_job"\nenabled = false\n')  # no [[cancel]]
    jobs = [running_job("721", user="bob", account="teaching")]
    w = watcher(tmp_path, port, jobs, Clock(), [], policy_dir=str(d),
                watch_policy=str(tmp_path / "watch-policy.toml"))
    with caplog.at_level(logging.WARNING, "webapp.watch.enforcement"):
        result = w.run(dry_run=True)
    assert [d.outcome for d in result.decisions] == ["waiting for the first notice"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "JOBREPORT_WATCH_POLICY is deprecated" in line and "\n" not in line


def test_the_policy_directory_wins_over_the_watchs_file_and_says_so(tmp_path, caplog):
    (tmp_path / "watch-policy.toml").write_text(POLICY)  # teaching after 10 min, anywhere
    settings = Settings(cluster="demo", policy_dir=str(site(tmp_path)),
                        watch_policy=str(tmp_path / "watch-policy.toml"))
    with caplog.at_level(logging.WARNING, "webapp.watch.enforcement"):
        enforcement = enforcement_in_force(settings)
    assert enforcement is not None and enforcement.source.startswith("JOBREPORT_POLICY_DIR=")
    job = running_job("731", user="bob", account="teaching", partition="debug")
    assert enforcement.enforced("gpu_idle", watch_scope(job)).grace_seconds == 600
    (line,) = [r.getMessage() for r in caplog.records]
    assert "JOBREPORT_WATCH_POLICY=" in line and "ignored" in line and "win" in line


def test_a_directory_that_never_loaded_cancels_nothing(tmp_path, smtp):
    _, port = smtp
    (tmp_path / "watch-policy.toml").write_text(POLICY)
    d = site(tmp_path, '[[cancel]]\nrule = "gpu_idel"\n')
    jobs = [running_job("741", user="bob", account="teaching")]
    w = watcher(tmp_path, port, jobs, Clock(), [], policy_dir=str(d),
                watch_policy=str(tmp_path / "watch-policy.toml"))
    result = w.run(dry_run=True)
    assert not result.enforcing and result.decisions == []
    assert [o for _, o in result.alerts] == ["would send"]  # the alerts still go
    assert "gpu_idel" in result.errors[0] and "enforcement off" in result.errors[0]


@pytest.mark.parametrize("state, ended_note", [("RUNNING", False), ("COMPLETED", True)])
def test_explain_says_which_enforcement_applies_and_why(tmp_path, monkeypatch, state,
                                                        ended_note):
    d = site(tmp_path)
    report = replace(report_for(LOCAL, "11"), cluster="demo", partition="gpu",
                     account="teaching", user="bob", state=state, qos="normal")
    monkeypatch.setattr(cli_policy, "build_for_caller", lambda *a, **k: report)
    args = build_parser().parse_args(["policy", "explain", "11"])
    out = io.StringIO()
    assert cli_policy.run_policy(args, Settings(cluster="demo", policy_dir=str(d)), out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("job 11 (cluster demo, partition gpu, account teaching, "
                               "qos normal, user bob); policy version ")
    (head,) = [line for line in lines if line.startswith("enforcement: ")]
    assert f"JOBREPORT_POLICY_DIR='{d}'" in head
    assert ("has ended" in head) is ended_note
    at = lines.index("watch rule gpu_idle: cancelled 10 min after its first notice, if the "
                     "rule still fires")
    assert lines[at + 1:at + 3] == [
        f"  cancel {d / 'watch.toml'}:2: gpu_idle in partition gpu: grace 60 min; "
        "excluded accounts bench",
        f"  cancel {d / 'watch.toml'}:9: gpu_idle in account teaching: grace 10 min"]
    (node,) = [line for line in lines if line.startswith("watch rule node_idle: ")]
    assert "never cancelled (no [[cancel]] applies)" in node


def test_explain_without_any_enforcement(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_policy, "build_for_caller", lambda *a, **k: report_for(LOCAL, "11"))
    out = io.StringIO()
    cli_policy.run_policy(build_parser().parse_args(["policy", "explain", "11"]),
                          Settings(cluster="demo"), out)
    assert "enforcement: none" in out.getvalue()
