"""Parse ``sshare -a -n -P -o Account,User,RawShares,NormShares,RawUsage,EffectvUsage,
FairShare,LevelFS``: one line per association, accounts indented by depth.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_exporter.fields import optional_float


@dataclass(frozen=True, slots=True)
class ShareLine:
    account: str
    user: str  # "" on an account's own line
    raw_shares: float | None
    norm_shares: float | None
    raw_usage: float | None
    effective_usage: float | None
    fairshare: float | None  # blank on account lines (and everywhere with priority/basic)
    level_fs: float | None


def parse_sshare(text: str) -> list[ShareLine]:
    """Every association, e.g.

    `` research||1||0|0.000000||0.000000``
    ``  research|alice|1||0|0.000000|0.000000|0.000000``
    """
    shares = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 8:
            raise ValueError(f"expected 8 '|'-separated fields in {line!r}")
        account, user, *numbers = fields
        raw, norm, usage, effective, fairshare, level = (_number(n) for n in numbers)
        shares.append(
            ShareLine(account.strip(), user, raw, norm, usage, effective, fairshare, level)
        )
    return shares


def _number(text: str) -> float | None:
    # LevelFS is `inf` for an association with shares and no usage; float() reads it.
    return optional_float(text)
