"""jobs-exporter: per-job Slurm usage metrics for Prometheus.

``jobs-exporter --once`` prints one exposition; otherwise /metrics is served on --listen.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import resource
import signal
import sys
import threading
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from jobreport_common.settings import with_flags
from jobs_exporter.exposition import TextWriter
from jobs_exporter.http_server import serve
from jobs_exporter.registry import JobsCollector
from jobs_exporter.settings import Settings, SettingsError, parse_listen

log = logging.getLogger("jobs_exporter")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jobs-exporter",
        description="Export per-job usage of Slurm jobs on this node as Prometheus metrics. "
        "Defaults come from JOBREPORT_EXPORTER_* environment variables.",
    )
    p.add_argument("--listen", metavar="ADDR:PORT", help="serve /metrics here (default :9306)")
    p.add_argument("--cgroup-root", metavar="DIR", help="cgroup mount point (/sys/fs/cgroup)")
    p.add_argument("--proc-root", metavar="DIR", help="procfs mount point (/proc)")
    p.add_argument(
        "--scratch",
        metavar="PATH",
        action="append",
        help="scratch directory for jobs_scratch_in_use (repeatable)",
    )
    p.add_argument("--node-name", metavar="NAME", help="Slurm NodeName (short hostname)")
    p.add_argument("--gpu-alloc-dir", metavar="DIR", help="prolog's per-job GPU files")
    p.add_argument("--no-gpus", action="store_true", help="do not use NVML or amdsmi")
    p.add_argument(
        "--nvml-replay",
        metavar="FILE",
        help="replay recorded NVML readings from FILE instead of the driver (demo/test stacks)",
    )
    p.add_argument(
        "--amdsmi-replay",
        metavar="FILE",
        help="replay recorded AMD GPU readings (amdsmi) from FILE instead of the driver "
        "(demo/test stacks)",
    )
    p.add_argument(
        "--gpu-order",
        choices=("file", "pci"),
        help="how Slurm numbers this node's GPUs: by device file (gres.conf File=) or in "
        "PCI bus id order (AutoDetect=nvml/rsmi); default file",
    )
    p.add_argument("--powercap-root", metavar="DIR", help="RAPL zones (/sys/class/powercap)")
    p.add_argument("--hwmon-root", metavar="DIR", help="hwmon chips (/sys/class/hwmon)")
    p.add_argument(
        "--powercap-replay",
        metavar="TRACE",
        help="replay the RAPL energy recorded in TRACE over a copy of the --powercap-root "
        "tree instead of reading the hardware's (demo/test stacks)",
    )
    p.add_argument(
        "--state-file",
        metavar="FILE",
        help="keep the sums the exporter adds up (energy, exited processes' I/O, waits) "
        "in FILE across a restart",
    )
    p.add_argument("--once", action="store_true", help="print one scrape to stdout and exit")
    return p


def settings_from(args: argparse.Namespace, base: Settings) -> Settings:
    """The settings of the environment with the flags given in their place."""
    return with_flags(base, {
        **{name: getattr(args, name) for name in (
            "listen", "cgroup_root", "proc_root", "node_name", "gpu_alloc_dir",
            "powercap_root", "hwmon_root", "gpu_order", "state_file")},
        "scratch": ":".join(args.scratch) if args.scratch else None,
        "gpus": "off" if args.no_gpus else None,
    })


def _raise_nofile_limit() -> None:
    # The fd cache keeps 3 files per job process open; use the hard limit we are allowed.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args, Settings.from_env())
        host, port = parse_listen(settings.listen)
    except (SettingsError, ValueError) as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=settings.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    _raise_nofile_limit()
    replays = []
    if args.powercap_replay:
        from jobs_exporter.powercap_replay import start_replay

        try:
            replay = start_replay(args.powercap_replay, settings.powercap_root)
        except (OSError, ValueError) as exc:
            parser.error(f"--powercap-replay: {exc}")
        settings = dataclasses.replace(settings, powercap_root=replay.root)
        replays.append(replay)
    registry = CollectorRegistry()
    nvml = None
    if args.nvml_replay:
        from jobs_exporter.nvml_replay import load_replay

        nvml = load_replay(args.nvml_replay)
    amdsmi = None
    if args.amdsmi_replay:
        from jobs_exporter.amdsmi_replay import load_replay as load_amdsmi_replay

        amdsmi = load_amdsmi_replay(args.amdsmi_replay)
    jobs = JobsCollector(settings, nvml=nvml, amdsmi=amdsmi, replays=replays)
    registry.register(jobs)
    if args.once:
        sys.stdout.buffer.write(TextWriter().write(registry))
        return 0
    # Stopped with TERM (systemd, dev-stack): the sums saved, then exit through atexit
    # (which removes a powercap replay's copy).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(registry, host, port)
    log.info("serving /metrics on %s:%d (node %s)", host, port, settings.effective_node_name)
    try:
        threading.Event().wait()
    finally:
        jobs.save_state()
    return 0


if __name__ == "__main__":
    sys.exit(main())
