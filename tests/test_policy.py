"""The site's policy (webapp/detectors/policy.py): reading, checking, resolving, judging."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.test_detectors import LOCAL, report_for
from webapp.detectors import NAMES, judge
from webapp.detectors.policy import PolicyError, load
from webapp.detectors.rules_version import policy_version
from webapp.model import Severity
from webapp.thresholds import Thresholds


def policy(tmp_path, text, partitions=None):
    (tmp_path / "site.toml").write_text(text)
    return load(tmp_path, NAMES, partitions)


def short(partition="debug", user="alice", account="phys"):
    return replace(report_for(LOCAL, "11"), partition=partition, user=user, account=account)


def test_no_directory_is_no_policy():
    p = load("", NAMES)
    assert p.version is None and not p.overrides


def test_bad_expression_names_file_and_line(tmp_path):
    with pytest.raises(PolicyError) as err:
        policy(tmp_path, '[[rule]]\nname = "low"\n\ncondition = "cpu_efficiency <<< 0.5"\n'
                         'message = "m"\n')
    assert err.value.problems[0].startswith(f"{tmp_path / 'site.toml'}:4: bad expression")


@pytest.mark.parametrize("text, wanted", [
    ('[[rule]]\nname = "x"\ncondition = "cpu_efficiency < 0.5 and nope > 1"\nmessage = "m"\n',
     ":3: unknown figure nope"),
    ('[[rule]]\nname = "x"\ncondition = "usage.nope > 1"\nmessage = "m"\n',
     ":3: unknown figure usage.nope"),
    ('[[override]]\nrule = "short_jobs"\nenabled = false\n', ":2: no detector 'short_jobs'"),
    ('[[override]]\npartition = "nowhere"\nrule = "short_job"\nenabled = false\n',
     "no partition 'nowhere'"),
    ('[[override]]\nthresholds = { nonsense = 1 }\n', "no threshold 'nonsense'"),
    ('[[override]]\nrule = "short_job"\nseverity = "fatal"\n', "severity 'fatal'"),
    ('[override\n', ":1: "),
])
def test_check_errors(tmp_path, text, wanted):
    with pytest.raises(PolicyError) as err:
        policy(tmp_path, text, partitions=frozenset({"debug", "gpu"}))
    assert wanted in str(err.value)


OFF_IN_DEBUG = '[[override]]\npartition = "debug"\nrule = "short_job"\nenabled = false\n'


def test_rule_off_in_one_partition(tmp_path):
    p = policy(tmp_path, OFF_IN_DEBUG)
    found, resolved = judge(short("debug"), Thresholds(), p)
    assert "short_job" not in {f.name for f in found}
    assert "short_job in partition debug: off" in resolved.applied[0]
    found, resolved = judge(short("gpu"), Thresholds(), p)
    assert "short_job" in {f.name for f in found} and not resolved.applied


def test_a_qos_scope_matches_the_jobs_qos(tmp_path):
    p = policy(tmp_path, '[[override]]\nqos = "long"\nrule = "short_job"\nenabled = false\n'
                         '[[override]]\naccount = "phys"\nrule = "short_job"\n'
                         'severity = "critical"\n')
    found, resolved = judge(replace(short(), qos="long"), Thresholds(), p)
    assert "short_job" not in {f.name for f in found}
    assert "short_job in qos long: off" in resolved.applied[-1]  # qos beats account
    for other in ("normal", None):  # another QoS; none known (an older view or archive)
        found, resolved = judge(replace(short(), qos=other), Thresholds(), p)
        assert [f.severity for f in found if f.name == "short_job"] == [Severity.CRITICAL]
        assert not any("qos long" in a for a in resolved.applied)


def test_most_specific_wins_and_exemptions(tmp_path):
    p = policy(tmp_path, OFF_IN_DEBUG + (
        '[[override]]\nuser = "alice"\nrule = "short_job"\nenabled = true\nseverity = "critical"\n'
        '[[override]]\ncluster = "test"\nthresholds = { short_job_seconds = 1 }\n'
        '[[override]]\nrule = "short_job"\nexcluded_accounts = ["bench"]\n'))
    found, resolved = judge(short("debug", user="alice"), Thresholds(), p)
    assert resolved.thresholds.short_job_seconds == 1.0  # 2 s: no longer short
    assert "short_job_seconds" in resolved.thresholds.overridden
    found, _ = judge(replace(short("debug", user="alice"), cluster="other"), Thresholds(), p)
    assert [f.severity for f in found if f.name == "short_job"] == [Severity.CRITICAL]
    found, _ = judge(short("gpu", account="bench"), Thresholds(), p)
    assert "short_job" not in {f.name for f in found}


def test_site_rule_fires_with_its_template(tmp_path):
    p = policy(tmp_path, '[[rule]]\nname = "tiny_job"\npartition = "debug"\n'
                         'condition = "elapsed_seconds < 60 and state == \'COMPLETED\'"\n'
                         'severity = "info"\nmessage = "Ran {{ elapsed_seconds }} s."\n'
                         'advice = "Use a loop."\n')
    found, _ = judge(short("debug"), Thresholds(), p)
    rule = next(f for f in found if f.name == "tiny_job")
    assert rule.message == "Ran 2.0 s." and rule.severity is Severity.INFO
    assert "tiny_job" not in {f.name for f in judge(short("gpu"), Thresholds(), p)[0]}


def test_version_changes_with_the_files(tmp_path):
    a = policy(tmp_path, OFF_IN_DEBUG).version
    b = policy(tmp_path, OFF_IN_DEBUG.replace("debug", "gpu")).version
    assert a and b and a != b


def test_every_example_of_the_docs_checks(tmp_path):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "policy.md").read_text()
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    for i, block in enumerate(blocks):
        (tmp_path / f"{i}.toml").write_text(block)
    assert load(tmp_path, NAMES).version


def test_rejudge_rewrites_the_archive_under_the_policy(tmp_path):
    from webapp.archive.store import Archive
    from webapp.report.archived import archive_record
    from webapp.report.rejudge import rejudge
    from webapp.sources.gpu_metrics import JOBS

    report = short("debug")
    report = replace(report, findings=judge(report)[0])
    assert "short_job" in {f.name for f in report.findings}
    p = policy(tmp_path, OFF_IN_DEBUG)
    from webapp.archive.digest_rows import DigestRows

    def digest_findings(archive: Archive) -> tuple[str, ...]:
        [digest] = DigestRows(archive.db).digests(report.cluster, [report.user], 0, 2**40)
        return tuple(name for job in digest.jobs for name in job.findings)

    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        archive.put(archive_record(report))
        assert "short_job" in digest_findings(archive)
        done = rejudge(archive, report.cluster, 0, 2**40, Thresholds(), p, 0.5, JOBS)
        assert (done.jobs, done.job_ids) == (1, (report.job_id,))
        summary = archive.get(report.cluster, report.job_id).summary
        # the weekly digest (and the account report's costliest findings, read from the
        # same rows) follow: the job's digest line is rewritten with its report
        assert "short_job" not in digest_findings(archive)
    assert "short_job" not in {f["name"] for f in summary["findings"]}
    # the directory's version with the coverage floor in force (0.5, not the default)
    assert summary["coverage"]["policy_version"] == policy_version(
        p.version, [("min_coverage", "0.5")]) != p.version
