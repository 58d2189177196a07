"""``promtool check metrics``: Prometheus's own lint of an exposition (naming conventions,
HELP and TYPE lines), run on what the exporters serve."""

from __future__ import annotations

import shutil
import subprocess

# Debian's `prometheus` package, which scripts/dev-stack installs.
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def check_metrics(text: str | bytes) -> tuple[int, str]:
    """promtool's exit status and complaints: ``(0, "")`` when it accepts the exposition."""
    data = text.encode() if isinstance(text, str) else text
    run = subprocess.run([PROMTOOL, "check", "metrics"], input=data, capture_output=True,
                         timeout=60)
    return run.returncode, (run.stdout + run.stderr).decode()
