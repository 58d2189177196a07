"""A stand-in ``sacctmgr`` for the account coordinators (``webapp.sources.coordinators``):
a script that prints what the real one prints for ``list account withcoord``."""

from __future__ import annotations

import stat
from pathlib import Path


def fake_sacctmgr(tmp_path: Path, lines: str) -> str:
    """A sacctmgr on PATH's terms: prints ``lines`` for ``list account withcoord``."""
    path = tmp_path / "sacctmgr"
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{lines}EOF\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
