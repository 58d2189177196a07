"""scripts/lib/pidfile.sh's ``alive``: the stack's scripts ask it whether a daemon still
runs before starting (or stopping) it. A pid the kernel handed to another process after
the daemon died without removing its pidfile must read as not running: a stack start once
skipped munged that way, and every Slurm daemon after it failed to authenticate."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parent.parent / "scripts" / "lib" / "pidfile.sh"


def alive(pidfile: Path) -> bool:
    done = subprocess.run(["bash", "-c", f'. "{LIB}"; alive "$1"', "alive", str(pidfile)],
                          capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(["sleep", "60"])
    yield child
    child.kill()
    child.wait()


def test_the_process_that_wrote_its_pidfile_is_alive(tmp_path, process):
    pidfile = tmp_path / "daemon.pid"
    pidfile.write_text(f"{process.pid}\n")
    assert alive(pidfile)


def test_a_pid_reused_after_the_pidfile_was_written_is_not_alive(tmp_path, process):
    # The file last written a minute before this process started: not the one it names.
    pidfile = tmp_path / "daemon.pid"
    pidfile.write_text(f"{process.pid}\n")
    then = time.time() - 60
    os.utime(pidfile, (then, then))
    assert not alive(pidfile)


def test_a_dead_pid_an_empty_file_and_no_file_are_not_alive(tmp_path):
    done = subprocess.Popen(["true"])
    done.wait()
    dead, empty = tmp_path / "dead.pid", tmp_path / "empty.pid"
    dead.write_text(f"{done.pid}\n")
    empty.write_text("")
    assert not alive(dead) and not alive(empty) and not alive(tmp_path / "none.pid")
