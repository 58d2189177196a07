"""slurm-exporter on captured snapshots: sources that serve fixtures/slurm/<capture>.*.txt."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from jobreport_common.constants import load_constants
from slurm_exporter.registry import PARSERS, SlurmCollector
from slurm_exporter.throttle import ThrottledSource

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "slurm"
CONSTANTS = ROOT / "deploy" / "slurm-exporter-constants.toml"


def exposition(capture: str, constants_file: Path | None = None) -> str:
    """/metrics of an exporter whose sources serve the capture's files."""
    registry = CollectorRegistry()
    registry.register(collector(capture, constants_file))
    return generate_latest(registry).decode()


def collector(capture: str, constants_file: Path | None = None) -> SlurmCollector:
    sources = {}
    for name, parse in PARSERS.items():
        path = FIXTURES / f"{capture}.{name}.txt"
        if path.exists():
            text = path.read_text()
            sources[name] = ThrottledSource(name, lambda p=parse, t=text: p(t), poll_limit=10)
    constants = load_constants(constants_file)["demo"] if constants_file else None
    return SlurmCollector("demo", sources, constants)
