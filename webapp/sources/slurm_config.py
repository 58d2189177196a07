"""Slurm's own configuration, from ``scontrol show config``: the one place that reads the
site's ``PrivateData`` (what Slurm hides from users who are not its operators).

slurm.conf changes only with a reconfigure, so each answer is kept for ``ttl`` seconds;
failures are not kept (webapp.sources.scontrol).
"""

from __future__ import annotations

from webapp.model import SourceUnavailable
from webapp.sources.scontrol import Runner, ScontrolAnswers, run_scontrol

REASON = "Slurm's configuration unavailable"


def parse_config(text: str) -> dict[str, str]:
    """``Key = value`` lines of ``scontrol show config``; other lines are skipped.

        PriorityType            = priority/basic
        PrivateData             = none
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_private_data(text: str) -> frozenset[str]:
    """PrivateData's flags in lower case (``jobs,usage`` -> {jobs, usage}; ``none`` -> {}).
    ValueError when the answer has no PrivateData line.

        PrivateData             = jobs,usage
    """
    value = parse_config(text).get("PrivateData")
    if value is None:
        raise ValueError("no PrivateData in scontrol's answer")
    flags = {flag.strip().lower() for flag in value.split(",")}
    return frozenset(flags - {"", "none", "(null)"})


class SlurmConfigSource:
    """The site's PrivateData, cached for ``ttl`` seconds per process."""

    name = "slurm_config"

    def __init__(self, scontrol_path: str = "scontrol", runner: Runner | None = None,
                 timeout: float = 10.0, ttl: float = 300.0) -> None:
        self.scontrol_path = scontrol_path
        self.ttl = ttl
        self._answers = ScontrolAnswers(
            runner or (lambda argv: run_scontrol(argv, timeout, self.name, REASON)), ttl)

    def private_data(self) -> frozenset[str]:
        """PrivateData's flags. Raises SourceUnavailable when scontrol fails or says none."""
        try:
            return self._answers.read([self.scontrol_path, "show", "config"],
                                      parse_private_data)
        except ValueError as exc:
            raise SourceUnavailable(self.name, REASON, str(exc)) from None
