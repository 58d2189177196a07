"""Capture the exporter's four commands verbatim into fixture files (for tests).

``python -m slurm_exporter.capture DIR NAME`` writes DIR/NAME.<source>.txt for every
source with exactly the argv and environment the exporter uses, and prints the
command lines so SOURCES.md can record them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from slurm_exporter.commands import COMMAND_ENV, COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurm_exporter.capture")
    p.add_argument("directory", type=Path)
    p.add_argument("name", help="file name prefix, e.g. node-drain-running")
    p.add_argument("--source", action="append", choices=list(COMMANDS), help="only these")
    args = p.parse_args(argv)
    args.directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **COMMAND_ENV}
    for source in args.source or list(COMMANDS):
        cmd = COMMANDS[source]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=30).stdout
        (args.directory / f"{args.name}.{source}.txt").write_bytes(out)
        sys.stdout.write(f"{args.name}.{source}.txt: {shlex.join(cmd)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
