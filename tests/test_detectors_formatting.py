"""The shared number formats the detectors' advice (and the renderers) use."""

from __future__ import annotations

import pytest

from webapp.formatting import (
    format_bytes,
    format_duration,
    format_percent,
    slurm_mem,
    slurm_time,
    visible,
)

GIB, MIB = 1024**3, 1024**2


@pytest.mark.parametrize(
    "n, text",
    [(None, "n/a"), (0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (1.5 * GIB, "1.5 GiB"),
     (12 * GIB, "12 GiB"), (300 * MIB, "300 MiB"), (3 * 1024**4, "3.0 TiB")],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    "n, text",
    [(5.2 * GIB, "6G"), (GIB, "1G"), (1001 * MIB, "1G"), (999 * MIB, "1000M"),
     (300 * MIB, "300M"), (301 * MIB, "400M"), (1, "100M"), (0, "100M")],
)
def test_slurm_mem_rounds_up(n, text):
    assert slurm_mem(n) == text


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "00:00:00"), (59.2, "00:01:00"), (3725, "01:02:05"), (93784, "1-02:03:04"),
     (86400, "1-00:00:00")],
)
def test_slurm_time(seconds, text):
    assert slurm_time(seconds) == text


@pytest.mark.parametrize(
    "seconds, text",
    [(None, "n/a"), (0, "0s"), (0.5, "0.50s"), (45, "45s"), (725, "12m 05s"),
     (3725, "1h 02m"), (2 * 86400 + 3 * 3600, "2d 03h")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "ratio, text", [(None, "n/a"), (0, "0%"), (0.004, "0.4%"), (0.12, "12%"), (1.5, "150%")]
)
def test_format_percent(ratio, text):
    assert format_percent(ratio) == text


@pytest.mark.parametrize(("text", "shown"), [
    ("train-model", "train-model"),
    ("two\nlines|pipe", "two\\nlines|pipe"),
    ("cr\r\nlf\ttab", "cr\\r\\nlf\\ttab"),
    ("\x1b[2Jbell\x07", "\\x1b[2Jbell\\x07"),
    ("para\u2028sep\u202eevil", "para\\u2028sep\\u202eevil"),
    ("é 日本 a b", "é 日本 a b"),
])
def test_visible_writes_control_characters_out(text, shown):
    assert visible(text) == shown and visible(shown) == shown
