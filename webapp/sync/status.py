"""Where the sync stands, per cluster and stream: what `jobreport sync --status` prints
and its metrics hold. Read from the archive alone (no source is asked)."""

from __future__ import annotations

from dataclasses import dataclass, field

from webapp.archive.store import STREAMS
from webapp.archive.sync_state import Failing, GivenUp, LastRun, SyncState


@dataclass(frozen=True)
class StreamStatus:
    cluster: str
    stream: str
    now: float
    watermark: int | None  # end time of the last job processed in order
    watermark_moved_at: float | None
    last_run: LastRun | None
    failing: list[Failing] = field(default_factory=list)
    given_up: int = 0  # jobs given up on, in the sync log (kept as long as the archive)
    given_up_latest: list[GivenUp] = field(default_factory=list)

    @property
    def watermark_age(self) -> float | None:
        """How far the sync is behind now: seconds since the watermark's job ended."""
        return None if self.watermark is None else max(0.0, self.now - self.watermark)


def read_status(state: SyncState, clusters: list[str], now: float,
                given_up_shown: int = 20) -> list[StreamStatus]:
    """Each of ``clusters``' streams (every cluster the archive knows when empty)."""
    out = []
    for cluster in clusters or state.clusters():
        for stream in STREAMS:
            mark = state.watermark(cluster, stream)
            out.append(StreamStatus(
                cluster, stream, now,
                mark[0] if mark else None, mark[1] if mark else None,
                state.last_run(cluster, stream), state.failing(cluster, stream),
                state.given_up_count(cluster, stream),
                state.given_up(cluster, stream, given_up_shown)))
    return out
