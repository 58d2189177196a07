"""What every collector is constructed with: settings and the shared readers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from exporter.proc_reader import ProcReader
from exporter.settings import Settings


@dataclass
class CollectorContext:
    settings: Settings
    procs: ProcReader
    nvml: ModuleType | object | None = None  # a pynvml-compatible module; None: import pynvml
    # Runs scontrol (argv -> stdout); None: gpu_alloc.run_scontrol. Tests replay captures.
    scontrol: Callable[[Sequence[str]], str] | None = None
