"""Settings of slurm-exporter, read once from ``JOBREPORT_SLURM_EXPORTER_*`` variables.

Command-line flags override them (see ``__main__``). Each variable is declared once, as a
field below; ``SETTINGS_DOC`` and the table in slurm_exporter/README.md are generated from
the fields. An unknown ``JOBREPORT_SLURM_EXPORTER_*`` variable (a typo) is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobreport_common.bind import parse_bind
from jobreport_common.settings import SettingsError, checked, documented, load, ranged, setting
from slurm_exporter.commands import SOURCES

__all__ = ["DEFAULT_PORT", "PREFIX", "SETTINGS_DOC", "SOURCES", "Settings", "SettingsError",
           "cluster_from_slurm_conf", "parse_sources", "positive"]

PREFIX = "JOBREPORT_SLURM_EXPORTER_"
DEFAULT_PORT = 9089


# The same parser reads the variables and their flags (--poll-limit, --timeout).
positive = ranged(above=0)


def parse_sources(name: str, value: str) -> tuple[str, ...]:
    chosen = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in chosen if s not in SOURCES]
    if bad:
        raise SettingsError(f"{name}: unknown source(s) {', '.join(bad)}; known: {SOURCES}")
    return chosen


_listen = checked(parse_bind)


@dataclass(frozen=True)
class Settings:
    listen: str = setting(f"0.0.0.0:{DEFAULT_PORT}", "Address:port serving /metrics.", _listen)
    cluster: str = setting("", "Value of the `cluster` label (empty: ClusterName from slurm.conf).")
    poll_limit: float = setting(
        "10", "Seconds between two runs of one command, whatever the number of scrapes.",
        positive)
    timeout: float = setting(
        "10", "Seconds before a command's process group is killed (counted as a timeout).",
        positive)
    sources: tuple[str, ...] = setting(
        ",".join(SOURCES),
        "Comma-separated commands to run (drop sshare on clusters without fair share).",
        parse_sources)
    bin_dir: str = setting("", "Directory of sinfo/squeue/sshare/sdiag (empty: found on PATH).")
    constants: str = setting("", "TOML file of allocation targets (empty: none exported).")
    log_level: str = setting("INFO", "Python logging level.")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        return cls(**load(cls, PREFIX, os.environ if env is None else env))


SETTINGS_DOC = documented(Settings, PREFIX)


def cluster_from_slurm_conf(env: Mapping[str, str] | None = None) -> str:
    """ClusterName from the slurm.conf Slurm's commands read ($SLURM_CONF or the default).

    Read from the file, not from slurmctld, so the exporter starts while it is down.
    """
    env = os.environ if env is None else env
    path = Path(env.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"cannot read {path} for ClusterName ({exc}); set "
                            f"{PREFIX}CLUSTER") from None
    for line in text.splitlines():
        key, sep, value = line.split("#", 1)[0].strip().partition("=")
        if sep and key.strip().lower() == "clustername":
            return value.strip()
    raise SettingsError(f"no ClusterName in {path}; set {PREFIX}CLUSTER")
