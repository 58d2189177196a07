"""slurm-exporter parsers on real captures: the local stack (fixtures/slurm) and public
samples (fixtures/slurm/public). The literal GRES strings are forms real sites printed
(cited in slurm_exporter/gres.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_exporter.gres import parse_gpus
from slurm_exporter.sdiag import parse_sdiag
from slurm_exporter.sinfo import parse_sinfo
from slurm_exporter.squeue import (
    fold_reason,
    gpu_type,
    parse_squeue,
    parse_squeue_jobs,
    parse_tres,
)
from slurm_exporter.sshare import parse_sshare
from slurm_exporter.states import split_state

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
PUBLIC = FIXTURES / "public"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("capture", "state", "flags"),
    [
        ("node-idle", "idle", ()),
        ("node-mixed", "mixed", ()),
        ("queue-pending", "allocated", ()),
        ("node-drain-running", "allocated", ("drain",)),
        ("node-drain-mixed", "mixed", ("drain",)),  # sinfo printed allocated+drain
        ("node-drain-idle", "idle", ("drain",)),
        ("node-down", "down", ("drain",)),
        ("node-resumed", "idle", ("not_responding",)),
        ("node-reservation-core", "idle", ("reserved",)),
        ("node-reservation-maint", "idle", ("maintenance", "reserved")),
    ],
)
def test_node_states_stay_uncollapsed(capture: str, state: str, flags: tuple[str, ...]):
    (node,) = parse_sinfo(read(f"{capture}.sinfo.txt"))
    assert (node.node, node.partition, node.state, node.flags) == ("vm", "debug", state, flags)


def test_sinfo_line_numbers_and_reason():
    (node,) = parse_sinfo(read("node-drain-mixed.sinfo.txt"))
    assert (node.cpus_alloc, node.cpus_idle, node.cpus_other, node.cpus_total) == (1, 0, 1, 2)
    assert node.memory_bytes == 21695 * 2**20
    assert node.memory_alloc_bytes == 200 * 2**20
    assert node.memory_free_bytes == 23251 * 2**20
    assert node.cpu_load == pytest.approx(0.32)
    assert node.gpus == {"untyped": 2} and node.gpus_alloc == {"untyped": 1}
    assert node.reason == "slurm-exporter test: drain"
    (idle,) = parse_sinfo(read("node-idle.sinfo.txt"))
    assert idle.reason == ""  # sinfo prints `none`


def test_a_node_in_two_partitions_prints_one_line_each():
    lines = parse_sinfo(read("two-partitions.sinfo.txt"))
    assert [(n.node, n.partition, n.state) for n in lines] == [
        ("vm", "debug", "mixed"),
        ("vm", "gpu", "mixed"),
    ]


def test_state_symbols_of_display_formats_are_stripped():
    # StateLong lines (public sample): the base survives without its `*` suffix.
    states = [line.split(",")[1] for line in (PUBLIC / "vpenso_sinfo_nodename_state_trimmed.txt")
              .read_text().splitlines()]
    assert {split_state(s)[0] for s in states} == {
        "idle", "down", "allocated", "fail", "drained", "mixed", "draining",
    }
    assert split_state("down+cloud+not_responding") == ("down", ("cloud", "not_responding"))
    assert split_state("IDLE+POWERED_DOWN+CLOUD") == ("idle", ("cloud", "powered_down"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:2", {"untyped": 2}),
        ("gpu:rtx8000:8(S:0-1)", {"rtx8000": 8}),
        ("gpu:rtx8000:8(IDX:0-7),tpu:0", {"rtx8000": 8}),
        ("gpu:tesla:0(IDX:N/A)", {"tesla": 0}),
        ("gpu:(null):3(IDX:0-7)", {"untyped": 3}),
        ("(null)", {}),
        ("gpu:A30:4(IDX:0-3),gpu:Q6K:4(IDX:0-3)", {"A30": 4, "Q6K": 4}),
        ("tmp:844G", {}),
        ("gpu:nvidia_h100_80gb_hbm3_4g.40gb:4(S:0)", {"nvidia_h100_80gb_hbm3_4g.40gb": 4}),
        ("gpu:a100:12(IDX:0,2-11)", {"a100": 12}),
    ],
)
def test_gres_forms(text: str, expected: dict[str, int]):
    assert parse_gpus(text) == expected


def test_gres_garbage_is_a_parse_error():
    with pytest.raises(ValueError):
        parse_gpus("gpu:a100:x")


def test_squeue_pending_reasons_and_arrays():
    jobs = dict(parse_squeue_jobs(read("queue-pending.squeue.txt")))
    assert {j.reason for j in jobs.values() if j.state == "PENDING"} == {
        "PartitionConfig", "BeginTime", "Resources", "Dependency", "Priority", "JobHeldUser",
    }
    assert {"10_1", "10_2", "10_3"} <= set(jobs)  # -r: one line per array task
    running = jobs["1"]
    assert (running.state, running.user, running.account, running.partition) == (
        "RUNNING", "alice", "research", "debug",
    )
    assert (running.cpus, running.gpus, running.memory_bytes) == (1, 1, 200 * 2**20)
    assert jobs["8"].gpus == 2 and jobs["8"].reason == "Resources"


def test_the_queue_counts_jobs_that_differ_only_by_id():
    queue = parse_squeue(read("queue-pending.squeue.txt"))
    assert sum(queue.values()) == len(read("queue-pending.squeue.txt").splitlines())
    task = next(job for job in queue if job.reason == "Priority" and job.memory_bytes
                == 100 * 2**20)
    assert queue[task] == 4  # array tasks 10_1..10_3 and the alike job 11
    running = [job for job in queue if job.state == "RUNNING"]
    assert len(running) == 1 and queue[running[0]] == 2  # jobs 1 and 3


def test_reqnodenotavail_with_its_node_list_is_one_reason():
    jobs = dict(parse_squeue_jobs(read("queue-reqnodenotavail.squeue.txt")))
    assert jobs["14"].reason == "ReqNodeNotAvail"
    assert fold_reason("ReqNodeNotAvail, UnavailableNodes:cs[100,101,102]") == "ReqNodeNotAvail"


def test_reasons_of_public_samples_keep_their_text():
    # `%R` prints a pending job's reason in parentheses, a running job's node list bare.
    reasons = []
    for name in ("hb-jobinfo_squeue_format_i_E_R_C.txt", "slurm-jobinfo_squeue_format_i_E_R.txt"):
        for line in (PUBLIC / name).read_text().splitlines():
            reasons.append(fold_reason(line.split(";")[1]))
    assert "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher " \
        "priority partitions" in reasons
    assert {"Dependency", "Priority", "JobHeldUser"} <= set(reasons)


def test_tres_of_a_public_squeue_json():
    data = json.loads((PUBLIC / "rivosinc_squeue_json_21.08.5_v0.0.37.json").read_text())
    tres = [job["tres_alloc_str"] for job in data["jobs"]]
    assert parse_tres(tres[0]) == (0, int(62.5 * 2**30))  # cpu=1,mem=62.50G,node=1,billing=1
    assert parse_tres("") == (0, 0)


def test_tres_gpus_typed_and_untyped():
    assert parse_tres("cpu=1,mem=200M,node=1,billing=1,gres/gpu=1") == (1, 200 * 2**20)
    assert parse_tres("cpu=8,mem=1T,gres/gpu=4,gres/gpu:a100=4") == (4, 2**40)
    assert parse_tres("cpu=8,mem=64G,gres/gpu:a100=2,gres/gpu:v100=1") == (3, 64 * 2**30)
    assert gpu_type("gres:gpu:a100:2") == "a100"
    assert gpu_type("gres:gpu:1") == "" and gpu_type("N/A") == ""


def test_malformed_squeue_line_is_a_parse_error():
    with pytest.raises(ValueError, match="fields"):
        parse_squeue("1|1|RUNNING|alice|\n")
    with pytest.raises(ValueError, match="fields"):
        parse_squeue("1\n")


def test_cpus_state_of_public_samples():
    # `%C` and the CPUsState column share the A/I/O/T form sinfo's C1 line carries.
    (line,) = (PUBLIC / "vpenso_sinfo_h_o_C.txt").read_text().split()
    text = f"n1|p|mixed|{line}|1|0|1|0.1|(null)|gpu:0|none|\n"
    (node,) = parse_sinfo(text)
    assert (node.cpus_alloc, node.cpus_idle, node.cpus_other, node.cpus_total) == (
        5725, 877, 34, 6636,
    )
    assert node.gpus == {} and node.gpus_alloc == {"untyped": 0}


def test_sshare_accounts_and_users():
    shares = parse_sshare(read("queue-pending.sshare.txt"))
    by_key = {(s.account, s.user): s for s in shares}
    assert set(by_key) == {
        ("root", ""), ("root", "root"), ("research", ""), ("research", "alice"),
        ("teaching", ""), ("teaching", "bob"),
    }
    assert by_key[("research", "")].fairshare is None  # blank on account rows
    assert by_key[("research", "alice")].fairshare == 0.0
    assert by_key[("research", "alice")].raw_shares == 1.0


def test_sdiag_sections():
    stats = parse_sdiag(read("queue-pending.sdiag.txt"))
    assert stats.values[("general", "Server thread count")] == 3
    assert stats.values[("main", "Last cycle")] == 131
    assert stats.values[("backfill", "Last cycle")] == 235
    assert stats.values[("general", "Jobs pending")] == 8
    by_type = {r.name: r for r in stats.rpc_by_type}
    assert by_type["REQUEST_SUBMIT_BATCH_JOB"].count == 10
    assert {r.name for r in stats.rpc_by_user} == {"root", "alice", "bob"}


def test_sdiag_without_statistics_is_a_parse_error():
    with pytest.raises(ValueError):
        parse_sdiag("sdiag: error: Unable to contact slurm controller\n")


def test_pending_jobs_named_with_their_reason():
    from slurm_exporter import squeue

    queue = parse_squeue(read("queue-pending.squeue.txt"))
    named = dict((job, reason) for job, _, reason in queue.pending_jobs)
    assert named["8"] == "Resources" and named["6"] == "JobHeldUser"
    assert named["10_2"] == "Priority" and "4" not in named  # FAILED is not pending
    assert sum(queue[line] for line in queue if line.state == "PENDING") == len(named)
    old, squeue.PENDING_JOBS_MAX = squeue.PENDING_JOBS_MAX, 3
    try:
        assert len(parse_squeue(read("queue-pending.squeue.txt"))
                   .pending_jobs) == 3
    finally:
        squeue.PENDING_JOBS_MAX = old
