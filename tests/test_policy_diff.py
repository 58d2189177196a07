"""`jobreport policy diff`: a new policy tried on a real SQLite archive of sample reports,
beside the policy in force; nothing written."""

from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace

from tests.helpers.reports import busy_cpu_report, many_findings_report
from tests.test_detectors import LOCAL, report_for
from webapp.archive.store import Archive
from webapp.cli import build_parser
from webapp.cli.policy import run_policy
from webapp.detectors import judge
from webapp.report.archived import archive_record
from webapp.settings import Settings

OFF_IN_DEBUG = '[[override]]\npartition = "debug"\nrule = "short_job"\nenabled = false\n'
NEW = OFF_IN_DEBUG + (
    '[[override]]\nrule = "gpu_idle"\nseverity = "warning"\n\n'
    '[[rule]]\nname = "long_gpu"\ncondition = "gpus > 0 and elapsed_seconds >= 3600"\n'
    'severity = "info"\nmessage = "{{ gpus }} GPUs for an hour or more."\n')


def short(job_id: str, user: str, partition: str):
    return replace(report_for(LOCAL, "11"), cluster="demo", job_id=job_id, user=user,
                   partition=partition)


def archive_of(tmp_path) -> str:
    """Four jobs of the last days (alice's and bob's short jobs in debug and gpu, carol's
    busy CPU job, dave's job with an idle GPU) and erin's short debug job of 40 days ago."""
    now = int(time.time())
    reports = [short("101", "alice", "debug"), short("102", "bob", "gpu"),
               replace(busy_cpu_report(), job_id="103", user="carol"),
               replace(many_findings_report(), job_id="104", user="dave")]
    url = str(tmp_path / "archive.sqlite")
    with Archive(url) as archive:
        for i, report in enumerate(reports):
            judged = replace(report, findings=judge(report)[0])  # as the sync archived it
            assert archive.put(archive_record(judged, 1000 + i, now - 86400 * (i + 1)))
        archive.put(archive_record(short("105", "erin", "debug"), 999, now - 40 * 86400))
    return url


def run(tmp_path, *argv: str, in_force: str = "") -> tuple[int, str, str]:
    settings = Settings(cluster="demo", archive_url=archive_of(tmp_path), policy_dir=in_force)
    args = build_parser().parse_args(["policy", "diff", "--partitions", "debug,gpu,cpu",
                                      *argv])
    out, err = io.StringIO(), io.StringIO()
    return run_policy(args, settings, out, err), out.getvalue(), err.getvalue()


def new_dir(tmp_path, text: str = NEW):
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "site.toml").write_text(text)
    return str(tmp_path / "new")


def test_diff_lists_the_jobs_that_would_change_and_counts_them(tmp_path):
    code, out, err = run(tmp_path, "--since", "30d", "--format", "json", new_dir(tmp_path))
    assert code == 0, err
    diff = json.loads(out)
    assert (diff["jobs"], diff["changed"], diff["policy_in_force"]) == (4, 2, "none")
    changes = {j["job_id"]: (j["user"], j["findings"]) for j in diff["changes"]}
    assert changes == {
        "101": ("alice", [{"finding": "short_job", "change": "removed", "before": "info",
                           "after": None}]),
        "104": ("dave", [{"finding": "gpu_idle", "change": "severity", "before": "critical",
                          "after": "warning"},
                         {"finding": "long_gpu", "change": "added", "before": None,
                          "after": "info"}]),
    }
    assert diff["by_rule"] == {
        "gpu_idle": {"added": 0, "removed": 0, "severity": 1},
        "long_gpu": {"added": 1, "removed": 0, "severity": 0},
        "short_job": {"added": 0, "removed": 1, "severity": 0}}
    assert diff["by_user"] == {
        "alice": {"jobs": 1, "added": 0, "removed": 1, "severity": 0},
        "dave": {"jobs": 1, "added": 1, "removed": 0, "severity": 1}}


def test_diff_against_the_policy_in_force_and_writes_nothing(tmp_path):
    (tmp_path / "in-force").mkdir()
    (tmp_path / "in-force" / "debug.toml").write_text(OFF_IN_DEBUG)
    code, out, _ = run(tmp_path, new_dir(tmp_path), in_force=str(tmp_path / "in-force"))
    assert code == 0
    # alice's short job is off in debug under both: only dave's job changes
    assert out.splitlines()[0] == "job 104 (dave): gpu_idle critical -> warning; +long_gpu (info)"
    assert "dave" in out and "alice" not in out
    last = out.rstrip().splitlines()[-1]
    assert re.fullmatch(r"4 archived reports judged under policy \w{12} \(in force\) and "
                        rf"\w{{12}} \({re.escape(str(tmp_path / 'new'))}\): 1 would change "
                        r"\(nothing written\)", last), last
    with Archive(str(tmp_path / "archive.sqlite")) as archive:
        stored = {j.job_id: j.summary for j in archive.jobs("demo")}
    # every summary as archived: judged under no policy, no policy version written
    assert {s["coverage"].get("policy_version") for s in stored.values()} == {None}
    assert {f["name"] for f in stored["101"]["findings"]} == {"short_job"}


def test_a_new_directory_that_fails_the_check_exits_2_with_file_and_line(tmp_path):
    broken = new_dir(tmp_path, OFF_IN_DEBUG + '\n[[override]]\nrule = "short_jobs"\n'
                     'enabled = false\n')
    code, out, err = run(tmp_path, broken)
    assert code == 2 and not out
    assert f"{tmp_path / 'new' / 'site.toml'}:7: no detector 'short_jobs'" in err
    assert "does not pass `jobreport policy check`" in err
