"""Who coordinates which Slurm account: Slurm's own coordinators, as ``sacctmgr`` lists
them (``sacctmgr -n -P list account withcoord format=account,coordinators``: one line an
account, its coordinators comma-separated). The account report mails them, and the web
app shows a coordinator their accounts' pages."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from webapp.model import SourceUnavailable

ARGV = ("-n", "-P", "list", "account", "withcoord", "format=account,coordinators")
TIMEOUT = 30.0

Run = Callable[[list[str]], str]


def parse(text: str) -> dict[str, tuple[str, ...]]:
    """account -> its coordinators (sorted), from sacctmgr's parsable lines."""
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        account, _, names = line.strip().partition("|")
        if account:
            out[account] = tuple(sorted({n for n in names.strip("|").split(",") if n}))
    return out


def _run(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceUnavailable("sacctmgr", "sacctmgr did not run", str(exc)) from exc
    if proc.returncode:
        raise SourceUnavailable("sacctmgr", "sacctmgr failed", proc.stderr.strip()[:500])
    return proc.stdout


class Coordinators:
    """The coordinators of every account, read from ``sacctmgr`` on each call."""

    def __init__(self, sacctmgr: str = "sacctmgr", run: Run = _run) -> None:
        self.sacctmgr = sacctmgr
        self.run = run

    def by_account(self) -> dict[str, tuple[str, ...]]:
        return parse(self.run([self.sacctmgr, *ARGV]))

    def of(self, account: str) -> tuple[str, ...]:
        """The coordinators of ``account`` (none for an account sacctmgr lacks)."""
        return self.by_account().get(account, ())

    def coordinates(self, user: str, account: str) -> bool:
        return user in self.of(account)
