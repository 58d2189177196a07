"""What one sync run is asked to do (the command line fills it)."""

from __future__ import annotations

from dataclasses import dataclass

# --direction -> the streams it runs, each with its own watermark
DIRECTIONS: dict[str, tuple[str, ...]] = {
    "archive": ("archive",),
    "email": ("email",),
    "both": ("archive", "email"),
}
DEFAULT_LIMIT = 200
DEFAULT_MAX_SPAN = 7 * 86400.0


@dataclass(frozen=True)
class SyncOptions:
    direction: str = "both"
    limit: int = DEFAULT_LIMIT
    max_span: float = DEFAULT_MAX_SPAN  # how far back a first run (no watermark) reaches
    job_id: str | None = None
    dry_run: bool = False
    no_deliver: bool = False  # queue emails only; a later run delivers
