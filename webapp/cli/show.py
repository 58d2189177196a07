"""`jobreport show JOBID`: one job's report in text, JSON, HTML or PDF."""

from __future__ import annotations

import argparse
import sys

from webapp.cli.arguments import add_cluster_argument, settings_for
from webapp.cli.login import build_for_caller
from webapp.model import JobId, JobReport
from webapp.settings import Settings
from webapp.sources.prometheus import RESOLUTIONS

FORMATS = ("text", "json", "html", "pdf")


def add_show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", metavar="JOBID")
    add_cluster_argument(parser, "the cluster the job ran on")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--pretty", action="store_true", help="indent JSON (compact by default)")
    parser.add_argument("--details", action="store_true",
                        help="text: also the plots, steps, queue, waste and coverage")
    parser.add_argument("--audit", action="store_true",
                        help="text: also what the verdicts rest on (thresholds the site "
                        "overrode, verdicts withheld); JSON always has all of it")
    parser.add_argument(
        "--resolution",
        choices=tuple(RESOLUTIONS),
        default="plot",
        help="series resolution: plot (about one point per pixel of a plot, the default) or "
        "full (up to 1,000 points per series)",
    )


def _render(report: JobReport, fmt: str, pretty: bool = False, details: bool = False,
            audit: bool = False, cluster_named: bool = False,
            footer: str = "") -> str | bytes:
    if fmt == "json":
        from webapp.renderers import json as json_renderer

        return json_renderer.render(report, pretty=pretty)
    if fmt == "html":
        from webapp.renderers import html

        return html.render(report, footer=footer)
    if fmt == "pdf":
        from webapp.renderers import pdf

        return pdf.render(report, footer=footer)
    from webapp.renderers import text

    return text.render(report, details=details, audit=audit, cluster_named=cluster_named,
                       footer=footer)


def run_show(args: argparse.Namespace, settings: Settings) -> int:
    job_id = JobId.parse(args.job_id)
    aimed = settings_for(settings, args.cluster)
    if aimed is None:
        return 2
    settings = aimed
    report = build_for_caller(settings, job_id, resolution=args.resolution)
    from webapp.renderers import site_wording

    out = _render(report, args.format, pretty=args.pretty, details=args.details,
                  audit=args.audit, cluster_named=bool(args.cluster),
                  footer=site_wording.report_footer(settings.policy_dir, report))
    if args.output:
        mode = "wb" if isinstance(out, bytes) else "w"
        with open(args.output, mode) as fh:
            fh.write(out)
    elif isinstance(out, bytes):
        sys.stdout.buffer.write(out)
    else:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0
