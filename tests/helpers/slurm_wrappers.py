"""Wrapper scripts standing in front of the real Slurm commands (for throttling tests).

Each wrapper logs one line per execution, then runs the real command. A flag file makes
it hang (a child `sleep` the timeout must kill with its whole process group) or fail:
the real command then reads a copy of slurm.conf whose SlurmctldPort nothing listens on,
exactly what it meets when slurmctld is stopped, without stopping the shared one
(MessageTimeout=1 makes it give up at once instead of after ~9 s of retries).
"""

from __future__ import annotations

import os
import shutil
import socket
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
  SLURM_CONF="$dir/unreachable/slurm.conf"; export SLURM_CONF
fi
exec {real} "$@"
"""


class Wrappers:
    def __init__(self, directory: Path):
        self.dir = directory
        _unreachable_conf(directory / "unreachable")
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


def alive(pid: int) -> bool:
    """A killed child reparented to a PID 1 that does not reap stays a zombie: dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _unreachable_conf(directory: Path) -> None:
    conf = Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    directory.mkdir()
    for other in conf.parent.glob("*.conf"):  # gres.conf, cgroup.conf sit beside it
        if other.name not in (conf.name, "slurmdbd.conf"):
            shutil.copy(other, directory / other.name)
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lines = [line for line in conf.read_text().splitlines()
             if line.split("=", 1)[0].strip().lower() not in ("slurmctldport", "messagetimeout")]
    lines += [f"SlurmctldPort={port}", "MessageTimeout=1"]
    (directory / "slurm.conf").write_text("\n".join(lines) + "\n")


def require_slurm() -> None:
    """Fail loudly (never skip) when the local stack's slurmctld does not answer."""
    import subprocess

    run = subprocess.run(["sinfo", "-h", "-o", "%n"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stdout.strip(), (
        f"the local Slurm stack is not up (scripts/dev-stack start): {run.stderr.strip()}"
    )
