"""On the login node, who is staff and which sources a caller reads come from the root-owned
/etc/jobreport/jobreport.conf only: bob cannot make himself staff, nor switch to the
service's path, from his own environment."""

from __future__ import annotations

import re
import shlex
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import stack

ALICES = stack.StackJob("privilege", "alice", ("-c1", "--mem=200M", "--time=5"),
                        stack.BUSY.format(s=15))  # three scrapes: a CPU rate to plot
WITHHELD = "usage from the job's nodes is shown to the job's owner and staff only"


def login_command() -> str:
    """The installed `jobreport` of the stack, running this checkout's code (the stack's
    venv for the packages: a worktree has none of its own)."""
    if stack.ROOT == stack.STACK_ROOT:
        return "jobreport"
    version = sysconfig.get_python_version()
    site = stack.STACK_ROOT / ".venv" / "lib" / f"python{version}" / "site-packages"
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); "
            "sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'jobreport'; "
            "from webapp.cli import main; sys.exit(main())")
    return f"/usr/bin/python{version} -I -S -c {shlex.quote(code)} {site} {stack.ROOT}"


def as_bob(env: str, args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["su", "bob", "-c", f"{env} {login_command()} {args}"],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def alices_job(stack_env) -> str:
    job_id = stack.submit(ALICES)
    stack.wait_until_done([job_id])
    return job_id


def test_this_checkout_is_what_bob_runs(stack_env):
    command = login_command()
    if command == "jobreport":  # the installed wrapper: its own interpreter and packages
        wrapper = Path("/usr/local/bin/jobreport").read_text()
        command = next(line[len("exec "):] for line in wrapper.splitlines()
                       if line.startswith("exec ")).replace(' "$@"', "")
        command = command.replace(f"{stack.ROOT}/.venv/bin/jobreport",
                                  f"{stack.ROOT}/.venv/bin/python -c "
                                  "'from webapp.cli import main; sys.exit(main())'")
    probe = command.replace("from webapp.cli import main; sys.exit(main())",
                            "import webapp; print(webapp.__file__)")
    out = subprocess.run(["su", "bob", "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith(str(stack.ROOT)), out


@pytest.mark.parametrize("env", [
    "JOBREPORT_STAFF=bob",
    "JOBREPORT_DB_PASSWORD_FILE=",
    "JOBREPORT_CONFIG=/dev/null JOBREPORT_STAFF=bob",
])
def test_bob_cannot_grant_himself_alices_usage(alices_job, env):
    out = as_bob(env, f"show --details {alices_job}")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert re.search(r"^  alice \(account ", text, re.M)
    # Nothing from the job's nodes (no plots, no I/O), and the note that says why.
    assert "\nPlots\n" not in text and "Read / written" not in text
    assert WITHHELD in " ".join(text.split())
    assert "ignored: for a caller who is not root" in out.stderr


def test_alice_herself_sees_her_usage(alices_job):
    # The control: the figures bob is refused exist, for the owner.
    out = subprocess.run(["su", "alice", "-c", f"{login_command()} show --details {alices_job}"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "\nPlots\n  CPU " in out.stdout, out.stderr
    assert WITHHELD not in " ".join(out.stdout.split())
