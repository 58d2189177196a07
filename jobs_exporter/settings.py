"""Settings of jobs-exporter, read once from ``JOBREPORT_EXPORTER_*`` environment variables.

Command-line flags override them (see ``__main__``). Each variable is declared once, as a
field below; ``SETTINGS_DOC`` and the table in jobs_exporter/README.md are generated from the
fields (scripts/settings-table). A ``JOBREPORT_EXPORTER_*`` variable that is no field (a
typo) is an error.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from jobreport_common.bind import parse_bind
from jobreport_common.settings import (
    SettingsError,
    boolean,
    checked,
    choice,
    documented,
    load,
    ranged,
    setting,
)

__all__ = ["PREFIX", "SETTINGS_DOC", "Settings", "SettingsError", "parse_listen"]

PREFIX = "JOBREPORT_EXPORTER_"


def parse_listen(value: str) -> tuple[str, int]:
    """``ADDR:PORT`` of --listen (``:9306`` means all addresses; IPv6 as ``[::]:9306``)."""
    return parse_bind(value, "0.0.0.0")


_listen = checked(parse_listen)


def _dirs(var: str, raw: str) -> tuple[str, ...]:
    return tuple(p for p in raw.split(":") if p)


# Budget 0 is "no limit"; an hour or more is no budget a scrape could keep to.
_budget = ranged(at_least=0, below=3600)
_bmc_interval = ranged(at_least=1, at_most=3600)


@dataclass(frozen=True)
class Settings:
    listen: str = setting("0.0.0.0:9306", "Address:port serving /metrics.", _listen)
    cgroup_root: str = setting("/sys/fs/cgroup", "Where the cgroup hierarchies are mounted.")
    proc_root: str = setting("/proc", "Where procfs is mounted.")
    node_name: str = setting(
        "", "Slurm NodeName (empty: the short hostname); picks `slurm_<NodeName>`.")
    scratch: tuple[str, ...] = setting(
        "", "Colon-separated scratch directories for `jobs_scratch_in_use`.", _dirs)
    gpus: str = setting("auto", "`auto` (NVIDIA GPUs through NVML, AMD GPUs through amdsmi, each when its driver is present) or `off`.",
                        choice("auto", "off"))
    gpu_order: str = setting("file", "How Slurm numbers this node's GPUs (scontrol's `IDX`, the prolog's `SLURM_JOB_GPUS`): `file` (gres.conf `File=` lines: in device-file order, `/dev/nvidia0` first) or `pci` (gres.conf `AutoDetect=nvml`/`rsmi`: in PCI bus id order). GPUs allowed by the devices cgroup are matched by device file and need neither.", choice("file", "pci"))
    gpu_alloc_dir: str = setting(
        "/run/jobs-exporter/gpus",
        "Directory where the Slurm prolog writes one file per job with its GPUs.")
    scontrol: str = setting("scontrol", "Command asked once per job (`scontrol -d show job <id>`) for its GPUs when neither a prolog file nor the devices cgroup tells; empty: never run it.")
    fd_cache: bool = setting("1", "`1` keeps `/proc/<pid>/io` and `schedstat` and each process's `fd` and `task` directories open between scrapes (`stat` and `limits` are read once per process); `0` reopens them.", boolean)
    scrape_budget: float = setting("5", "Seconds a scrape may spend reading `/proc`; past it the least recently read processes keep their previous sample and `jobs_scrape_stale_processes` counts them. `0`: no limit. Keep it under Prometheus' `scrape_timeout` (10 s in `deploy/prometheus-jobs-exporter.yml`).", _budget)
    log_level: str = setting("INFO", "Python logging level.")
    energy: str = setting("auto", "`auto` (node energy and its split among jobs from every source found: RAPL, hwmon, the BMC, GPUs) or `off`.", choice("auto", "off"))
    powercap_root: str = setting("/sys/class/powercap", "Where the powercap (RAPL) zones are; a replayed tree for tests and demos.")
    hwmon_root: str = setting("/sys/class/hwmon", "Where the hwmon chips are; the ACPI `power_meter` chip is the node meter.")
    bmc: str = setting("off", "Node meter from the BMC: `ipmitool` (`ipmitool dcmi power reading`), `ipmi-dcmi` (FreeIPMI), `redfish` (needs JOBREPORT_EXPORTER_REDFISH_URL) or `off`.", choice("off", "ipmitool", "ipmi-dcmi", "redfish"))
    bmc_interval: float = setting("30", "Seconds between two BMC readings (asked outside the scrape; the last one is served with its age).", _bmc_interval)
    redfish_url: str = setting("", "The `Chassis/<id>/Power` resource, e.g. `https://bmc/redfish/v1/Chassis/1/Power`.")
    state_file: str = setting("", "File keeping the sums the exporter adds up itself (each job's joules, its exited processes' I/O, its threads' wait seconds) across a restart or an upgrade, written every 30 s and at a clean stop; the directory must be writable (the shipped unit: `/var/lib/jobs-exporter/state.json`). Empty: kept in memory only, so a restart counts a running job's from 0.")
    redfish_auth_file: str = setting("", "File holding `user:password` for Redfish (empty: no authentication).")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        settings = cls(**load(cls, PREFIX, os.environ if env is None else env))
        if settings.bmc == "redfish" and not settings.redfish_url:
            raise SettingsError(
                "JOBREPORT_EXPORTER_BMC=redfish needs JOBREPORT_EXPORTER_REDFISH_URL")
        return settings

    @property
    def effective_node_name(self) -> str:
        # Slurm's default NodeName is the short hostname (what `slurmd -N` defaults to).
        return self.node_name or socket.gethostname().split(".", 1)[0]


SETTINGS_DOC = documented(Settings, PREFIX)
