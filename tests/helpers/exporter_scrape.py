"""Helpers for exporter tests: scrape a tree in-process (written as the server writes it)
and compare with golden files."""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from jobs_exporter.exposition import TextWriter
from jobs_exporter.registry import COLLECTORS, JobsCollector
from jobs_exporter.settings import Settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "exporter"
GOLDEN = FIXTURES / "golden"
# Fixed names so goldens do not depend on this machine's passwd (uid 1001 = alice here).
USERS = {1001: "alice"}
_DURATION = re.compile(r"^(jobs_scrape_collector_duration_seconds\{[^}]*\}) .*$", re.M)


def make_settings(tree: pathlib.Path | str, **changes: Any) -> Settings:
    tree = pathlib.Path(tree)
    base = {
        "cgroup_root": str(tree / "cgroup"),
        "proc_root": str(tree / "proc"),
        "node_name": "vm",
        "gpus": "off",
        "gpu_alloc_dir": str(tree / "no-gpu-alloc"),
        # Not this machine's sensors: a tree without them has no energy series.
        "powercap_root": str(tree / "no-powercap"),
        "hwmon_root": str(tree / "no-hwmon"),
    }
    base.update(changes)
    return Settings(**base)


def scrape(
    settings: Settings, nvml: Any = None, collectors: Sequence[type] = COLLECTORS, **kwargs: Any
) -> str:
    """One exposition from a fresh registry, durations zeroed so it can be compared."""
    registry = CollectorRegistry()
    kwargs.setdefault("user_name", USERS.__getitem__)
    registry.register(JobsCollector(settings, collectors=collectors, nvml=nvml, **kwargs))
    return _DURATION.sub(r"\1 0.0", TextWriter().write(registry).decode())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, tuple(sorted(labels.items()))))


def series_of(text: str, jobid: str) -> list[str]:
    """Names of the samples of one job (empty: the job is absent from the exposition)."""
    return [name for name, labels in samples(text) if ("jobid", jobid) in labels]


def assert_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.prom"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"exposition differs from {path} (UPDATE_GOLDEN=1 rewrites)"
