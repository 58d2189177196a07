"""Wrapper scripts standing in front of the real Slurm commands (for throttling tests).

Each wrapper logs one line per execution, then runs the real command. A flag file makes
it hang (a child `sleep` the timeout must kill with its whole process group) or fail
(the real command with an unreadable SLURM_CONF, as when slurmctld cannot be reached).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from slurm_exporter.commands import SOURCES

WRAPPER = """#!/bin/sh
dir={dir}
echo $$ >> "$dir/{name}.runs"
if [ -e "$dir/{name}.hang" ]; then
  sleep 60 &
  echo $! > "$dir/{name}.child"
  wait
fi
if [ -e "$dir/{name}.fail" ]; then
  SLURM_CONF="$dir/missing.conf"; export SLURM_CONF
fi
exec {real} "$@"
"""


class Wrappers:
    def __init__(self, directory: Path):
        self.dir = directory
        for name in SOURCES:
            real = shutil.which(name)
            assert real, f"{name} not on PATH"
            path = directory / name
            path.write_text(WRAPPER.format(dir=directory, name=name, real=real))
            path.chmod(0o755)

    def runs(self, name: str) -> int:
        path = self.dir / f"{name}.runs"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def set(self, name: str, flag: str, on: bool = True) -> None:
        path = self.dir / f"{name}.{flag}"
        if on:
            path.touch()
        else:
            path.unlink(missing_ok=True)

    def child_pid(self, name: str) -> int:
        return int((self.dir / f"{name}.child").read_text())
