"""scripts/lib/pidfile.sh's ``alive``: the stack's scripts ask it whether a daemon still
runs before starting (or stopping) it. A pid the kernel handed to another program after
the daemon died without removing its pidfile must read as not running (a stack start once
skipped munged that way, and every Slurm daemon after it failed to authenticate), and a
daemon still running must never read as gone (a start once began a second exporter)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parent.parent / "scripts" / "lib" / "pidfile.sh"


def alive(pidfile: Path, *name: str) -> bool:
    done = subprocess.run(["bash", "-c", f'. "{LIB}"; alive "$@"', "alive", str(pidfile), *name],
                          capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def daemon_name(pidfile: str) -> str:
    return subprocess.run(["bash", "-c", f'. "{LIB}"; daemon_name "$1"', "name", pidfile],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(["sleep", "60"])
    yield child
    child.kill()
    child.wait()


def test_the_daemon_its_pidfile_names_is_alive(tmp_path, process):
    pidfile = tmp_path / "sleep.pid"
    pidfile.write_text(f"{process.pid}\n")
    assert alive(pidfile)
    assert alive(tmp_path / "sleep.pid", "sleep")


def test_a_pid_reused_by_another_program_is_not_alive(tmp_path, process):
    # munged's pidfile left behind, its number now another program's (a shell's, once).
    pidfile = tmp_path / "munged.pid"
    pidfile.write_text(f"{process.pid}\n")
    assert not alive(pidfile)
    assert not alive(tmp_path / "munged.pid", "qemu-system-x86")


def test_an_old_pidfile_of_a_running_daemon_is_alive(tmp_path, process):
    # No clock decides: a pidfile written long ago (or a copy with its time kept) whose
    # daemon still runs reads as running, however the machine's clocks moved since.
    pidfile = tmp_path / "sleep.pid"
    pidfile.write_text(f"{process.pid}\n")
    then = time.time() - 86400
    os.utime(pidfile, (then, then))
    assert alive(pidfile)


def test_a_dead_pid_an_empty_or_odd_file_and_no_file_are_not_alive(tmp_path):
    done = subprocess.Popen(["true"])
    done.wait()
    dead, empty, odd = tmp_path / "true.pid", tmp_path / "empty.pid", tmp_path / "odd.pid"
    dead.write_text(f"{done.pid}\n")
    empty.write_text("")
    odd.write_text("self\n")
    assert not any(alive(f) for f in (dead, empty, odd, tmp_path / "none.pid"))


@pytest.mark.parametrize(("pidfile", "name"), [
    ("/run/munge/munged.pid", "munged"),
    ("/run/slurm/slurmd-gpu4.pid", "slurmd"),
    ("var/dev-stack/exporter-cpu1.pid", "jobs-exporter"),
    ("var/dev-stack/web-all.pid", "gunicorn"),
    ("var/dev-stack/sync.pid", "jobreport-sync"),
    ("var/dev-stack/slurm-exporter.pid", "slurm-exporter"),
])
def test_each_pidfile_of_the_stack_names_its_daemon(pidfile, name):
    assert daemon_name(pidfile) == name

