"""On the login node, who is staff and which sources a caller reads come from the root-owned
/etc/jobreport/jobreport.conf only: bob cannot make himself staff, nor switch to the
service's path, from his own environment. Only root and the service user read the view:
a database password bob has learned does not make him either, and a password in the
world-readable system config file stops every start."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import stack
from webapp.settings import DEFAULT_CONFIG, parse_config

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


def as_bob(env: str, args: str, mount: str = "",
           environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """bob's `jobreport`; ``mount``: shell commands run as root first in a mount namespace
    of the call's own (what it mounts over /etc/jobreport is seen by this call alone: the
    stack and other tests keep the real files); ``environ``: JOBREPORT_* variables bob has
    exported (passed through su's kept environment, not on a command line `ps` shows)."""
    command = ["su", "bob", "-c", f"{env} {login_command()} {args}"]
    if mount:
        command = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec",
                   f"{mount}; exec {shlex.join(command)}"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    return subprocess.run(command, capture_output=True, text=True, timeout=180,
                          env={**base, **(environ or {})})


def _assert_withheld(out: subprocess.CompletedProcess[str]) -> None:
    """bob's report of alice's job: what sacct shows him, nothing from the job's nodes."""
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert re.search(r"^  alice \(account ", text, re.M)
    assert "\nPlots\n" not in text and "Read / written" not in text
    assert WITHHELD in " ".join(text.split())


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
    _assert_withheld(out)  # no plots, no I/O, and the note that says why
    assert "ignored: for a caller who is not root" in out.stderr


def _password_url() -> str:
    url = stack.load_env()["JOBREPORT_DB_URL"]  # var/jobreport.env: root's, mode 0600
    assert re.match(r"mysql://jobreport:[^@]+@", url)
    return url


def test_a_password_in_the_world_readable_system_config_stops_bob(alices_job, tmp_path):
    # The site's mistake: the view's password written into /etc/jobreport/jobreport.conf.
    url = _password_url()
    system = parse_config(Path(DEFAULT_CONFIG).read_text())
    system["JOBREPORT_DB_URL"] = url
    conf = tmp_path / "jobreport.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in system.items()))
    conf.chmod(0o644)
    out = as_bob("", f"show --details {alices_job}",
                 mount=f"mount --bind {shlex.quote(str(conf))} {DEFAULT_CONFIG}")
    assert out.returncode == 1, out
    assert out.stderr.startswith(f"jobreport: {DEFAULT_CONFIG}: JOBREPORT_DB_URL holds a "
                                 "password"), out.stderr
    assert "JOBREPORT_DB_PASSWORD_FILE" in out.stderr
    assert out.stdout == "" and "alice" not in out.stderr
    assert url.split(":")[2].split("@")[0] not in out.stdout + out.stderr  # nor the password


def test_a_password_bob_learned_does_not_make_him_privileged(alices_job):
    # A host without the system config file (nothing then keeps bob's environment from the
    # privileged keys) and the password in bob's own JOBREPORT_DB_URL: he can connect to
    # the view himself, but `jobreport` treats him as the user he is.
    system = parse_config(Path(DEFAULT_CONFIG).read_text())
    env = {k: v for k, v in system.items()
           if k not in ("JOBREPORT_DB_PASSWORD_FILE", "JOBREPORT_SECRET_KEY_FILE")}
    env["JOBREPORT_DB_URL"] = _password_url()
    out = as_bob("", f"show --details {alices_job}", environ=env,
                 mount=f"mount -t tmpfs -o mode=755 none {Path(DEFAULT_CONFIG).parent}")
    _assert_withheld(out)
    assert "ignored" not in out.stderr  # no system file: his environment was read, as is


def test_alice_herself_sees_her_usage(alices_job):
    # The control: the figures bob is refused exist, for the owner.
    out = subprocess.run(["su", "alice", "-c", f"{login_command()} show --details {alices_job}"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and "\nPlots\n  CPU " in out.stdout, out.stderr
    assert WITHHELD not in " ".join(out.stdout.split())
