"""The rules' version every report records (``coverage.rules_version``), derived from what
decides a finding rather than bumped by hand: the detectors' source files and every
threshold's default. A change to either changes the version, so two reports with the
same version were judged by the same rules (a site's JOBREPORT_THRESHOLDS is recorded
beside it, threshold by threshold).

The version is the first 12 hex digits of a SHA-256 over, in name order, each
``webapp/detectors/*.py`` file's name and bytes (line ends as ``\\n``), then each
threshold's name and ``repr`` of its default in table order. The files are read from the
installed package (``importlib.resources``), and no path, time or host goes in: the same
sources give the same version on every machine, from a checkout or from the wheel.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from webapp.thresholds import Thresholds

DIGITS = 12


def detector_sources(root: Traversable | Path | None = None) -> list[tuple[str, bytes]]:
    """(file name, bytes) of every ``*.py`` of the detectors package (or of ``root``, a
    copy of it), in name order. No sources (an install that ships only bytecode) is an
    error: a version derived without them would not change with the rules."""
    root = resources.files("webapp.detectors") if root is None else root
    sources = sorted((f.name, f.read_bytes()) for f in root.iterdir()
                     if f.name.endswith(".py") and f.is_file())
    if not any(name == "__init__.py" for name, _ in sources):
        raise RuntimeError(f"{root}: the detectors' sources are missing; the rules' version "
                           "is derived from them")
    return sources


def threshold_defaults(cls: type = Thresholds) -> list[tuple[str, str]]:
    """(name, repr of the default) of every threshold of ``cls``, in table order."""
    return [(f.name, repr(f.default)) for f in dataclasses.fields(cls)
            if "unit" in f.metadata]


def rules_version(sources: Iterable[tuple[str, bytes]],
                  defaults: Iterable[tuple[str, str]]) -> str:
    """The version of these detector sources and threshold defaults."""
    digest = hashlib.sha256()
    for name, data in sources:
        data = data.replace(b"\r\n", b"\n")
        digest.update(f"source {name} {len(data)}\n".encode())
        digest.update(data)
    for name, default in defaults:
        digest.update(f"threshold {name} {default}\n".encode())
    return digest.hexdigest()[:DIGITS]
