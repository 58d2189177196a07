"""`jobreport` in a fresh login shell of alice, with no JOBREPORT_* variable: the system
config file and what Slurm shows her are all it has (the accounting view's password is
root's alone)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sysconfig

import pytest

from tests.helpers import stack
from webapp.cli.jobs import COLUMNS

INSTALLED = "/usr/local/bin/jobreport"


def login_command() -> str:
    """What alice types: the installed `jobreport`, which runs the stack's checkout. A test
    of another checkout runs that checkout's code the same way the installed one does
    (the system Python on its venv's packages, since the venv's own may be root's)."""
    if stack.ROOT == stack.STACK_ROOT:
        return "jobreport"
    version = sysconfig.get_python_version()
    site = stack.ROOT / ".venv" / "lib" / f"python{version}" / "site-packages"
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'jobreport'; "
            "from webapp.cli import main; sys.exit(main())")
    return f"/usr/bin/python{version} -I -S -c {shlex.quote(code)} {site}"


def as_alice(args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["su", "-", "alice", "-c", f"{login_command()} {args}"],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def login(stack_jobs):
    # The stack installs the command and the config; a login shell sets no JOBREPORT_*.
    shell = subprocess.run(["su", "-", "alice", "-c", "command -v jobreport; env"],
                           capture_output=True, text=True, check=True).stdout
    assert shell.splitlines()[0] == INSTALLED
    assert "JOBREPORT_" not in shell
    return stack_jobs


def test_own_job_full_report_with_no_gap(login):
    busy = login["busy"]
    out = as_alice(f"show {busy} --details")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith(f"Job {busy}: busy on demo")
    assert re.search(r"^  alice \(account research\), debug on \S+: COMPLETED$", text, re.M)
    assert re.search(r"^  CPU efficiency +\[#+-*\] +\d+%", text, re.M)  # busy: mostly full
    assert "Read / written" in text and "\nPlots\n  CPU " in text  # Prometheus' part
    assert re.search(r"^  Waited +", text, re.M)  # the submit time, from sacct
    assert "Note:" not in text and not out.stderr, (text, out.stderr)
    assert all(len(line) <= 80 for line in text.splitlines())


def _cells(line: str) -> list[str]:
    """A table line's cells, cut at the columns' widths (an elapsed time holds a space)."""
    cells, at = [], 0
    for _, width, _ in COLUMNS:
        cells.append(line[at:at + width].strip())
        at += width + 1
    return cells


def _row(listing: str, job_id: str) -> list[str]:
    return next(_cells(line) for line in listing.splitlines() if line.split()[:1] == [job_id])


def test_no_argument_lists_her_recent_jobs(login):
    out = as_alice("")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Jobs of alice in the last 7 days: ")
    head = next(i for i, line in enumerate(lines) if line.startswith("job "))
    assert all(line.startswith(("Note: ", "  ")) for line in lines[1:head])  # e.g. the cap
    assert lines[head].split() == ["job", "name", "state", "elapsed", "CPU", "eff", "mem",
                                   "eff", "GPU", "use", "findings"]
    end = next(i for i, line in enumerate(lines) if line.startswith("Figures from: "))
    rows = [_cells(line)[0] for line in lines[head + 1:end]]
    assert rows and all(len(line) <= 80 for line in lines)
    owners = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,User", "-j", ",".join(
        r.split("_")[0].split("+")[0] for r in rows)], capture_output=True, text=True,
        check=True).stdout
    assert {line.split("|")[1] for line in owners.splitlines()} == {"alice"}
    # The web list's rows: the service user's listing (the view, the archive) shows the
    # busy job with the same figures, and its CPU efficiency is the report's.
    busy = login["busy"]
    mine = _row(as_alice("jobs --days 1 --limit 500").stdout, busy)
    full = stack.jobreport("jobs", "--user", "alice", "--days", "1", "--limit", "500")
    assert full.returncode == 0, full.stderr
    theirs = _row(full.stdout, busy)
    report = as_alice(f"show {busy}").stdout
    cpu = re.search(r"^  CPU efficiency +\[[#-]+\] +(\S+)", report, re.M).group(1)
    found = re.search(r"^Findings(?: \((\d+)\)|: none)", report, re.M).group(1) or "0"
    assert mine[1:3] == ["busy", "COMPLETED"] and mine[4] == cpu
    assert mine[:7] == theirs[:7]
    # Findings come from the archived report, which only the service user reads.
    assert mine[7] == "-" and theirs[7] in ("-", found)


def test_another_users_job_shows_only_what_slurm_shows_her(login):
    idle = login["idle"]  # bob's
    out = as_alice(f"show {idle}")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    # sacct as alice (no PrivateData on the stack): bob's job, its request and outcome...
    assert re.search(r"^  bob \(account teaching\), debug on \S+: COMPLETED$", text, re.M)
    assert re.search(r"^  CPU efficiency +\[-+\] +0", text, re.M)
    # ...but nothing from the job's nodes, and a note saying why.
    assert "I/O and processes" not in text and "CPU usage over time" not in text
    assert "usage from the job's nodes is shown to the job's owner and staff" in \
        " ".join(text.split())
    # The same job for root (who may read the accounting view) is complete.
    assert "Read / written" not in as_alice(f"show {idle} --details").stdout
    full = stack.jobreport("show", idle, "--details")
    assert "Read / written" in full.stdout and "Note:" not in full.stdout


def test_unknown_job_is_one_line(login):
    out = as_alice("show 999999999")
    assert out.returncode == 1
    assert out.stderr.strip() == "jobreport: job 999999999 not found"
