"""slurm-exporter: cluster-wide Slurm metrics for Prometheus, one instance per cluster.

``slurm-exporter --once`` prints one exposition; otherwise /metrics is served on --listen.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence

from jobreport_common.bind import parse_bind
from jobreport_common.constants import ConstantsError, load_constants
from jobreport_common.settings import with_flags
from slurm_exporter.exposition import render, serve
from slurm_exporter.registry import SlurmCollector, build_sources
from slurm_exporter.settings import (
    DEFAULT_PORT,
    SOURCES,
    Settings,
    SettingsError,
    cluster_from_slurm_conf,
)

log = logging.getLogger("slurm_exporter")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="slurm-exporter",
        description="Export the state of a Slurm cluster (nodes, GPUs, queue, fair share, "
        "scheduler) as Prometheus metrics, running sinfo/squeue/sshare/sdiag at most once "
        "per poll limit. Defaults come from JOBREPORT_SLURM_EXPORTER_* variables.",
    )
    p.add_argument("--listen", metavar="ADDR:PORT",
                   help=f"serve /metrics here (default :{DEFAULT_PORT})")
    p.add_argument("--cluster", metavar="NAME",
                   help="value of the cluster label (default: ClusterName of slurm.conf)")
    p.add_argument("--poll-limit", metavar="SECONDS", help="seconds between two runs of a "
                   "command (default 10)")
    p.add_argument("--timeout", metavar="SECONDS", help="kill a command after this long "
                   "(default 10)")
    p.add_argument("--sources", metavar="LIST", help=f"commands to run (default "
                   f"{','.join(SOURCES)})")
    p.add_argument("--bin-dir", metavar="DIR", help="directory of the Slurm commands")
    p.add_argument("--constants", metavar="FILE", help="TOML file of allocation targets")
    p.add_argument("--once", action="store_true", help="print one scrape to stdout and exit")
    return p


def settings_from(args: argparse.Namespace, base: Settings) -> Settings:
    """The settings of the environment with the flags given in their place."""
    return with_flags(base, {name: getattr(args, name) for name in (
        "listen", "cluster", "poll_limit", "timeout", "sources", "bin_dir", "constants")})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args, Settings.from_env())
        host, port = parse_bind(settings.listen)
        cluster = settings.cluster or cluster_from_slurm_conf()
        constants = load_constants(settings.constants).get(cluster) if settings.constants \
            else None
    except (SettingsError, ConstantsError, ValueError) as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=settings.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    collector = SlurmCollector(cluster, build_sources(settings), constants)

    def scrape() -> bytes:
        return render(collector.collect())

    if args.once:
        sys.stdout.buffer.write(scrape())
        return 0
    serve(host, port, scrape)
    log.info("serving /metrics on %s:%d (cluster %s, poll limit %g s)", host, port, cluster,
             settings.poll_limit)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
