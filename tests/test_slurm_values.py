"""Slurm's shared values (jobreport_common/slurm_values.py): TRES strings and memory sizes,
read alike by the web app (sacct's AllocTRES) and slurm-exporter (squeue's tres-alloc),
on literal strings and on the real captures of fixtures/ (SOURCES.md)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from jobreport_common.slurm_values import gpus_from_tres, parse_size, parse_tres, tres_memory_bytes
from jobreport_common.units import GIB, KIB, MIB
from slurm_exporter.squeue import parse_tres as squeue_tres
from webapp.sources.sacct import _tres_facts
from webapp.sources.sacct_values import parse_alloc_memory, parse_memory, parse_req_mem

FIX = Path(__file__).resolve().parent.parent / "fixtures"
HB = FIX / "sacct" / "DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv"


def _sacct_column(name: str) -> list[str]:
    with HB.open(newline="") as f:
        return [row[name] for row in csv.DictReader(f, delimiter="|") if row[name]]


def _squeue_tres() -> list[str]:
    # slurm-exporter's own captures: the 9th '|' field is tres-alloc (SQUEUE_FIELDS).
    return [line.split("|")[8] for path in sorted((FIX / "slurm").glob("*.squeue.txt"))
            for line in path.read_text().splitlines() if line]


def _allocations() -> list[str]:
    return _sacct_column("AllocTRES") + _sacct_column("ReqTRES") + _squeue_tres()


def test_captured_allocations_print_memory_in_mb_with_a_unit():
    """Slurm prints an allocation's memory (a count of MB) with its unit, never bare but
    as 0: the captures hold 500M, 62.50G, 0, and no bare count."""
    mems = [parse_tres(t)["mem"] for t in _allocations() if "mem" in parse_tres(t)]
    assert len(mems) > 50
    assert all(m[-1] in "KMGTP" or m == "0" for m in mems), mems


def test_captured_usage_prints_bytes():
    """A usage TRES counts bytes: the hb-jobinfo V100 step's mem=80K is 80 KiB."""
    usage = [parse_tres(t)["mem"] for t in _sacct_column("TRESUsageInMax")]
    assert "80K" in usage and "0" in usage
    assert parse_memory("80K") == 80 * KIB


def test_the_web_app_and_slurm_exporter_read_an_allocation_alike():
    """Every captured allocation, and raw counts as Slurm prints them unconverted, give
    the same GPUs and bytes to the report (sacct) and to the exporter (squeue): a bare
    number was bytes to one and MiB to the other before they shared this parser."""
    for text in [*_allocations(), "cpu=1,mem=4000,node=1", "cpu=2,mem=0,gres/gpu=1"]:
        gpus, memory, _ = _tres_facts(text)
        assert squeue_tres(text) == (gpus, memory or 0), text
    assert squeue_tres("cpu=1,mem=4000,node=1") == (0, 4000 * MIB)
    assert _tres_facts("cpu=1,mem=4000,node=1")[1] == 4000 * MIB


@pytest.mark.parametrize(
    "text, bare, expected",
    [
        ("62.50G", 1, round(62.5 * GIB)),
        ("500M", 1, 500 * MIB),
        ("500m", 1, 500 * MIB),
        ("1294440K", 1, 1294440 * KIB),
        ("1234567", 1, 1234567),  # usage: bytes
        ("500", MIB, 500 * MIB),  # allocation: MiB
        ("0", MIB, 0),
    ],
)
def test_parse_size(text, bare, expected):
    assert parse_size(text, bare) == expected


@pytest.mark.parametrize("text", ["", "lots", "12X", "1.2.3G", "-5M"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_allocation_and_request_memory_read_mib():
    assert tres_memory_bytes("4000") == parse_alloc_memory("4000") == 4000 * MIB
    assert parse_alloc_memory("16?") is None and parse_alloc_memory("") is None
    assert parse_req_mem("4000", 1, 1) == 4000 * MIB
    assert parse_req_mem("0n", 1, 2) == 0
    assert parse_req_mem("2000c", 4, 1) == 4 * 2000 * MIB


def test_gpus_from_tres_of_either_source():
    # Typed entries repeat the untyped total; alone, they add up; usage TRES are no GPUs.
    assert gpus_from_tres(parse_tres("gres/gpu:v100=1,gres/gpu=1")) == 1
    assert gpus_from_tres(parse_tres("gres/gpu:a100=2,gres/gpu:v100=1")) == 3
    assert gpus_from_tres(parse_tres("gres/gpumem=20500736K,gres/gpuutil=90")) == 0
    assert gpus_from_tres({"gres/gpu": 2.0}) == 2  # the accounting database's numbers
