"""Per-job monotonic I/O totals (jobs_exporter/io_totals.py) on literal scrapes, and the io
collector keeping them between scrapes of a copied tree."""

from __future__ import annotations

import shutil

from jobs_exporter.io_totals import IoTotals, Proc
from jobs_exporter.procfs import IoCounters
from tests.helpers.exporter_scrape import FIXTURES, make_settings, value

STEPD = 100  # slurmstepd: parent of the batch script and of step tasks, not counted
INIT = 1


def proc(pid, ppid, read, write=0, syscr=0, syscw=0, start=None):
    """A counted process; starttime defaults to pid * 10 (a different one = pid reuse)."""
    return Proc(
        pid, pid * 10 if start is None else start, ppid, IoCounters(read, write, syscr, syscw)
    )


def reads(totals):
    return None if totals is None else totals.read_bytes


def test_first_scrape_is_the_live_sum():
    t = IoTotals()
    got = t.update("7", [proc(200, STEPD, 1000, 10, 3, 1), proc(201, 200, 50, 5, 2, 1)])
    assert got == IoCounters(1050, 15, 5, 2)


def test_child_reaped_by_job_process_is_not_counted_twice():
    t = IoTotals()
    assert reads(t.update("7", [proc(200, STEPD, 1000), proc(201, 200, 500)])) == 1500
    # The shell waited for 201: its 500 (+ 100 done since) are now in 200's counters.
    assert reads(t.update("7", [proc(200, STEPD, 1600)])) == 1600
    assert reads(t.update("7", [proc(200, STEPD, 1700)])) == 1700


def test_chain_reaped_within_one_interval_is_not_counted_twice():
    # script 200 -> mpirun 201 -> rank 202; 201 waited for 202, 200 waited for 201.
    t = IoTotals()
    assert (
        reads(t.update("7", [proc(200, STEPD, 10), proc(201, 200, 20), proc(202, 201, 300)])) == 330
    )
    assert reads(t.update("7", [proc(200, STEPD, 10 + 20 + 400)])) == 430


def test_step_ended_keeps_its_io():
    # Batch script 200 and step task 300, both children of slurmstepd.
    t = IoTotals()
    assert reads(t.update("7", [proc(200, STEPD, 1000), proc(300, STEPD, 4000)])) == 5000
    # The step ended, slurmstepd reaped 300: its last 4000 are retired.
    assert reads(t.update("7", [proc(200, STEPD, 1100)])) == 5100
    assert reads(t.update("7", [proc(200, STEPD, 1200)])) == 5200


def test_parents_and_last_counters_carry_over_scrapes_of_the_same_processes():
    # Scrapes finding the same processes keep the parents found before and move only the
    # counters: a child reaped after them is in its parent's counters, a step task
    # reaped by slurmstepd retires its last counters, not its first.
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 10), proc(201, 200, 100), proc(300, STEPD, 1000)])
    t.update("7", [proc(200, STEPD, 20), proc(201, 200, 200), proc(300, STEPD, 4000)])
    assert reads(t.update("7", [proc(200, STEPD, 20 + 300)])) == 320 + 4000


def test_step_task_and_its_children_ended_together_are_kept_once():
    # Task 300 (child of slurmstepd) waited for its worker 301 before exiting.
    t = IoTotals()
    assert (
        reads(t.update("7", [proc(200, STEPD, 1), proc(300, STEPD, 40), proc(301, 300, 500)]))
        == 541
    )
    assert reads(t.update("7", [proc(200, STEPD, 1)])) == 541


def test_orphan_reaped_by_init_keeps_its_io():
    t = IoTotals()
    assert (
        reads(t.update("7", [proc(200, STEPD, 100), proc(201, 200, 10), proc(202, 201, 700)]))
        == 810
    )
    # 201 exited first (reaped by 200): 202 now has init as parent.
    assert reads(t.update("7", [proc(200, STEPD, 115), proc(202, INIT, 800)])) == 915
    # 202 exits and init reaps it: its last 800 are retired.
    assert reads(t.update("7", [proc(200, STEPD, 115)])) == 915
    assert reads(t.update("7", [proc(200, STEPD, 120)])) == 920


def test_child_exited_but_not_yet_reaped_is_clamped():
    t = IoTotals()
    assert reads(t.update("7", [proc(200, STEPD, 1000), proc(201, 200, 500)])) == 1500
    # 201 is a zombie: gone from cgroup.procs, its 500 not yet in 200's counters.
    assert reads(t.update("7", [proc(200, STEPD, 1000)])) == 1500
    # Reaped now: 1000 + 500 + 20 done by 201 after the first scrape.
    assert reads(t.update("7", [proc(200, STEPD, 1520)])) == 1520


def test_clamp_is_per_counter():
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 100, 100, 5, 5), proc(201, 200, 50, 0, 1, 0)])
    got = t.update("7", [proc(200, STEPD, 110, 300, 5, 9)])
    assert got == IoCounters(read_bytes=150, write_bytes=300, syscr=6, syscw=9)


def test_pid_reuse_is_a_new_process():
    t = IoTotals()
    assert reads(t.update("7", [proc(200, STEPD, 100), proc(300, STEPD, 5000)])) == 5100
    # Step task 300 ended (reaped by slurmstepd); a new step's task got pid 300.
    got = t.update("7", [proc(200, STEPD, 100), proc(300, STEPD, 7, start=99999)])
    assert reads(got) == 100 + 5000 + 7


def test_reused_parent_pid_does_not_count_as_the_parent():
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 100), proc(300, STEPD, 1), proc(301, 300, 900)])
    # Task 300 and its worker 301 both ended; pid 300 is now another step's task.
    assert reads(t.update("7", [proc(200, STEPD, 100), proc(300, STEPD, 0, start=5)])) == 1001


def test_all_processes_gone_keeps_the_last_totals():
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 100), proc(201, 200, 50)])
    # The cgroup is still there, no process left: 200 (and 201 under it) retired.
    assert reads(t.update("7", [])) == 150
    assert reads(t.update("7", [proc(400, STEPD, 5)])) == 155


def test_job_without_processes_or_history_has_no_totals():
    t = IoTotals()
    assert t.update("7", []) is None
    assert len(t) == 0


def test_job_disappearing_drops_its_state():
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 100), proc(300, STEPD, 5000)])
    t.update("8", [proc(500, STEPD, 1)])
    t.retain(["8"])
    assert len(t) == 1
    # Job id 7 seen again (e.g. a requeued job): starts from scratch, nothing retired.
    assert reads(t.update("7", [proc(200, STEPD, 3)])) == 3
    t.retain([])
    assert len(t) == 0


def test_jobs_are_independent():
    t = IoTotals()
    t.update("7", [proc(200, STEPD, 100), proc(201, 200, 50)])
    t.update("8", [proc(201, STEPD, 1)])  # other job: does not hold job 7's 201
    assert reads(t.update("7", [proc(200, STEPD, 100)])) == 150
    assert reads(t.update("8", [proc(201, STEPD, 2)])) == 2


# The io collector keeps the totals between scrapes of one registry (copied tree of a
# real job: slurm_script 8272, child of slurmstepd 8268, with children 8274 and 8276).
PIDS_FILE = "cgroup/{}/slurm_vm/uid_1001/job_2/step_batch/task_0/cgroup.procs"


def _remove_process(tree, pid):
    for controller in ("cpuacct", "memory"):
        path = tree / PIDS_FILE.format(controller)
        pids = [p for p in path.read_text().split() if p != str(pid)]
        path.write_text("".join(f"{p}\n" for p in pids))
    shutil.rmtree(tree / "proc" / str(pid))


def test_collector_keeps_totals_between_scrapes(tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from jobs_exporter.registry import JobsCollector

    tree = tmp_path / "node"
    shutil.copytree(FIXTURES / "v1-local", tree, symlinks=True)
    collector = JobsCollector(make_settings(tree), user_name=lambda uid: "alice")
    registry = CollectorRegistry()
    registry.register(collector)

    def read_bytes():
        return value(generate_latest(registry).decode(), "jobs_read_bytes_total", jobid="2")

    assert read_bytes() == 221184 + 8331264 + 0
    _remove_process(tree, 8274)  # python3 exited, not yet reaped by the script: clamped
    assert read_bytes() == 221184 + 8331264
    _remove_process(tree, 8272)  # the script exited, reaped by slurmstepd: retired
    _remove_process(tree, 8276)
    assert read_bytes() == 221184 + 8331264
    io = next(c for c in collector.collectors if c.name == "io")
    assert len(io.totals) == 1
    shutil.rmtree(tree / "cgroup")  # the job ended: no series, state dropped
    assert read_bytes() is None
    assert len(io.totals) == 0


def test_a_newer_process_on_the_recorded_parent_pid_is_not_the_parent():
    # ppid is read once per process: after the parent exits, a process that took its pid
    # later must not be taken for the parent (it started after the child).
    t = IoTotals()
    assert reads(t.update("7", [proc(200, STEPD, 100), proc(201, 200, 50)])) == 150
    assert reads(t.update("7", [proc(201, 200, 60)])) == 160  # 200 reaped outside the job
    newer = proc(200, STEPD, 0, start=5000)
    assert reads(t.update("7", [newer, proc(201, 200, 70)])) == 170
    # 201 is reaped by init, outside the job: its 70 stay counted.
    assert reads(t.update("7", [proc(200, STEPD, 5, start=5000)])) == 175


def _restarted(t: IoTotals) -> IoTotals:
    """A new exporter's totals from the old one's saved state (as JSON, as on disk)."""
    import json

    again = IoTotals()
    again.restore(json.loads(json.dumps(t.snapshot())))
    return again


def test_totals_go_on_over_a_restart_as_without_one():
    """Processes reaped while the exporter was down are judged as after one long interval:
    a step reaped outside the job keeps its I/O, a child reaped by the script is not
    counted twice, and nothing goes below what was served."""
    scrapes = [
        [proc(200, STEPD, 1000), proc(201, 200, 500), proc(300, STEPD, 4000)],
        [proc(200, STEPD, 1100), proc(201, 200, 600), proc(300, STEPD, 4100)],
        # down meanwhile: 201 reaped by the script, step 300 by slurmstepd
        [proc(200, STEPD, 1800), proc(400, STEPD, 10)],
    ]
    steady, restarted = IoTotals(), IoTotals()
    for procs in scrapes[:2]:
        steady.update("7", procs)
        restarted.update("7", procs)
    restarted = _restarted(restarted)
    assert restarted.update("7", scrapes[2]) == steady.update("7", scrapes[2])
    assert reads(steady.update("7", scrapes[2])) == 1800 + 4100 + 10
