"""scontrol's answers for the report service (webapp/sources/scontrol.py): kept for a
time to live, shared by the partitions' and the configuration's readers, and no failure
kept, whichever reader failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from webapp.model import SourceUnavailable, TimeLimitKind
from webapp.sources.partitions import PartitionSource, parse_max_time
from webapp.sources.scontrol import ScontrolAnswers

PARTITION = (Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
             / "local-scontrol-show-partition-debug-oneliner.txt").read_text()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scontrol:
    """A runner answering from a list, one answer (or error) per call."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers, self.calls = list(answers), []

    def __call__(self, argv: list[str]) -> str:
        self.calls.append(argv)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_an_answer_is_kept_for_the_ttl_then_asked_again():
    clock, scontrol = Clock(), Scontrol(PARTITION, PARTITION)
    answers = ScontrolAnswers(scontrol, ttl=300, clock=clock)
    argv = ["scontrol", "show", "partition", "debug", "--oneliner"]
    first = answers.read(argv, parse_max_time)
    clock.now += 299
    assert answers.read(argv, parse_max_time) == first
    assert len(scontrol.calls) == 1
    clock.now += 2
    assert answers.read(argv, parse_max_time) == first
    assert len(scontrol.calls) == 2


def test_no_failure_is_kept():
    down = SourceUnavailable("partitions", "partition limits unavailable", "exit status 1")
    scontrol = Scontrol(down, "PartitionName=debug Nodes=vm\n", PARTITION)
    source = PartitionSource(runner=scontrol)
    with pytest.raises(SourceUnavailable):  # scontrol failed: nothing kept
        source.max_time("debug")
    with pytest.raises(SourceUnavailable) as unreadable:  # dropped, not kept
        source.max_time("debug")
    assert "no MaxTime" in unreadable.value.detail
    assert source.max_time("debug")[0] in (TimeLimitKind.PARTITION, TimeLimitKind.UNLIMITED)
    assert source.max_time("debug") == source.max_time("debug")
    assert len(scontrol.calls) == 3


def test_an_unreadable_answer_is_dropped_for_every_reader():
    """The billing weights' reader drops an answer it cannot read, as MaxTime's did alone
    before the two sources' caches were one."""
    bad = PARTITION.replace("TRESBillingWeights=", "X=") + " TRESBillingWeights=CPU=lots"
    scontrol = Scontrol(bad, PARTITION)
    source = PartitionSource(runner=scontrol)
    with pytest.raises(SourceUnavailable, match="billing weights unavailable"):
        source.billing_weights("debug")
    assert isinstance(source.billing_weights("debug"), dict)
    assert len(scontrol.calls) == 2


def test_a_name_that_is_no_partition_never_reaches_scontrol():
    scontrol = Scontrol()
    with pytest.raises(SourceUnavailable) as refused:
        PartitionSource(runner=scontrol).billing_weights("debug; rm -rf /")
    assert "not a partition name" in refused.value.detail
    assert scontrol.calls == []
