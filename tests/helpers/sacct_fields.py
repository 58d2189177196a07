"""The columns sacct was asked for when the captures of SacctSource's own calls were taken
(fixtures/sacct/*-sacctsource-argv.psv, local-linebreaks-78-*, local-placeholder-336-*,
fixtures/slurmrestd/sacct-*.psv): ``FIELDS`` before it ended with ``QOS``. A replay of
such a capture parses it with these, as the source did then. Not a test module."""

from __future__ import annotations

from webapp.sources.sacct import FIELDS, SacctSource

CAPTURED_FIELDS = tuple(f for f in FIELDS if f != "QOS")


def as_captured(source: SacctSource) -> SacctSource:
    """``source`` reading its job lines in the captures' columns."""
    source.fields = CAPTURED_FIELDS
    return source
