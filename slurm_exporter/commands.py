"""The Slurm command lines the exporter runs: one per source, text output only.

`Field:|` gives each field no padding and a `|` suffix, so nothing is truncated and
the text splits on `|` (a fixed width cuts `GresUsed` to `gpu:`). Every command runs
with SLURM_TIME_FORMAT=standard and TZ=UTC so times never follow the host's locale.
"""

from __future__ import annotations

from collections.abc import Mapping

SINFO_FIELDS = (
    "NodeList",
    "PartitionName",  # `Partition` would print the default one as `debug*`
    "StateComplete",  # base+flags; StateLong folds flags into one word (display only)
    "CPUsState",
    "Memory",
    "AllocMem",
    "FreeMem",
    "CPUsLoad",
    "Gres",
    "GresUsed",
    "Reason",  # last: free text, why a node is drained or down
)
SQUEUE_FIELDS = (
    "JobArrayID",  # with -r, JobID repeats the array's id for every task
    "JobID",
    "State",
    "UserName",
    "Account",
    "Partition",
    "NumCPUs",
    "NumNodes",
    "tres-alloc",
    "tres-per-node",  # what a pending job asks for (tres-alloc is empty until it starts)
    "Reason",  # last: free text ("ReqNodeNotAvail, UnavailableNodes:...")
)
SSHARE_FIELDS = (
    "Account",
    "User",
    "RawShares",
    "NormShares",
    "RawUsage",
    "EffectvUsage",
    "FairShare",
    "LevelFS",
)


def o_format(fields: tuple[str, ...]) -> str:
    return ",".join(f"{f}:|" for f in fields)


# source name -> argv (the program name is resolved on PATH, or via a settings prefix).
COMMANDS: Mapping[str, tuple[str, ...]] = {
    "sinfo": ("sinfo", "-a", "-h", "-N", "-O", o_format(SINFO_FIELDS)),
    "squeue": ("squeue", "-a", "-h", "-r", "-t", "all", "-O", o_format(SQUEUE_FIELDS)),
    "sshare": ("sshare", "-a", "-n", "-P", "-o", ",".join(SSHARE_FIELDS)),
    "sdiag": ("sdiag",),
}
SOURCES: tuple[str, ...] = tuple(COMMANDS)

COMMAND_ENV: Mapping[str, str] = {"SLURM_TIME_FORMAT": "standard", "TZ": "UTC"}
