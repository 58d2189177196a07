"""Operational metrics of jobreport's own runs (the sync, the outbox) for node_exporter's
textfile collector: each writer fills a registry of its own and writes it to a file of
its own in the one directory JOBREPORT_METRICS_TEXTFILE_DIR names, so two writers never
overwrite each other's series.
"""

from __future__ import annotations

import logging
import os
import re

from prometheus_client import CollectorRegistry, write_to_textfile

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def textfile_path(directory: str, name: str) -> str:
    """``<directory>/<name>.prom``, ``name`` made a safe file name (a cluster's name is
    part of some)."""
    return os.path.join(directory, _UNSAFE.sub("_", name) + ".prom")


def write_textfile(path: str, registry: CollectorRegistry) -> bool:
    """Write ``registry`` to ``path`` at once (a temporary file renamed over it: the
    collector never reads half a file); False, logged, when it cannot be written. A
    failed write never fails the run that measured: a stale file shows in the
    timestamps it holds."""
    try:
        write_to_textfile(path, registry)
    except OSError as exc:
        log.error("cannot write the metrics file %s: %s", path, exc)
        return False
    return True
