"""Settings of jobs-exporter, read once from ``JOBREPORT_EXPORTER_*`` environment variables.

Command-line flags override them (see ``__main__``). Every variable is listed in
``SETTINGS_DOC`` and in exporter/README.md; a test checks that the two agree. A
``JOBREPORT_EXPORTER_*`` variable not in ``SETTINGS_DOC`` (a typo) is an error.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "JOBREPORT_EXPORTER_"

# name -> (default, one-line description); exporter/README.md mirrors this table.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_EXPORTER_LISTEN": ("0.0.0.0:9306", "Address:port serving /metrics."),
    "JOBREPORT_EXPORTER_CGROUP_ROOT": (
        "/sys/fs/cgroup",
        "Where the cgroup hierarchies are mounted.",
    ),
    "JOBREPORT_EXPORTER_PROC_ROOT": ("/proc", "Where procfs is mounted."),
    "JOBREPORT_EXPORTER_NODE_NAME": (
        "",
        "Slurm NodeName (empty: short hostname); picks slurm_<NodeName>.",
    ),
    "JOBREPORT_EXPORTER_SCRATCH": (
        "",
        "Colon-separated scratch directories for jobs_scratch_in_use.",
    ),
    "JOBREPORT_EXPORTER_GPUS": ("auto", "`auto` (use NVML when a driver is present) or `off`."),
    "JOBREPORT_EXPORTER_GPU_ALLOC_DIR": (
        "/run/jobs-exporter/gpus",
        "Directory where the Slurm prolog writes one file per job with SLURM_JOB_GPUS.",
    ),
    "JOBREPORT_EXPORTER_SCONTROL": (
        "scontrol",
        "scontrol command asked once per job for its GPUs when no prolog file or devices "
        "cgroup tells; empty: never run it.",
    ),
    "JOBREPORT_EXPORTER_FD_CACHE": (
        "1",
        "1 keeps /proc/<pid>/{stat,io} open between scrapes (limits read once per process).",
    ),
    "JOBREPORT_EXPORTER_SCRAPE_BUDGET": (
        "5",
        "Seconds a scrape may spend reading /proc; past it the least recently read "
        "processes keep their previous sample (jobs_scrape_stale_processes). 0: no limit.",
    ),
    "JOBREPORT_EXPORTER_LOG_LEVEL": ("INFO", "Python logging level."),
}


class SettingsError(ValueError):
    """An environment variable holds a value we cannot use."""


@dataclass(frozen=True)
class Settings:
    listen: str = "0.0.0.0:9306"
    cgroup_root: str = "/sys/fs/cgroup"
    proc_root: str = "/proc"
    node_name: str = ""
    scratch: tuple[str, ...] = ()
    gpus: str = "auto"
    gpu_alloc_dir: str = "/run/jobs-exporter/gpus"
    scontrol: str = "scontrol"
    fd_cache: bool = True
    scrape_budget: float = 5.0
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        # A typo must not silently fall back to a default.
        unknown = sorted(k for k in env if k.startswith(PREFIX) and k not in SETTINGS_DOC)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")

        def get(name: str) -> str:
            return env.get(name, SETTINGS_DOC[name][0])

        gpus = get("JOBREPORT_EXPORTER_GPUS")
        if gpus not in ("auto", "off"):
            raise SettingsError(f"JOBREPORT_EXPORTER_GPUS={gpus!r} is not auto or off")
        fd_cache = get("JOBREPORT_EXPORTER_FD_CACHE")
        if fd_cache not in ("0", "1"):
            raise SettingsError(f"JOBREPORT_EXPORTER_FD_CACHE={fd_cache!r} is not 0 or 1")
        budget_text = get("JOBREPORT_EXPORTER_SCRAPE_BUDGET")
        try:
            scrape_budget = float(budget_text)
        except ValueError:
            scrape_budget = -1.0
        if not 0 <= scrape_budget < 3600:
            raise SettingsError(
                f"JOBREPORT_EXPORTER_SCRAPE_BUDGET={budget_text!r} is not seconds (0: no limit)"
            )
        listen = get("JOBREPORT_EXPORTER_LISTEN")
        try:
            parse_listen(listen)
        except ValueError as exc:
            raise SettingsError(f"JOBREPORT_EXPORTER_LISTEN: {exc}") from None
        return cls(
            listen=listen,
            cgroup_root=get("JOBREPORT_EXPORTER_CGROUP_ROOT"),
            proc_root=get("JOBREPORT_EXPORTER_PROC_ROOT"),
            node_name=get("JOBREPORT_EXPORTER_NODE_NAME"),
            scratch=tuple(p for p in get("JOBREPORT_EXPORTER_SCRATCH").split(":") if p),
            gpus=gpus,
            gpu_alloc_dir=get("JOBREPORT_EXPORTER_GPU_ALLOC_DIR"),
            scontrol=get("JOBREPORT_EXPORTER_SCONTROL"),
            fd_cache=fd_cache == "1",
            scrape_budget=scrape_budget,
            log_level=get("JOBREPORT_EXPORTER_LOG_LEVEL"),
        )

    @property
    def effective_node_name(self) -> str:
        # Slurm's default NodeName is the short hostname (what `slurmd -N` defaults to).
        return self.node_name or socket.gethostname().split(".", 1)[0]


def parse_listen(value: str) -> tuple[str, int]:
    """Split ``ADDR:PORT`` (``:9306`` means all addresses; IPv6 as ``[::]:9306``)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not ADDR:PORT")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)
