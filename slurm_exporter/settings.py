"""Settings of slurm-exporter, read once from ``JOBREPORT_SLURM_EXPORTER_*`` variables.

Command-line flags override them (see ``__main__``). Every variable is listed in
``SETTINGS_DOC`` and in slurm_exporter/README.md; a test checks the two agree. An
unknown ``JOBREPORT_SLURM_EXPORTER_*`` variable (a typo) is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobreport_net.bind import parse_bind
from slurm_exporter.commands import SOURCES

PREFIX = "JOBREPORT_SLURM_EXPORTER_"
DEFAULT_PORT = 9089

# name -> (default, one-line description); slurm_exporter/README.md mirrors this table.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_SLURM_EXPORTER_LISTEN": (
        f"0.0.0.0:{DEFAULT_PORT}",
        "Address:port serving /metrics.",
    ),
    "JOBREPORT_SLURM_EXPORTER_CLUSTER": (
        "",
        "Value of the `cluster` label (empty: ClusterName from slurm.conf).",
    ),
    "JOBREPORT_SLURM_EXPORTER_POLL_LIMIT": (
        "10",
        "Seconds between two runs of one command, whatever the number of scrapes.",
    ),
    "JOBREPORT_SLURM_EXPORTER_TIMEOUT": (
        "10",
        "Seconds before a command's process group is killed (counted as a timeout).",
    ),
    "JOBREPORT_SLURM_EXPORTER_SOURCES": (
        ",".join(SOURCES),
        "Comma-separated commands to run (drop sshare on clusters without fair share).",
    ),
    "JOBREPORT_SLURM_EXPORTER_BIN_DIR": (
        "",
        "Directory of sinfo/squeue/sshare/sdiag (empty: found on PATH).",
    ),
    "JOBREPORT_SLURM_EXPORTER_CONSTANTS": (
        "",
        "TOML file of allocation targets (empty: none exported).",
    ),
    "JOBREPORT_SLURM_EXPORTER_LOG_LEVEL": ("INFO", "Python logging level."),
}


class SettingsError(ValueError):
    """An environment variable holds a value we cannot use."""


@dataclass(frozen=True)
class Settings:
    listen: str = f"0.0.0.0:{DEFAULT_PORT}"
    cluster: str = ""
    poll_limit: float = 10.0
    timeout: float = 10.0
    sources: tuple[str, ...] = SOURCES
    bin_dir: str = ""
    constants: str = ""
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        unknown = sorted(k for k in env if k.startswith(PREFIX) and k not in SETTINGS_DOC)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")

        def get(name: str) -> str:
            return env.get(PREFIX + name, SETTINGS_DOC[PREFIX + name][0])

        listen = get("LISTEN")
        try:
            parse_bind(listen)
        except ValueError as exc:
            raise SettingsError(f"{PREFIX}LISTEN: {exc}") from None
        return cls(
            listen=listen,
            cluster=get("CLUSTER"),
            poll_limit=positive(PREFIX + "POLL_LIMIT", get("POLL_LIMIT")),
            timeout=positive(PREFIX + "TIMEOUT", get("TIMEOUT")),
            sources=parse_sources(PREFIX + "SOURCES", get("SOURCES")),
            bin_dir=get("BIN_DIR"),
            constants=get("CONSTANTS"),
            log_level=get("LOG_LEVEL"),
        )


def positive(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SettingsError(f"{name}={value!r} is not a number") from None
    if number <= 0:
        raise SettingsError(f"{name}={value!r} must be above 0")
    return number


def parse_sources(name: str, value: str) -> tuple[str, ...]:
    chosen = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in chosen if s not in SOURCES]
    if bad:
        raise SettingsError(f"{name}: unknown source(s) {', '.join(bad)}; known: {SOURCES}")
    return chosen


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
