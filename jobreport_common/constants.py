"""Allocation targets: a small TOML file of per-cluster and per-account constants.

Shared by slurm-exporter (gauges) and the web app (`/api/constants`, the target line
of the cluster page).

Pure (no Slurm, no Prometheus): the exporter turns it into gauges and the web app can
serve the same file as JSON. Example::

    [clusters.demo]
    students = 40

    [clusters.demo.accounts.research]
    gpu_years = 1.5        # GPU-years allocated to the account for the year
    target_share = 0.6     # the share of the cluster it should get

    [clusters.demo.accounts.teaching]
    gpu_years = 0.5
    target_share = 0.4
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLUSTER_KEYS = ("students", "gpus", "cpus")
ACCOUNT_KEYS = ("gpu_years", "cpu_years", "target_share")


class ConstantsError(ValueError):
    """The constants file is unreadable or holds an unknown key or a non-number."""


@dataclass(frozen=True)
class ClusterConstants:
    values: dict[str, float] = field(default_factory=dict)  # students, gpus, cpus
    accounts: dict[str, dict[str, float]] = field(default_factory=dict)


def load_constants(path: str | Path) -> dict[str, ClusterConstants]:
    """cluster name -> its constants, from the TOML file at ``path``."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConstantsError(f"{path}: {exc}") from None
    return parse_constants(data, str(path))


def parse_constants(data: dict[str, Any], where: str = "constants") -> dict[str, ClusterConstants]:
    extra = set(data) - {"clusters"}
    if extra:
        raise ConstantsError(f"{where}: unknown top-level key(s) {sorted(extra)}")
    result = {}
    for cluster, table in data.get("clusters", {}).items():
        accounts = table.get("accounts", {})
        values = _numbers({k: v for k, v in table.items() if k != "accounts"},
                          CLUSTER_KEYS, f"{where}: clusters.{cluster}")
        result[cluster] = ClusterConstants(
            values=values,
            accounts={
                name: _numbers(acct, ACCOUNT_KEYS, f"{where}: clusters.{cluster}.accounts.{name}")
                for name, acct in accounts.items()
            },
        )
    return result


def as_json(constants: dict[str, ClusterConstants]) -> dict[str, Any]:
    """The shape ``/api/constants`` serves: ``{cluster: {students: .., accounts: {..}}}``."""
    return {
        name: {**c.values, "accounts": {a: dict(v) for a, v in c.accounts.items()}}
        for name, c in constants.items()
    }


def _numbers(table: dict[str, Any], allowed: tuple[str, ...], where: str) -> dict[str, float]:
    out = {}
    for key, value in table.items():
        if key not in allowed:
            raise ConstantsError(f"{where}: unknown key {key!r} (known: {', '.join(allowed)})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConstantsError(f"{where}.{key}: {value!r} is not a number")
        out[key] = float(value)
    return out
