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

from jobreport_net.bind import parse_bind

PREFIX = "JOBREPORT_EXPORTER_"

# name -> (default, one-line description): the one place defaults are written; the table
# in exporter/README.md is generated from it (scripts/settings-table).
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_EXPORTER_LISTEN": ("0.0.0.0:9306", "Address:port serving /metrics."),
    "JOBREPORT_EXPORTER_CGROUP_ROOT": (
        "/sys/fs/cgroup",
        "Where the cgroup hierarchies are mounted.",
    ),
    "JOBREPORT_EXPORTER_PROC_ROOT": ("/proc", "Where procfs is mounted."),
    "JOBREPORT_EXPORTER_NODE_NAME": (
        "",
        "Slurm NodeName (empty: the short hostname); picks `slurm_<NodeName>`.",
    ),
    "JOBREPORT_EXPORTER_SCRATCH": (
        "",
        "Colon-separated scratch directories for `jobs_scratch_in_use`.",
    ),
    "JOBREPORT_EXPORTER_GPUS": ("auto", "`auto` (use NVML when a driver is present) or `off`."),
    "JOBREPORT_EXPORTER_GPU_ALLOC_DIR": (
        "/run/jobs-exporter/gpus",
        "Directory where the Slurm prolog writes one file per job with its GPUs.",
    ),
    "JOBREPORT_EXPORTER_SCONTROL": ("scontrol", "Command asked once per job (`scontrol -d show job <id>`) for its GPUs when neither a prolog file nor the devices cgroup tells; empty: never run it."),
    "JOBREPORT_EXPORTER_FD_CACHE": ("1", "`1` keeps `/proc/<pid>/io` and `schedstat` and each process's `fd` and `task` directories open between scrapes (`stat` and `limits` are read once per process); `0` reopens them."),
    "JOBREPORT_EXPORTER_SCRAPE_BUDGET": ("5", "Seconds a scrape may spend reading `/proc`; past it the least recently read processes keep their previous sample and `jobs_scrape_stale_processes` counts them. `0`: no limit. Keep it under Prometheus' `scrape_timeout` (10 s in `deploy/prometheus-jobs-exporter.yml`)."),
    "JOBREPORT_EXPORTER_LOG_LEVEL": ("INFO", "Python logging level."),
}


class SettingsError(ValueError):
    """An environment variable holds a value we cannot use."""


def _default(name: str) -> str:
    """The documented default of ``JOBREPORT_EXPORTER_<NAME>``: defaults are written once."""
    return SETTINGS_DOC[PREFIX + name.upper()][0]


def _dirs(text: str) -> tuple[str, ...]:
    return tuple(p for p in text.split(":") if p)


@dataclass(frozen=True)
class Settings:
    listen: str = _default("listen")
    cgroup_root: str = _default("cgroup_root")
    proc_root: str = _default("proc_root")
    node_name: str = _default("node_name")
    scratch: tuple[str, ...] = _dirs(_default("scratch"))
    gpus: str = _default("gpus")
    gpu_alloc_dir: str = _default("gpu_alloc_dir")
    scontrol: str = _default("scontrol")
    fd_cache: bool = _default("fd_cache") == "1"
    scrape_budget: float = float(_default("scrape_budget"))
    log_level: str = _default("log_level")

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
            scratch=_dirs(get("JOBREPORT_EXPORTER_SCRATCH")),
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
    """``ADDR:PORT`` of --listen (``:9306`` means all addresses; IPv6 as ``[::]:9306``)."""
    return parse_bind(value, "0.0.0.0")
