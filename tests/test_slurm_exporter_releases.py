"""slurm-exporter's one code path on the outputs of three Slurm releases: 22.05 (the local
stack, fixtures/slurm/queue-pending.*), 24.11 and 26.05 (the VM clusters v24 and v26,
fixtures/slurm/v24-*, v26-*), each captured with the exporter's own command lines."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_exporter.collectors.scheduler import COUNTERS, GAUGES
from slurm_exporter.sdiag import parse_sdiag
from slurm_exporter.sinfo import parse_sinfo
from slurm_exporter.squeue import parse_squeue, parse_squeue_jobs
from slurm_exporter.sshare import parse_sshare
from tests.helpers.slurm_captures import FIXTURES, exposition

RELEASES = {"22.05": "queue-pending", "24.11": "v24-running-pending",
            "26.05": "v26-running-pending"}
VMS = ("v24", "v26")


def read(capture: str, source: str) -> str:
    return (FIXTURES / f"{capture}.{source}.txt").read_text()


def series(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples named ``name``: their labels but ``cluster`` (sorted) -> value."""
    return {tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name}


@pytest.mark.parametrize(("cluster", "state", "flags", "cpus"), [
    ("v24", "mixed", ("planned",), (1, 1, 0, 2)),  # backfill planned a pending job here
    ("v26", "allocated", (), (2, 0, 0, 2)),
])
def test_sinfo_of_later_releases(cluster: str, state: str, flags: tuple[str, ...],
                                 cpus: tuple[int, ...]):
    lines = parse_sinfo(read(f"{cluster}-running-pending", "sinfo"))
    assert [(n.node, n.partition) for n in lines] == [
        (f"{cluster}n1", "debug"), (f"{cluster}n1", "shared")]
    for n in lines:
        assert (n.state, n.flags, n.reason) == (state, flags, "")
        assert (n.cpus_alloc, n.cpus_idle, n.cpus_other, n.cpus_total) == cpus
        assert n.memory_bytes == 1024 * 2**20
        assert n.gpus == {"t4": 2} and n.gpus_alloc == {"t4": 1}  # gpu:t4:1(IDX:0)


@pytest.mark.parametrize(("cluster", "flags"), [
    ("v24", ("completing", "planned")),  # idle+completing+planned
    ("v26", ("completing",)),
])
def test_flags_of_a_node_whose_last_job_completes(cluster: str, flags: tuple[str, ...]):
    lines = parse_sinfo(read(f"{cluster}-completing", "sinfo"))
    assert {(n.state, n.flags) for n in lines} == {("idle", flags)}
    assert {(n.cpus_alloc, n.cpus_idle) for n in lines} == {(0, 2)}
    assert {tuple(n.gpus_alloc.items()) for n in lines} == {(("t4", 0),)}  # gpu:t4:0(IDX:N/A)


@pytest.mark.parametrize("cluster", VMS)
def test_squeue_of_later_releases(cluster: str):
    # tres-per-node reads `gres/gpu:t4:1` (22.05: `gres:gpu:1`); tres-alloc names the type
    # beside the total (`gres/gpu=1,gres/gpu:t4=1`): one GPU, not two.
    text = read(f"{cluster}-running-pending", "squeue")
    jobs = dict(parse_squeue_jobs(text))
    running, held = jobs["17"], jobs["18"]
    assert (running.state, running.user, running.account, running.partition) == (
        "RUNNING", "alice", "research", "debug")
    assert (running.cpus, running.gpus, running.memory_bytes, running.gpu_type) == (
        1, 1, 50 * 2**20, "t4")
    assert (held.state, held.user, held.gpus, held.gpu_type, held.reason) == (
        "PENDING", "bob", 1, "t4", "JobHeldUser")
    het = [job_id for job_id in jobs if "+" in job_id]  # a heterogeneous job's components
    assert len(het) == 2 and {jobs[j].reason for j in het} == {"Resources"}
    queue = parse_squeue(text)
    assert sum(queue.values()) == len(text.splitlines())
    named = {job_id: reason for job_id, _, reason in queue.pending_jobs}
    assert named["18"] == "JobHeldUser" and set(het) <= set(named)
    exposed = exposition(f"{cluster}-running-pending")
    assert series(exposed, "slurm_pending_gpus") == {
        (("gpu_type", "t4"), ("partition", "debug")): 1}
    assert series(exposed, "slurm_node_gpus_alloc") == {
        (("gpu_type", "t4"), ("node", f"{cluster}n1")): 1}


@pytest.mark.parametrize("cluster", VMS)
def test_sshare_of_later_releases(cluster: str):
    # priority/multifactor (the default of these releases): root's row has NormShares and
    # EffectvUsage but no RawShares; LevelFS is `inf` for associations without usage.
    shares = {(s.account, s.user): s for s in parse_sshare(
        read(f"{cluster}-running-pending", "sshare"))}
    root = shares[("root", "")]
    assert (root.raw_shares, root.norm_shares, root.effective_usage, root.fairshare,
            root.level_fs) == (None, 0.0, 1.0, None, None)
    alice = shares[("research", "alice")]
    assert (alice.norm_shares, alice.effective_usage, alice.fairshare, alice.level_fs) == (
        1.0, 1.0, 0.333333, 1.0)
    assert alice.raw_usage == shares[("research", "")].raw_usage > 0
    assert math.isinf(shares[("teaching", "bob")].level_fs)
    assert shares[("teaching", "bob")].fairshare == 1.0


@pytest.mark.parametrize("release", RELEASES)
def test_sdiag_figures_the_exporter_exports_exist_in_every_release(release: str):
    stats = parse_sdiag(read(RELEASES[release], "sdiag"))
    wanted = {key for key, *_ in GAUGES} | {key for key, *_ in COUNTERS}
    assert wanted <= set(stats.values)
    assert stats.rpc_by_type and stats.rpc_by_user


@pytest.mark.parametrize(("cluster", "main_end", "backfill_end"), [
    ("v24", 0, 32),  # `End of job queue: 0` and `End of job queue:32`
    ("v26", 86, 34),
])
def test_sdiag_exit_sections_stay_apart(cluster: str, main_end: int, backfill_end: int):
    stats = parse_sdiag(read(f"{cluster}-running-pending", "sdiag"))
    assert stats.values[("main_exit", "End of job queue")] == main_end
    assert stats.values[("backfill_exit", "End of job queue")] == backfill_end
    assert stats.values[("backfill_exit", "Timeout (bf_max_time)")] == 0
    # Without the exit headers these lines were read as main and backfill figures.
    assert not {key for section, key in stats.values
                if section in ("main", "backfill") and key.startswith(("End of", "Hit "))}
    assert stats.values[("general", "RPC queue enabled")] == 0
    assert stats.values[("backfill", "Total cycles")] == backfill_end


def test_sdiag_of_a_later_release_exported():
    text = exposition("v24-running-pending")
    assert series(text, "slurm_scheduler_jobs_pending") == {(): 5}
    assert series(text, "slurm_scheduler_last_cycle_seconds") == {(): 267e-6}
    assert series(text, "slurm_backfill_last_cycle_seconds") == {(): 1612e-6}
    assert series(text, "slurm_backfill_cycles_total") == {(): 32}
    assert series(text, "slurm_rpc_user_calls_total")[(("user", "slurm-exporter"),)] == 192
