"""`jobreport policy diff [--since 30d] NEW_DIR`: a new policy tried on the archive's
reports beside the one in force; the jobs whose findings would change, then counts per
rule and per user (text, or ``--format json``). Writes nothing."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from webapp.archive.store import Archive
from webapp.cli.arguments import add_cluster_argument, lookback_seconds, settings_for
from webapp.detectors import NAMES
from webapp.detectors.policy import PolicyError, load
from webapp.detectors.policy_in_force import in_force
from webapp.report.policy_diff import KINDS, Change, PolicyDiff, policy_diff
from webapp.settings import Settings
from webapp.sources.gpu_metrics import gpu_metrics


def add_diff_arguments(diff: argparse.ArgumentParser) -> None:
    diff.add_argument("directory", metavar="NEW_DIR",
                      help="the new policy directory (checked as `policy check` does)")
    diff.add_argument("--since", type=lookback_seconds, default=30 * 86400.0, metavar="AGE",
                      help="the jobs that ended in this window, e.g. 30d (the default), 2w")
    diff.add_argument("--partitions", metavar="P1,P2",
                      help="the cluster's partitions (default: asked of scontrol)")
    diff.add_argument("--format", choices=("text", "json"), default="text",
                      help="output format (default text)")
    add_cluster_argument(diff, "the cluster whose archived jobs are judged")


def _change(c: Change) -> str:
    if c.kind == "added":
        return f"+{c.finding} ({c.after.value if c.after else '-'})"
    if c.kind == "removed":
        return f"-{c.finding} ({c.before.value if c.before else '-'})"
    return (f"{c.finding} {c.before.value if c.before else '-'} -> "
            f"{c.after.value if c.after else '-'}")


def _counts(title: str, rows: dict[str, Any], columns: tuple[str, ...]) -> list[str]:
    width = max([len(title), *(len(k) for k in rows)])
    lines = [f"{title:<{width}}  " + "  ".join(f"{c:>8}" for c in columns)]
    lines += [f"{k:<{width}}  " + "  ".join(f"{rows[k][c]:>8}" for c in columns)
              for k in sorted(rows)]
    return lines


def diff_text(diff: PolicyDiff, before: str, after: str) -> str:
    lines = [f"job {j.job_id} ({j.user or '-'}): " + "; ".join(_change(c) for c in j.changes)
             for j in diff.changed]
    if diff.changed:
        lines += ["", *_counts("finding", diff.by_rule, KINDS), "",
                  *_counts("user", diff.by_user, ("jobs", *KINDS)), ""]
    lines.append(f"{diff.jobs} archived reports judged under policy {before} (in force) and "
                 f"{after}: {len(diff.changed)} would change (nothing written)")
    return "\n".join(lines) + "\n"


def diff_json(diff: PolicyDiff, before: str, after: str, since: int, until: int
              ) -> dict[str, Any]:
    def sev(s: object) -> str | None:
        return getattr(s, "value", None)

    return {
        "since": since, "until": until, "policy_in_force": before, "policy_new": after,
        "jobs": diff.jobs, "changed": len(diff.changed),
        "changes": [{"job_id": j.job_id, "user": j.user,
                     "findings": [{"finding": c.finding, "change": c.kind,
                                   "before": sev(c.before), "after": sev(c.after)}
                                  for c in j.changes]} for j in diff.changed],
        "by_rule": {k: {c: v[c] for c in KINDS} for k, v in sorted(diff.by_rule.items())},
        "by_user": {k: {c: v[c] for c in ("jobs", *KINDS)}
                    for k, v in sorted(diff.by_user.items())},
    }


def run_diff(args: argparse.Namespace, settings: Settings,
             partitions: Callable[[Settings], frozenset[str] | None],
             out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """``partitions``: the aimed cluster's, for the check of NEW_DIR (None: unknown)."""
    aimed = settings_for(settings, args.cluster)
    if aimed is None:
        return 2
    if not aimed.archive_url:
        err.write("jobreport: no archive (JOBREPORT_ARCHIVE_URL)\n")
        return 2
    try:
        new = load(args.directory, NAMES, partitions(aimed))
    except PolicyError as exc:
        err.writelines(p + "\n" for p in exc.problems)
        err.write(f"jobreport: {args.directory} does not pass `jobreport policy check`\n")
        return 2
    try:
        current = in_force(aimed.policy_dir).policy()
    except PolicyError as exc:
        err.writelines(p + "\n" for p in exc.problems)
        err.write(f"jobreport: the policy in force ({aimed.policy_dir}) does not load\n")
        return 2
    until = int(time.time())
    since = until - int(args.since)
    with Archive(aimed.archive_url) as archive:
        diff = policy_diff(archive, aimed.cluster, since, until, aimed.thresholds, current,
                           new, aimed.min_coverage, gpu_metrics(aimed.gpu_metrics),
                           progress="diff")
    before, after = current.version or "none", new.version or "none"
    if args.format == "json":
        out.write(json.dumps(diff_json(diff, before, after, since, until), indent=2) + "\n")
    else:
        out.write(diff_text(diff, before, f"{after} ({args.directory})"))
    return 0
