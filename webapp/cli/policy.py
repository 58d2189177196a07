"""`jobreport policy check DIR`, `jobreport policy explain JOBID` and `jobreport policy
diff NEW_DIR` (cli/policy_diff.py): the site's policy (JOBREPORT_POLICY_DIR,
docs/policy.md) checked, what of it applied to one job (its verdicts, and whether and why
`jobreport watch` may cancel it), and what a new one would change."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import TextIO

from webapp.cli.arguments import add_cluster_argument, settings_for
from webapp.cli.login import build_for_caller
from webapp.cli.policy_diff import add_diff_arguments, run_diff
from webapp.detectors import NAMES, judge
from webapp.detectors.policy import PolicyError, figures, job_scope, load
from webapp.detectors.policy_cancel import WATCH_RULES
from webapp.detectors.policy_in_force import in_force
from webapp.model import JobId
from webapp.renderers import site_wording
from webapp.settings import Settings
from webapp.states import ended
from webapp.watch.enforcement import enforcement_in_force


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="check a policy directory, its rules and its "
                           "wording templates; each error with its file and line")
    check.add_argument("directory", nargs="?", metavar="DIR",
                       help="the directory (default: JOBREPORT_POLICY_DIR)")
    check.add_argument("--partitions", metavar="P1,P2",
                       help="the cluster's partitions (default: asked of scontrol; a "
                       "scope naming another is an error)")
    explain = sub.add_parser("explain", help="which overrides, site rules and "
                             "enforcement apply to one job, and why")
    explain.add_argument("job_id", metavar="JOBID")
    add_cluster_argument(explain, "the cluster the job ran on")
    add_diff_arguments(sub.add_parser(
        "diff", help="judge the archive's reports under a new policy directory beside the "
        "one in force; list the jobs whose findings would change (writes nothing)"))


def _partitions(args: argparse.Namespace, settings: Settings) -> frozenset[str] | None:
    if args.partitions is not None:
        return frozenset(p for p in args.partitions.split(",") if p)
    try:
        text = subprocess.run([settings.scontrol, "show", "partition", "-o"],  # noqa: S603
                              capture_output=True, text=True, check=True,
                              timeout=settings.sacct_timeout).stdout
    except (OSError, subprocess.SubprocessError):  # no scontrol here: not checked
        return None
    return frozenset(re.findall(r"^PartitionName=(\S+)", text, re.M)) or None


def run_policy(args: argparse.Namespace, settings: Settings, out: TextIO = sys.stdout,
               err: TextIO = sys.stderr) -> int:
    if args.policy_command == "diff":
        return run_diff(args, settings, lambda aimed: _partitions(args, aimed), out, err)
    if args.policy_command == "check":
        directory = args.directory or settings.policy_dir
        if not directory:
            err.write("jobreport: no policy directory (give DIR or set JOBREPORT_POLICY_DIR)\n")
            return 2
        # The rules and the site's wording templates (wording/) are checked alike: every
        # problem of both listed, each as file:line.
        templates, problems = site_wording.check(directory)
        try:
            policy = load(directory, NAMES, _partitions(args, settings))
        except PolicyError as exc:
            problems = exc.problems + problems
            policy = None
        for problem in problems:
            err.write(problem + "\n")
        if policy is None:
            if directory == settings.policy_dir:
                err.write("jobreport: the running web app and sync keep judging by the last "
                          "version that loaded until this one loads\n")
            return 1
        if problems:
            err.write("jobreport: a site wording template that fails when a message is "
                      "built gives way to the default\n")
            return 1
        out.write(f"{directory}: {len(policy.overrides)} overrides, {len(policy.rules)} "
                  f"site rules, {len(policy.cancels)} cancel tables, {templates} wording "
                  "templates, policy version "
                  f"{policy.version}\n")
        return 0
    aimed = settings_for(settings, args.cluster)
    if aimed is None:
        return 2
    policy = in_force(aimed.policy_dir).policy()
    report = build_for_caller(aimed, JobId.parse(args.job_id), sizing=False)
    _, resolved = judge(report, aimed.thresholds, policy)
    scope = ", ".join(f"{k} {v or '-'}" for k, v in job_scope(report).items())
    out.write(f"job {report.job_id} ({scope}); policy version "
              f"{policy.version or 'none (JOBREPORT_POLICY_DIR is empty)'}\n")
    for line in resolved.applied:
        out.write(f"override {line}\n")
    if not resolved.applied:
        out.write("no override applies to this job\n")
    values = figures(report)
    found = {f.name for f in report.findings}
    for rule in resolved.rules:
        named = sorted({n for n in values if n in rule.condition})
        shown = ", ".join(f"{n} = {values[n]!r}" for n in named)
        out.write(f"site rule {rule.name} ({rule.where}): {rule.condition} [{shown}]: "
                  f"{'fires' if rule.name in found else 'does not fire'}\n")
    _explain_enforcement(aimed, job_scope(report), ended(report.state), out)
    return 0


def _explain_enforcement(settings: Settings, scope: dict[str, str | None], has_ended: bool,
                         out: TextIO) -> None:
    """Per watch rule: whether `jobreport watch` cancels this job while it runs, after
    what grace, and by which tables; the same choice of policy as a watch run's."""
    enforcement = enforcement_in_force(settings)
    if enforcement is None:
        out.write("enforcement: none (no [[cancel]] table in JOBREPORT_POLICY_DIR, no "
                  "JOBREPORT_WATCH_POLICY): jobreport watch cancels no job\n")
        return
    # An ended job is shown under the enforcement in force now, as if it still ran.
    out.write(f"enforcement: {enforcement.source}"
              f"{' (the job has ended: as it would apply now)' if has_ended else ''}\n")
    for rule in WATCH_RULES:
        said = enforcement.enforced(rule, scope)
        verdict = ("never cancelled" if said.grace_seconds is None else
                   f"cancelled {said.grace_seconds / 60:g} min after its first notice, if "
                   "the rule still fires")
        out.write(f"watch rule {rule}: {verdict}"
                  f"{'' if said.applied else ' (no [[cancel]] applies)'}\n")
        for line in said.applied:
            out.write(f"  cancel {line}\n")
