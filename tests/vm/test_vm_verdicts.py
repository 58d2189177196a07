"""The labelled jobs on cgroup v2, live, on each VM cluster: the verdicts the host's
cgroup v1 stack gives, and the waits only cgroup v2 shows (its pressure files, PSI), each
with the pressure figure as evidence and a quiet twin without it."""

from __future__ import annotations

import pytest

from tests.helpers import vm
from tests.helpers.labelled_jobs import WAITING
from tests.helpers.sync import usage_figures
from webapp.report.service import ReportService
from webapp.settings import Settings
from webapp.sources.ended import EndedJob
from webapp.sync.bulk import prefetch

# name -> (findings it must have, findings it must not have)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    # The quiet twin of every wait: one busy core, nothing waited for.
    "busy": (set(), {"cpu_efficiency_low", *WAITING}),
    "idle": ({"cpu_efficiency_low"}, set(WAITING)),
    "two-cpus-one-used": ({"serial_on_many_cores"}, set(WAITING)),
    "oom": ({"out_of_memory"}, set()),
    "io-sync": ({"io_starved"}, {"cpu_starved", "memory_thrashing"}),
    "mem-reclaim": ({"memory_thrashing"}, {"cpu_starved"}),
    "starved": ({"cpu_starved"}, {"io_starved", "memory_thrashing", "oversubscribed"}),
}
# Kernel 7.2 (v26) counts the same thrashing mostly as I/O in PSI: measured on the same job,
# memory 2.0 s and io 48.5 s of 54 s there (another run: memory reclaim 12 % of the run,
# over the cut), memory 9.6 s and io 30.7 s of 35 s on 6.12 (v24). Its tasks waited for the
# slow disk either way; the verdict follows what PSI says: one of the two, never the CPU.
# The quiet twin itself has been judged starved on v26, in 2 of 6 runs of the suite
# (docs/testing.md, u and w) and both of issue 42's, and once on v24 (run dh: 33 % at 62 %
# CPU): its tasks waited 28-34 % of the run at 60-65 % CPU while the rest of the guest kept
# no CPU busy beside it (/proc/stat before and after its loop, run w: 0.0 cores). The wait
# there is the host's: its load starves the emulated CPU, and the guest's kernel counts it
# as the task's. The twin still has no other wait and no low-efficiency verdict.
PER_CLUSTER: dict[tuple[str, str], tuple[set[str], set[str]]] = {
    ("v26", "mem-reclaim"): (set(), {"cpu_starved", "cpu_efficiency_low"}),
    **{(c, "busy"): (set(), EXPECTED["busy"][1] - {"cpu_starved"}) for c in vm.CLUSTERS},
}
ONE_OF = {("v26", "mem-reclaim"): {"io_starved", "memory_thrashing"}}
PRESSURE = {"cpu_starved": "cpu", "io_starved": "io", "memory_thrashing": "memory"}


@pytest.fixture(scope="module")
def reports(vm_jobs, vm_env):
    base = Settings.from_env(vm_env)
    out = {}
    for cluster in vm.CLUSTERS:
        service = ReportService(base.for_cluster(cluster))
        out[cluster] = {name: service.build(vm_jobs[cluster][name], sizing=False)
                        for name in EXPECTED}
    return out


@pytest.mark.parametrize("cluster", vm.CLUSTERS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_labelled_job_has_its_findings_on_cgroup_v2(reports, cluster, name):
    report = reports[cluster][name]
    must, must_not = PER_CLUSTER.get((cluster, name), EXPECTED[name])
    found = {f.name: f for f in report.findings}
    shown = [(f.name, f.message) for f in report.findings]
    assert report.cluster == cluster and report.nodes == (vm.node(cluster),), report.nodes
    assert must <= set(found), shown
    assert not (set(found) & must_not), shown
    if (cluster, name) in ONE_OF:
        assert len(ONE_OF[cluster, name] & set(found)) == 1, shown
    for finding in must & set(PRESSURE):
        # The verdict rests on the job's own pressure file: its figure is the evidence.
        seconds = getattr(report.usage, f"{PRESSURE[finding]}_pressure_seconds")
        assert seconds and seconds > 0, (finding, report.usage)
        assert "waited" in found[finding].message or "stalled" in found[finding].message, shown


@pytest.mark.parametrize("cluster", vm.CLUSTERS)
def test_the_syncs_bulk_read_gives_the_same_verdicts_and_pressure(reports, vm_jobs, vm_env,
                                                                  cluster):
    # The sync reads a batch of ended jobs with one query per figure: on cgroup v2 its
    # reports must carry the same pressure (and so the same verdicts) as each job's own.
    service = ReportService(Settings.from_env(vm_env).for_cluster(cluster))
    ids = {name: vm_jobs[cluster][name] for name in EXPECTED}
    bulk = prefetch(service, [EndedJob(0, jid, 0, cluster) for jid in ids.values()])
    assert set(bulk.prometheus.prefetched) == set(ids.values())
    for name, jid in ids.items():
        one, many = reports[cluster][name], bulk.build(jid, sizing=False)
        assert sorted(f.name for f in many.findings) == sorted(f.name for f in one.findings)
        assert usage_figures(many.usage) == usage_figures(one.usage), name
    assert reports[cluster]["io-sync"].usage.io_pressure_seconds  # compared, not None
