"""slurm-exporter collectors on captured snapshots: what each capture must expose."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jobreport_common.constants import ConstantsError, as_json, load_constants, parse_constants
from slurm_exporter.exposition import render
from slurm_exporter.families import gauge
from tests.helpers.promtool import check_metrics
from tests.helpers.slurm_captures import CONSTANTS, FIXTURES, collector, exposition

CAPTURES = sorted({p.name.split(".")[0] for p in FIXTURES.glob("*.*.txt")})


def series(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster"))
                found[labels] = s.value
    return found


def test_every_series_carries_the_cluster():
    text = exposition("queue-pending", CONSTANTS)
    count = 0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.get("cluster") == "demo", s
            count += 1
    assert count > 100


def test_drained_mixed_node_and_its_gpus():
    text = exposition("node-drain-mixed")
    assert series(text, "slurm_node_state_info") == {
        (("flags", "drain"), ("node", "vm"), ("reason", "slurm-exporter test: drain"),
         ("state", "mixed")): 1,
    }
    key = (("flags", "drain"), ("gpu_type", "untyped"), ("state", "mixed"))
    assert series(text, "slurm_gpus")[key] == 2
    assert series(text, "slurm_gpus_alloc")[key] == 1
    assert series(text, "slurm_gpus_idle")[key] == 1  # idle, yet on a drained node:
    assert series(text, "slurm_gpus_available") == {(("gpu_type", "untyped"),): 0}
    assert series(text, "slurm_nodes") == {
        (("flags", "drain"), ("partition", "debug"), ("state", "mixed")): 1,
    }


def test_mixed_node_offers_its_idle_gpu():
    text = exposition("node-mixed")
    assert series(text, "slurm_gpus_available") == {(("gpu_type", "untyped"),): 1}
    assert series(text, "slurm_partition_gpus_available") == {
        (("gpu_type", "untyped"), ("partition", "debug")): 1,
    }
    assert series(text, "slurm_node_cpus_idle") == {(("node", "vm"),): 1}


@pytest.mark.parametrize("capture", ["node-resumed", "node-reservation-core", "node-down"])
def test_unavailable_flags_keep_gpus_unavailable(capture: str):
    assert series(exposition(capture), "slurm_gpus_available") == {(("gpu_type", "untyped"),): 0}


def test_a_node_in_two_partitions_counts_once_cluster_wide_and_once_per_partition():
    text = exposition("two-partitions")
    assert sum(series(text, "slurm_gpus").values()) == 2
    assert series(text, "slurm_nodes") == {
        (("flags", ""), ("partition", "debug"), ("state", "mixed")): 1,
        (("flags", ""), ("partition", "gpu"), ("state", "mixed")): 1,
    }
    assert series(text, "slurm_partition_cpus") == {
        (("partition", "debug"),): 2, (("partition", "gpu"),): 2,
    }
    assert len(series(text, "slurm_node_cpus")) == 1


def test_pending_reasons_are_counted_once_per_job():
    text = exposition("queue-pending")
    assert series(text, "slurm_pending_jobs") == {
        (("partition", "debug"), ("reason", r)): n for r, n in (
            ("BeginTime", 1), ("Dependency", 1), ("JobHeldUser", 1), ("PartitionConfig", 1),
            ("Priority", 4), ("Resources", 1),
        )
    }
    jobs = series(text, "slurm_jobs")
    assert jobs[(("partition", "debug"), ("state", "PENDING"))] == 9
    assert series(text, "slurm_pending_gpus") == {
        (("gpu_type", "untyped"), ("partition", "debug")): 2,
    }
    text = exposition("queue-reqnodenotavail")
    key = (("partition", "gpu"), ("reason", "ReqNodeNotAvail"))
    assert series(text, "slurm_pending_jobs")[key] == 1


def test_users_and_accounts_hold_their_resources():
    text = exposition("queue-pending")
    assert series(text, "slurm_account_gpus_alloc")[(("account", "research"),
                                                     ("state", "RUNNING"))] == 2
    assert series(text, "slurm_user_cpus_alloc")[(("state", "RUNNING"), ("user", "alice"))] == 2
    assert series(text, "slurm_user_memory_alloc_bytes")[(("state", "RUNNING"),
                                                          ("user", "alice"))] == 400 * 2**20


def test_fair_share_and_scheduler():
    text = exposition("queue-pending")
    assert series(text, "slurm_fairshare")[(("account", "research"), ("user", "alice"))] == 0
    assert (("account", "research"), ("user", "")) not in series(text, "slurm_fairshare")
    assert series(text, "slurm_scheduler_last_cycle_seconds") == {(): pytest.approx(131e-6)}
    assert series(text, "slurm_backfill_last_depth") == {(): 2}
    assert series(text, "slurm_rpc_calls_total")[(("rpc", "REQUEST_SUBMIT_BATCH_JOB"),)] == 10


def test_health_of_each_source():
    text = exposition("queue-pending")
    assert series(text, "slurm_up") == {(("source", s),): 1
                                        for s in ("sinfo", "squeue", "sshare", "sdiag")}
    assert series(text, "slurm_exporter_collector_success") == {
        (("collector", c),): 1 for c in ("nodes", "gpus", "jobs", "shares", "scheduler")
    }


def test_allocation_targets_as_gauges_and_json():
    text = exposition("node-idle", CONSTANTS)
    assert series(text, "slurm_allocation_target_gpu_years") == {
        (("account", "research"),): 1.5, (("account", "teaching"),): 0.5,
    }
    assert series(text, "slurm_allocation_target_share")[(("account", "teaching"),)] == 0.25
    assert series(text, "slurm_constant_students") == {(): 2}
    assert as_json(load_constants(CONSTANTS))["demo"]["accounts"]["research"] == {
        "gpu_years": 1.5, "target_share": 0.75,
    }


@pytest.mark.parametrize("data", [
    {"clusters": {"demo": {"accounts": {"a": {"gpu_yeras": 1}}}}},
    {"clusters": {"demo": {"students": "many"}}},
    {"cluster": {}},
])
def test_bad_constants_fail_with_where(data: dict):
    with pytest.raises(ConstantsError, match="demo|top-level"):
        parse_constants(data)


@pytest.mark.parametrize("capture", CAPTURES)
def test_exposition_passes_promtool(capture: str):
    # What /metrics serves (render), on every capture: naming conventions included.
    text = render(collector(capture, CONSTANTS).collect())
    assert text.count(b"# TYPE ") > 30  # sinfo alone gives 37 families, all four 70-odd
    assert check_metrics(text) == (0, "")


def test_promtool_refuses_a_gauge_named_like_a_counter():
    # The names the exporter gave up: the check above would catch them coming back.
    family = gauge("slurm_gpus_total", "GPUs.")
    family.add_metric(["demo"], 2)
    rc, out = check_metrics(render([family]))
    assert rc != 0 and 'non-counter metrics should not have "_total" suffix' in out


@pytest.mark.parametrize("capture", ["queue-pending", "node-drain-mixed", "two-partitions"])
def test_our_exposition_is_prometheus_clients_byte_for_byte(capture: str):
    families = list(collector(capture, CONSTANTS).collect())

    class Fixed:
        def collect(self):
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    assert render(families) == generate_latest(registry)
