"""The bar: jobs that end while slurmdbd is stopped are all archived once it is back. In
the `v24` VM, slurmdbd is stopped, ten short jobs run and end (slurmctld queues their
records), a sync finds none of them, slurmdbd starts again and the queued records reach
its database, and the next sync archives each job and logs its email exactly once; a
sync after that does nothing twice.

Stopping slurmdbd would break any other VM test asking sacct, slurmrestd or sacctmgr
meanwhile: this module takes the cluster's accounting lock exclusively (every other VM
module holds it shared while it runs, tests/vm/conftest.py), so under xdist it runs alone
among the VM modules but those disturbing `v26`, and it waits for the session's VM jobs
first, so the node is free."""

from __future__ import annotations

import time
from collections import Counter

from tests.helpers import stack, vm
from tests.helpers.stack import StackJob
from tests.helpers.wait import wait_for
from webapp.archive.store import Archive
from webapp.mail.outbox import Outbox
from webapp.settings import Settings
from webapp.sources.accounting import AccountingSource

STOPS_SLURMDBD = True  # tests/vm/conftest.py: this module takes its lock exclusively
CLUSTER = "v24"
JOBS = 10
SHORT = StackJob("dbd-down", "alice", ("-c1", "--mem=50M", "--time=2"), "sleep 2")


def _queued(names: str) -> list[str]:
    """Ids of the jobs of that name slurmctld still holds pending or running."""
    out = vm.run(CLUSTER, "squeue", "-h", "-n", names, "-o", "%i").stdout
    return out.split()


def _in_view(env: dict[str, str], since: int, ids: set[str]) -> set[str]:
    """Which of ``ids`` have ended in the cluster's accounting view."""
    settings = Settings.from_env(env).for_cluster(CLUSTER)
    view = AccountingSource(settings.db_url, CLUSTER)
    return {j.job_id for j in view.ended_between(since, int(time.time()) + 1, 10_000)} & ids


def _sync(env: dict[str, str]) -> str:
    done = stack.jobreport("sync", "--cluster", CLUSTER, "--no-deliver", env=env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout


def test_jobs_ending_while_slurmdbd_is_stopped_are_archived_once_it_is_back(
        vm_jobs, vm_env, tmp_path):
    env = {**vm_env, "JOBREPORT_ARCHIVE_URL": str(tmp_path / "archive.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
           "JOBREPORT_MAIL_MIN_RUNTIME": "0", "JOBREPORT_MAIL_TO": "{user}@example.org",
           "JOBREPORT_MAIL_DAILY_CAP": "0"}
    t0 = int(time.time()) - 2
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        for stream in ("archive", "email"):
            archive.advance(CLUSTER, stream, t0)  # this test's jobs, not last week's
    with vm.slurmdbd_stopped(CLUSTER):
        ids = {vm.submit(CLUSTER, SHORT) for _ in range(JOBS)}
        wait_for(lambda: not _queued(SHORT.name), 600,
                 lambda: f"{SHORT.name} jobs ended: {_queued(SHORT.name)} still queued",
                 every=2)
        _sync(env)
        assert _in_view(env, t0, ids) == set()  # their records wait in slurmctld
        with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
            assert not {j for j, _, _ in archive.outcomes(CLUSTER, "archive")} & ids
    # slurmdbd is back: slurmctld sends what it queued.
    wait_for(lambda: _in_view(env, t0, ids) == ids, 300,
             lambda: f"records in the view: {sorted(_in_view(env, t0, ids))} of {sorted(ids)}",
             every=2)
    # A record may be slurmdbd's stand-in for a moment (the run then stops there).
    wait_for(lambda: "stopped at" not in _sync(env), 120, "a sync that went through",
             every=3)
    _sync(env)  # once more: nothing is done twice
    with Archive(env["JOBREPORT_ARCHIVE_URL"]) as archive:
        rows = archive.db.query("SELECT job_id, COUNT(*) FROM archive_jobs WHERE cluster = ?"
                                " GROUP BY job_id", (CLUSTER,))
        archived = {j: n for j, n in rows if j in ids}
        assert archived == {j: 1 for j in ids}
        for stream in ("archive", "email"):
            logged = Counter(j for j, _, _ in archive.outcomes(CLUSTER, stream) if j in ids)
            assert logged == {j: 1 for j in ids}, stream
        for j in ids:
            assert archive.get(CLUSTER, j).user == "alice"  # the full record, no stand-in
    outbox = Outbox(env["JOBREPORT_OUTBOX"])
    try:
        per_job = Counter(r.job_id for r in outbox.rows(("pending", "sending", "sent",
                                                         "failed")) if r.job_id in ids)
    finally:
        outbox.close()
    assert set(per_job.values()) <= {1}  # an email queued at most once per job
